/// One HTTP exchange as a store's API client sees it. A protocol because there are two: `URLSessionTransport`
/// for the stores and their simulators, and scripted fakes in tests (429s, 5xx, timeouts on demand).
public protocol HTTPTransport: Sendable {
    /// Sends one request, once: no retries here (the client retries), no redirects to other hosts expected.
    /// - Parameters:
    ///   - request: method, absolute URL, headers, optional body, and the attempt's timeout.
    ///   - responseBytesMax: a larger body is not read into memory; answer `.responseTooLarge`.
    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse
}

public struct HTTPClientRequest: Sendable {
    public var method: String
    public var url: String
    /// Header names as sent (`Authorization`, `Accept`, `Content-Type`, `User-Agent`).
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// The whole attempt, connection to last byte.
    public var timeoutMs: Int64

    public init(method: String, url: String, headers: [(name: String, value: String)], body: [UInt8]?, timeoutMs: Int64) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
    }

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }
}

public struct HTTPClientResponse: Sendable {
    public var status: Int
    /// Lower-cased header names.
    public var headers: [String: String]
    public var body: [UInt8]

    /// - Parameter headers: any case; stored lower-cased.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }
}

/// Why no HTTP answer arrived. Descriptions never carry headers (the bearer token lives there).
public enum HTTPTransportError: Error, Sendable, Equatable {
    /// The attempt's `timeoutMs` passed.
    case timedOut
    /// DNS, connection, TLS, reset: `reason` is short and free of secrets.
    case connectionFailed(reason: String)
    /// The body (or its announced `Content-Length`) exceeded `responseBytesMax`.
    case responseTooLarge
    /// The calling task was cancelled.
    case cancelled
}

/// Waits between attempts. Injected so retry and `Retry-After` tests run instantly on a manual clock.
public protocol RetrySleeper: Sendable {
    /// Returns after `ms` milliseconds, or throws `CancellationError` when the task is cancelled.
    func sleep(ms: Int64) async throws(CancellationError)
}

/// Sleeps on the real clock (`Task.sleep`).
public struct TaskSleeper: RetrySleeper {
    public init() {}

    public func sleep(ms: Int64) async throws(CancellationError) {
        do {
            try await Task.sleep(nanoseconds: UInt64(min(max(0, ms), Int64.max / 1_000_000)) * 1_000_000)
        } catch {
            throw CancellationError()
        }
    }
}

/// The wait before a retry: equal jitter, a uniform draw from [d/2, d] with d = min(base · 2^retry, max).
public enum RetryBackoff {
    public static func equalJitterMs(retry: Int, baseMs: Int64, maxMs: Int64) -> Int64 {
        let (scaled, overflow) = baseMs.multipliedReportingOverflow(by: Int64(1) << Int64(min(max(0, retry), 32)))
        let ceiling = overflow ? maxMs : min(scaled, maxMs)
        guard ceiling > 1 else { return max(0, ceiling) }
        return ceiling / 2 + Int64.random(in: 0...(ceiling - ceiling / 2))
    }
}

/// RFC 3986 unreserved characters pass; everything else (including `+`, `/`, `=` of base64 tokens) is
/// percent-encoded, so a revision or pagination token reaches the server byte for byte.
public func percentEncoded(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.append(byte)
        default:
            out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
        }
    }
    return String(decoding: out, as: UTF8.self)
}
