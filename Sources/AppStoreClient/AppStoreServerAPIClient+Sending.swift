import AppStoreSecurity
import KakinCore
import StoreAPITransport

/// One endpoint call: method, path segments (each percent-encoded), query items in order, optional JSON body.
struct APICall: Sendable {
    let method: String
    /// `/inApps/v1/transactions/123`, encoded.
    let path: String
    let query: [(String, String)]
    let body: JSONValue?
    /// A body that is not JSON (Upload Image's PNG), with its content type.
    let rawBody: (bytes: [UInt8], contentType: String)?

    init(method: String, path segments: [String], query: [(String, String)] = [], body: JSONValue? = nil,
         rawBody: (bytes: [UInt8], contentType: String)? = nil)
        throws(AppStoreServerAPIError)
    {
        self.method = method
        self.path = "/" + segments.map(percentEncoded).joined(separator: "/")
        self.query = query
        self.body = body
        self.rawBody = rawBody
        if segments.contains(where: \.isEmpty) {
            throw AppStoreServerAPIError(kind: .invalidRequest, request: "\(method) \(path)", detail: "empty identifier")
        }
    }

    /// What errors show: method and path, never the query.
    var label: String { "\(method) \(path)" }

    var pathAndQuery: String {
        guard !query.isEmpty else { return path }
        return path + "?" + query.map { percentEncoded($0.0) + "=" + percentEncoded($0.1) }.joined(separator: "&")
    }
}

extension AppStoreServerAPIClient {
    typealias Host = AppStoreServerAPIConfiguration.Host

    enum Routing {
        /// The configured host only.
        case primary
        /// Production, then sandbox when production does not know the transaction (`.apple` only).
        case lookup
        /// The host of this environment (paging stays where it started).
        case environment(AppStoreEnvironment)
    }

    static let userAgent = "Kakin-AppStoreClient/1"

    func hosts(for routing: Routing, _ call: APICall) throws(AppStoreServerAPIError) -> [Host] {
        switch routing {
        case .primary: return [primary]
        case .lookup: return [primary] + (fallback.map { [$0] } ?? [])
        case .environment(let environment):
            if primary.environment == environment { return [primary] }
            if let fallback, fallback.environment == environment { return [fallback] }
            throw AppStoreServerAPIError(
                kind: .invalidRequest, request: call.label, environment: environment,
                detail: "this configuration has no host for that environment")
        }
    }

    /// Sends `call` with retries and falls back to the next host where the routing allows it.
    /// - Returns: the 2xx answer and the host that gave it.
    func send(_ call: APICall, routing: Routing) async throws(AppStoreServerAPIError) -> (HTTPClientResponse, Host) {
        let hosts = try hosts(for: routing, call)
        var index = 0
        while true {
            let host = hosts[index]
            do {
                return (try await sendWithRetries(call, to: host), host)
            } catch {
                let notFoundHere = error.httpStatus == 404
                    && error.errorCode.map(AppStoreAPIErrorCode.notFoundInEnvironment.contains) == true
                guard notFoundHere, index + 1 < hosts.count else { throw error }
                index += 1
            }
        }
    }

    /// Sends `call` (see `send`) and decodes its JSON body.
    func perform<Response>(
        _ call: APICall, routing: Routing,
        decode: (ResponseObject, Host) throws(ResponseShapeError) -> Response
    ) async throws(AppStoreServerAPIError) -> Response {
        let (response, host) = try await send(call, routing: routing)
        do {
            let json = try JSONParser.parse(response.body, depthMax: Self.responseDepthMax)
            return try decode(try ResponseObject(json), host)
        } catch let error as ResponseShapeError {
            throw AppStoreServerAPIError(
                kind: .invalidResponse, request: call.label, environment: host.environment,
                httpStatus: response.status, detail: error.reason)
        } catch {
            throw AppStoreServerAPIError(
                kind: .invalidResponse, request: call.label, environment: host.environment,
                httpStatus: response.status, detail: "body is not JSON")
        }
    }

    /// At most `retriesMax + 1` attempts; waits between them come from the backoff or a 429's `Retry-After`.
    func sendWithRetries(_ call: APICall, to host: Host) async throws(AppStoreServerAPIError) -> HTTPClientResponse {
        var attempts = 0
        while true {
            attempts += 1
            if Task.isCancelled {
                throw AppStoreServerAPIError(
                    kind: .cancelled, request: call.label, environment: host.environment, attempts: attempts - 1)
            }
            if let wait = pacer?.reserve(method: call.method, path: call.path, environment: host.environment), wait > 0 {
                do {
                    try await sleeper.sleep(ms: wait)
                } catch {
                    throw AppStoreServerAPIError(kind: .cancelled, request: call.label, environment: host.environment, attempts: attempts - 1)
                }
            }
            var error: AppStoreServerAPIError
            switch await sendOnce(call, to: host) {
            case .success(let response): return response
            case .failure(let failure): error = failure
            }
            error.attempts = attempts
            guard error.isRetryable, attempts <= configuration.retriesMax else { throw error }
            let waitMs: Int64
            if error.httpStatus == 429, let retryAfterMs = error.retryAfterMs {
                waitMs = max(0, retryAfterMs - clock.nowMs())
                guard waitMs <= configuration.rateLimitWaitMsMax else { throw error }
            } else {
                waitMs = backoffMs(retry: attempts - 1)
            }
            do {
                try await sleeper.sleep(ms: waitMs)
            } catch {
                throw AppStoreServerAPIError(kind: .cancelled, request: call.label, environment: host.environment, attempts: attempts)
            }
        }
    }

    /// Equal jitter (`RetryBackoff`) with the configured base and ceiling.
    func backoffMs(retry: Int) -> Int64 {
        RetryBackoff.equalJitterMs(retry: retry, baseMs: configuration.backoffBaseMs, maxMs: configuration.backoffMsMax)
    }

    /// One attempt with a freshly signed token.
    func sendOnce(_ call: APICall, to host: Host) async -> Result<HTTPClientResponse, AppStoreServerAPIError> {
        func failure(
            _ kind: AppStoreServerAPIError.Kind, status: Int? = nil, detail: String? = nil
        ) -> Result<HTTPClientResponse, AppStoreServerAPIError> {
            .failure(AppStoreServerAPIError(
                kind: kind, request: call.label, environment: host.environment, httpStatus: status, detail: detail))
        }
        let nowSeconds = clock.nowMs() / 1000
        let token: String
        do {
            token = try AppStoreServerAPIToken.make(
                key: configuration.privateKey, keyId: configuration.keyId, issuerId: configuration.issuerId,
                bundleId: configuration.bundleId, issuedAtSeconds: nowSeconds,
                expiresAtSeconds: nowSeconds + configuration.tokenLifetimeSeconds)
        } catch {
            return failure(.invalidRequest, detail: "the API token could not be signed")
        }
        var headers: [(name: String, value: String)] = [
            ("Authorization", "Bearer " + token), ("Accept", "application/json"), ("User-Agent", Self.userAgent),
        ]
        var body: [UInt8]? = nil
        if let json = call.body {
            body = json.serialized()
            headers.append(("Content-Type", "application/json"))
        } else if let raw = call.rawBody {
            body = raw.bytes
            headers.append(("Content-Type", raw.contentType))
        }
        let request = HTTPClientRequest(
            method: call.method, url: host.baseURL + call.pathAndQuery, headers: headers, body: body,
            timeoutMs: configuration.requestTimeoutMs)

        let response: HTTPClientResponse
        do {
            response = try await transport.send(request, responseBytesMax: configuration.responseBytesMax)
        } catch {
            switch error {
            case .timedOut: return failure(.timedOut)
            case .connectionFailed(let reason): return failure(.connectionFailed, detail: reason)
            case .responseTooLarge: return failure(.responseTooLarge)
            case .cancelled: return failure(.cancelled)
            }
        }
        guard response.body.count <= configuration.responseBytesMax else {
            return failure(.responseTooLarge, status: response.status)
        }
        switch response.status {
        case 200...299:
            return .success(response)
        case 401:
            return failure(.unauthorized, status: 401)
        default:
            var error = AppStoreServerAPIError(
                kind: .httpError, request: call.label, environment: host.environment, httpStatus: response.status)
            if response.body.count <= Self.errorBodyBytesMax,
                let json = try? JSONParser.parse(response.body, depthMax: 4), case .object(let fields) = json
            {
                if case .int(let code)? = fields["errorCode"], let code = Int(exactly: code) { error.errorCode = code }
                error.errorMessage = fields["errorMessage"]?.stringValue.map { String($0.prefix(Self.errorMessageCharactersMax)) }
                error.reportErrors = Self.reportErrors(fields["errors"])
            }
            if response.status == 429 { error.retryAfterMs = response.headers["retry-after"].flatMap(Self.retryAfterMs) }
            return .failure(error)
        }
    }

    /// `Retry-After` as Apple sends it: UNIX time in milliseconds, digits only. Anything else (an HTTP date,
    /// seconds with a sign or a fraction, a number that overflows) is ignored.
    static func retryAfterMs(_ value: String) -> Int64? {
        guard !value.isEmpty, value.utf8.count <= 19,
            value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return Int64(value)
    }
}
