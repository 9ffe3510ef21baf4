import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinService

/// Just enough W3C WebDriver (plain HTTP + JSON) to drive Debian's headless Chromium through `chromedriver`:
/// no outside packages, no browser downloads. One instance = one chromedriver process and one browser session;
/// `quit()` ends both (tests call it whatever happened). Spoken over a tiny socket client (`LoopbackHTTP`):
/// chromedriver writes headers as `Name:value`, which Linux's URLSession refuses ("Failed writing header").
final class WebDriver: @unchecked Sendable {
    static let chromedriverPath = "/usr/bin/chromedriver"
    static let chromiumPath = "/usr/bin/chromium"
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let process: Process
    let profile: URL
    let port: Int
    var sessionId = ""

    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: chromedriverPath) && FileManager.default.isExecutableFile(atPath: chromiumPath)
    }

    /// Starts chromedriver on a free loopback port and opens a headless Chromium session.
    static func start(width: Int = 1280, height: Int = 900) async throws -> WebDriver {
        // The free port can be taken between `freePort()` and chromedriver's bind (the other tests open ports all the
        // time): chromedriver then exits at once, and another port is tried.
        var attempts = 1
        while true {
            do {
                return try await start(port: try freePort(), width: width, height: height)
            } catch is ExitedAtStart where attempts < 3 {
                attempts += 1
            }
        }
    }

    struct ExitedAtStart: Error {}

    private static func start(port: Int, width: Int, height: Int) async throws -> WebDriver {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromedriverPath)
        process.arguments = ["--port=\(port)", "--allowed-ips=127.0.0.1", "--log-level=OFF"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-chromium-\(UUID().uuidString)")
        let driver = WebDriver(process: process, port: port, profile: profile)
        do {
            try await driver.waitUntilReady()
            let answer = try await driver.call("POST", "/session", [
                "capabilities": ["alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": .string(chromiumPath),
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                                 "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                                 "--disable-component-update", "--disable-default-apps", "--mute-audio", "--renderer-process-limit=1",
                                 .string("--window-size=\(width),\(height)"),
                                 .string("--user-data-dir=\(profile.path)")],
                    ],
                    "timeouts": ["pageLoad": 30000, "script": 10000, "implicit": 0],
                ]],
            ])
            guard let id = answer["value"]?["sessionId"]?.stringValue else { throw Failure(description: "no session: \(answer.jsonString)") }
            driver.sessionId = id
        } catch {
            await driver.quit()
            throw error
        }
        return driver
    }

    init(process: Process, port: Int, profile: URL) {
        self.process = process
        self.port = port
        self.profile = profile
    }

    /// Ends the browser session and the chromedriver process, and removes the browser profile.
    func quit() async {
        if !sessionId.isEmpty { _ = try? await call("DELETE", "/session/\(sessionId)") }
        if process.isRunning {
            process.terminate()
            for _ in 0..<50 where process.isRunning { try? await Task.sleep(for: .milliseconds(100)) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: profile)
    }

    // MARK: Commands

    func open(_ url: String) async throws { _ = try await command("POST", "url", ["url": .string(url)]) }

    func currentURL() async throws -> String { try await command("GET", "url").stringValue ?? "" }

    func source() async throws -> String { try await command("GET", "source").stringValue ?? "" }

    func element(_ css: String) async throws -> String {
        let found = try await command("POST", "element", ["using": "css selector", "value": .string(css)])
        guard let id = found[Self.elementKey]?.stringValue else { throw Failure(description: "no element \(css): \(found.jsonString)") }
        return id
    }

    func type(_ css: String, _ text: String) async throws {
        let id = try await element(css)
        _ = try await command("POST", "element/\(id)/clear", [:])
        _ = try await command("POST", "element/\(id)/value", ["text": .string(text)])
    }

    func click(_ css: String) async throws {
        let id = try await element(css)
        _ = try await command("POST", "element/\(id)/click", [:])
    }

    func resize(width: Int, height: Int) async throws {
        _ = try await command("POST", "window/rect", ["width": .int(Int64(width)), "height": .int(Int64(height))])
    }

    /// The viewport as PNG, written to `path`.
    func screenshot(to path: String) async throws {
        guard let b64 = try await command("GET", "screenshot").stringValue, let png = Data(base64Encoded: b64) else {
            throw Failure(description: "no screenshot")
        }
        try png.write(to: URL(fileURLWithPath: path))
    }

    /// Waits (up to `seconds`) until the page's URL and source satisfy `condition`.
    @discardableResult
    func waitFor(_ what: String, seconds: Double = 30, _ condition: (_ url: String, _ source: String) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        var url = "", source = ""
        while Date() < deadline {
            url = try await currentURL()
            source = try await self.source()
            if condition(url, source) { return source }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure(description: "timed out waiting for \(what); at \(url)")
    }

    // MARK: Wire

    func command(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        try await call(method, "/session/\(sessionId)/\(path)", body)["value"] ?? .null
    }

    func call(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        let (status, bytes) = try await LoopbackHTTP.exchange(port: port, method: method, path: path, body: body?.serialized())
        let json = (try? JSONParser.parse(bytes)) ?? .null
        guard (200..<300).contains(status) else {
            throw Failure(description: "\(method) \(path): \(json["value"]?["message"]?.stringValue ?? json.jsonString)")
        }
        return json
    }

    /// Up to 60 s: a process starting on a loaded machine.
    func waitUntilReady() async throws {
        var last = ""
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            do {
                if try await call("GET", "/status")["value"]?["ready"] == true { return }
            } catch {
                last = "\(error)"
            }
            guard process.isRunning else { throw ExitedAtStart() }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure(description: "chromedriver did not start on port \(port): \(last)")
    }

    /// A loopback port nobody listens on right now (the kernel picks it; chromedriver binds it next).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw Failure(description: "bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// One HTTP/1.1 exchange with a loopback server over a plain socket, on its own thread (a blocking read must
/// never hold one of the cooperative pool's two threads: the page chromedriver waits for is served there).
enum LoopbackHTTP {
    static let timeoutSeconds = 60
    static let responseBytesMax = 64 << 20

    static func exchange(port: Int, method: String, path: String, body: [UInt8]?) async throws -> (status: Int, body: [UInt8]) {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(status: Int, body: [UInt8]), any Error>) in
            let thread = Thread {
                continuation.resume(with: Result { try blockingExchange(port: port, method: method, path: path, body: body) })
            }
            thread.start()
        }
    }

    static func blockingExchange(port: Int, method: String, path: String, body: [UInt8]?) throws -> (status: Int, body: [UInt8]) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw WebDriver.Failure(description: "socket failed") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { throw WebDriver.Failure(description: "cannot connect to port \(port)") }
        var request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n".utf8)
        if let body {
            request += Array("Content-Type: application/json; charset=utf-8\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
        } else {
            request += Array("Content-Length: 0\r\n\r\n".utf8)
        }
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw WebDriver.Failure(description: "send failed") }
            sent += n
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var headerEnd: Int?
        var contentLength: Int?
        while true {
            if let end = headerEnd, let length = contentLength, response.count >= end + length { break }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else { throw WebDriver.Failure(description: "no answer from port \(port) (errno \(errno))") }
            response += buffer[0..<n]
            guard response.count <= responseBytesMax else { throw WebDriver.Failure(description: "answer too large") }
            if headerEnd == nil, let r = find(Array("\r\n\r\n".utf8), in: response) {
                headerEnd = r + 4
                let head = String(decoding: response[0..<r], as: UTF8.self)
                for line in head.split(separator: "\r\n").dropFirst() {
                    let kv = line.split(separator: ":", maxSplits: 1)
                    if kv.count == 2, kv[0].lowercased() == "content-length" {
                        contentLength = Int(kv[1].trimmingCharacters(in: .whitespaces))
                    }
                }
            }
        }
        guard let end = headerEnd else { throw WebDriver.Failure(description: "malformed answer") }
        let statusLine = String(decoding: response[0..<end], as: UTF8.self).split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw WebDriver.Failure(description: "malformed status line") }
        let bodyEnd = contentLength.map { min(response.count, end + $0) } ?? response.count
        return (status, Array(response[end..<bodyEnd]))
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] && Array(haystack[i..<(i + needle.count)]) == needle {
            return i
        }
        return nil
    }
}
