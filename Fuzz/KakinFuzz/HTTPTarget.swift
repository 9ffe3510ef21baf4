import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import KakinServer
import KakinService

/// An HTTP request through the real edge (libmicrohttpd, limits, percent-decoding, the router, auth,
/// every route's validation) of a Kakin running in this process on a loopback port, over SQLite in memory.
///
/// The input is the request's parts: a first line `METHOD TARGET`, header lines `Name: value`, a blank
/// line, then the body. The harness frames it (`Host`, `Content-Length`, `Connection: close`), so each
/// input is one complete request and its answer comes back at once. Properties: no 500, an answer within
/// `answerSecondsMax`, and every error Kakin answers itself (it carries `X-Request-Id`) has the contract's
/// JSON body. libmicrohttpd's own refusals (431/414/400 without `X-Request-Id`) are left to it.
struct HTTPTarget: FuzzTarget {
    static let answerSecondsMax = 30
    static let apiKey = "fuzz-admin-key"
    let port: Int

    init() {
        signal(SIGPIPE, SIG_IGN)
        let dir = FuzzFiles.directory("http")
        let ca = try! SigningCertificateAuthority(nowMs: 1_767_225_600_000)
        _ = FileManager.default.createFile(atPath: dir + "/root.der", contents: Data(ca.rootDER))
        // Auth has no public initialiser: the config is read like a file, then the demo catalog put in.
        let config: JSONValue = [
            "listen": ["host": "127.0.0.1", "port": 0],
            "database": .string("sqlite:\(dir)/kakin.db"),
            "trustedRoots": ["root.der"],
            "apps": [["bundleId": "placeholder", "environments": ["Sandbox"], "products": [["productId": "p", "type": "consumable", "coins": 1]]]],
            "auth": ["apiKeys": [["sha256": .string(Hex.string(SHA256Hash.digest(Array(Self.apiKey.utf8)))), "scope": "admin"]],
                     "customerTokens": ["hs256SecretEnv": "KAKIN_FUZZ_SECRET"]],
        ]
        let configuration: Configuration
        do {
            configuration = try Configuration.parse(config, baseDirectory: dir, environment: ["KAKIN_FUZZ_SECRET": String(repeating: "s", count: 32)])
        } catch {
            finding("the fuzz server's own config is refused: \(error)")
        }
        var withDemo = configuration
        withDemo.apps = [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId,
                                           environments: [.sandbox, .xcode], catalog: .demo)]
        var options = KakinRuntime.Options(configuration: withDemo, logger: Logger(minimum: .error))
        options.http.requestTimeoutSeconds = Self.answerSecondsMax
        let startOptions = options
        let started = blocking { () -> Int in
            do {
                return try await KakinRuntime.start(startOptions).port
            } catch {
                finding("the fuzz server did not start: \(error)")
            }
        }
        port = started
    }

    func run(_ input: [UInt8]) {
        let request = Self.frame(input)
        let shown = String(decoding: request.prefix(2000), as: UTF8.self)
        switch exchange(request) {
        case .timedOut:
            finding("no answer within \(Self.answerSecondsMax) s to:\n\(shown)")
        case .closed(let bytes):
            guard let answer = Self.parse(bytes) else {
                // libmicrohttpd may drop a connection whose request line it cannot read; anything else is answered.
                if Self.hasWellFormedRequestLine(request) { finding("connection closed without an answer to:\n\(shown)") }
                return
            }
            check(answer, request: request)
        }
    }

    /// Builds one complete HTTP/1.1 request from the input's parts.
    static func frame(_ input: [UInt8]) -> [UInt8] {
        let separator = Array("\n\n".utf8)
        var headEnd = input.count
        var bodyStart = input.count
        if input.count >= 2 {
            for i in 0..<(input.count - 1) where input[i] == separator[0] && input[i + 1] == separator[1] {
                headEnd = i
                bodyStart = i + 2
                break
            }
        }
        let lines = input[0..<headEnd].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
            .map { $0.filter { $0 != 0x0D && $0 != 0x00 } }
        let body = Array(input[bodyStart...])
        var first = lines.first.map { Array($0) } ?? Array("GET /".utf8)
        if !first.contains(UInt8(ascii: " ")) { first = Array("GET ".utf8) + first }
        var out = first + Array(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.count)\r\n".utf8)
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            if ["host", "connection", "content-length", "transfer-encoding", "expect"].contains(name) { continue }
            out += line + [0x0D, 0x0A]
        }
        return out + [0x0D, 0x0A] + body
    }

    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    enum Exchange {
        case closed([UInt8])
        case timedOut
    }

    /// `METHOD SP TARGET SP HTTP/1.1` with a token method and a target of visible ASCII.
    static func hasWellFormedRequestLine(_ request: [UInt8]) -> Bool {
        guard let end = request.firstIndex(of: 0x0D) else { return false }
        let parts = request[..<end].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        let token = Set(Array("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8))
        return parts[0].allSatisfy(token.contains) && parts[1].allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// Sends the request on a fresh connection and reads until the server closes it.
    func exchange(_ request: [UInt8]) -> Exchange {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { finding("socket() failed: errno \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: Self.answerSecondsMax, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        // libFuzzer's once-a-second SIGALRM (for -timeout) interrupts blocking calls: retry on EINTR.
        var connected: Int32
        repeat {
            connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        } while connected != 0 && errno == EINTR
        guard connected == 0 || errno == EISCONN else { finding("connect() failed: errno \(errno)") }
        // The server may answer and close before reading everything (413): a failed send is fine.
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            sent += n
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received += buffer[0..<n]
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n == 0 || errno == ECONNRESET { break }
            return .timedOut
        }
        return .closed(received)
    }

    static func parse(_ bytes: [UInt8]) -> Answer? {
        let marker = Array("\r\n\r\n".utf8)
        guard bytes.count >= 12, let end = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<($0 + 4)]) == marker }) else {
            return nil
        }
        let head = String(decoding: bytes[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: Array(bytes[(end + 4)...]))
    }

    func check(_ answer: Answer, request: [UInt8]) {
        let shown = String(decoding: request.prefix(2000), as: UTF8.self)
        if answer.status == 500 { finding("500 for:\n\(shown)\nanswer: \(String(decoding: answer.body.prefix(500), as: UTF8.self))") }
        let isHead = request.starts(with: Array("HEAD ".utf8))
        if answer.status >= 400, answer.headers["x-request-id"] != nil, !isHead {
            let json = try? JSONParser.parse(answer.body)
            if json?["error"]?["code"]?.stringValue == nil || json?["error"]?["id"]?.stringValue == nil {
                finding("\(answer.status) without the contract's error body for:\n\(shown)\nanswer: \(String(decoding: answer.body.prefix(500), as: UTF8.self))")
            }
        }
    }
}

enum Hex {
    static func string(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
    }
}
