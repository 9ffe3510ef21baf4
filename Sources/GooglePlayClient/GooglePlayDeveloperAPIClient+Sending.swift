import GooglePlaySecurity
import KakinCore
import KakinCrypto
import StoreAPITransport

extension GooglePlayDeveloperAPIClient {
    /// Sends one API call with retries and answers its JSON body (`{}` for an empty 2xx).
    /// - Parameters:
    ///   - name: the API method, for errors (`purchases.subscriptionsv2.get`); never the token.
    ///   - segments: path after `applications/{packageName}/`, each percent-encoded; `verb` is appended as `:verb`.
    func call(_ method: String, _ name: String, _ segments: [String], verb: String? = nil, query: [(String, String)] = [],
              body: JSONValue? = nil) async throws(GooglePlayAPIError) -> JSONValue {
        let request = "\(method) \(name)"
        guard !segments.contains(where: \.isEmpty) else { throw GooglePlayAPIError(kind: .invalidRequest, request: request, detail: "empty identifier") }
        var url = configuration.apiRoot + "androidpublisher/v3/applications/" + percentEncoded(configuration.packageName) + "/"
            + segments.map(percentEncoded).joined(separator: "/") + (verb.map { ":" + $0 } ?? "")
        url += "?" + (query + [("alt", "json")]).map { percentEncoded($0.0) + "=" + percentEncoded($0.1) }.joined(separator: "&")
        var attempts = 0
        var renewedToken = false
        while true {
            attempts += 1
            var error: GooglePlayAPIError
            do throws(GooglePlayAPIError) {
                return try await once(method, url: url, request: request, body: body)
            } catch let failure {
                error = failure
            }
            error.attempts = attempts
            // A 401 with a cached token: the token may have been revoked; one fresh token, one more try.
            if error.kind == .unauthorized, !renewedToken {
                renewedToken = true
                tokens.withLock { $0 = nil }
                continue
            }
            guard error.isRetryable, attempts <= configuration.retriesMax, !Task.isCancelled else { throw error }
            let waitMs: Int64
            if let retryAfter = error.retryAfterMs {
                guard retryAfter <= configuration.retryAfterWaitMsMax else { throw error }
                waitMs = retryAfter
            } else {
                waitMs = RetryBackoff.equalJitterMs(retry: attempts - 1, baseMs: configuration.backoffBaseMs, maxMs: configuration.backoffMsMax)
            }
            do {
                try await sleeper.sleep(ms: waitMs)
            } catch {
                throw GooglePlayAPIError(kind: .cancelled, request: request)
            }
        }
    }

    /// One attempt.
    func once(_ method: String, url: String, request: String, body: JSONValue?) async throws(GooglePlayAPIError) -> JSONValue {
        let token = try await accessToken()
        var headers: [(name: String, value: String)] = [("Authorization", "Bearer " + token), ("Accept", "application/json"),
                                                        ("User-Agent", Self.userAgent)]
        var bytes: [UInt8]? = nil
        if method == "POST" {
            bytes = (body ?? .object([:])).serialized()
            headers.append(("Content-Type", "application/json"))
        }
        let response = try await exchange(HTTPClientRequest(method: method, url: url, headers: headers, body: bytes, timeoutMs: configuration.requestTimeoutMs),
                                          request: request)
        guard (200...299).contains(response.status) else { throw Self.failure(response, request: request) }
        if response.body.isEmpty { return .object([:]) }
        guard let json = try? JSONParser.parse(response.body, depthMax: 16), case .object = json else {
            throw GooglePlayAPIError(kind: .invalidResponse, request: request, httpStatus: response.status, detail: "body is not a JSON object")
        }
        return json
    }

    /// The transport, its failures mapped.
    func exchange(_ http: HTTPClientRequest, request: String) async throws(GooglePlayAPIError) -> HTTPClientResponse {
        do throws(HTTPTransportError) {
            let response = try await transport.send(http, responseBytesMax: configuration.responseBytesMax)
            guard response.body.count <= configuration.responseBytesMax else { throw .responseTooLarge }
            return response
        } catch {
            switch error {
            case .timedOut: throw GooglePlayAPIError(kind: .timedOut, request: request)
            case .connectionFailed(let reason): throw GooglePlayAPIError(kind: .connectionFailed, request: request, detail: reason)
            case .responseTooLarge: throw GooglePlayAPIError(kind: .responseTooLarge, request: request)
            case .cancelled: throw GooglePlayAPIError(kind: .cancelled, request: request)
            }
        }
    }

    /// A non-2xx answer as the error it means, with Google's `reason`, `status` and message.
    static func failure(_ response: HTTPClientResponse, request: String) -> GooglePlayAPIError {
        let kind: GooglePlayAPIError.Kind = switch response.status {
        case 401: .unauthorized
        case 410: .tokenNoLongerValid
        case 429, 500...599: .unavailable
        case 400...499: .refused
        default: .refused  // 3xx: redirects are never followed
        }
        var error = GooglePlayAPIError(kind: kind, request: request, httpStatus: response.status)
        if response.body.count <= errorBodyBytesMax, let json = try? JSONParser.parse(response.body, depthMax: 6), let body = GoogleAPIErrorBody(json: json) {
            error.reason = body.reason
            error.status = body.status
            error.message = body.message.map { String($0.prefix(300)) }
        }
        if response.status == 429 || response.status == 503, let value = response.headers["retry-after"], value.utf8.count <= 6,
            let seconds = Int64(value), seconds >= 0
        {
            error.retryAfterMs = seconds * 1000
        }
        return error
    }

    // MARK: Access tokens

    /// A cached token while it has more than the margin left, else a new one from the JWT-bearer grant.
    func accessToken() async throws(GooglePlayAPIError) -> String {
        let nowMs = clock.nowMs()
        let marginMs = configuration.tokenRefreshMarginSeconds * 1000
        if let cached = tokens.withLock({ $0 }), cached.expiresAtMs - marginMs > nowMs { return cached.value }
        let request = "POST oauth2.token"
        let account = configuration.serviceAccount
        let assertion: String
        do {
            assertion = try ServiceAccountAssertion.make(account: account, nowSeconds: nowMs / 1000)
        } catch {
            throw GooglePlayAPIError(kind: .invalidRequest, request: request, detail: "the assertion could not be signed")
        }
        let form = "grant_type=" + percentEncoded(ServiceAccountAssertion.grantType) + "&assertion=" + percentEncoded(assertion)
        let response = try await exchange(HTTPClientRequest(method: "POST", url: account.tokenURI,
                                                            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                                                                      ("User-Agent", Self.userAgent)],
                                                            body: Array(form.utf8), timeoutMs: configuration.requestTimeoutMs), request: request)
        let json = try? JSONParser.parse(response.body, depthMax: 4)
        guard (200...299).contains(response.status) else {
            var error = GooglePlayAPIError(kind: response.status >= 500 || response.status == 429 ? .unavailable : .tokenGrantRefused, request: request,
                                           httpStatus: response.status)
            error.reason = json?["error"]?.stringValue
            error.message = json?["error_description"]?.stringValue.map { String($0.prefix(300)) }
            throw error
        }
        guard let token = json?["access_token"]?.stringValue, !token.isEmpty, let expiresIn = json?["expires_in"]?.int64Value, expiresIn > 0 else {
            throw GooglePlayAPIError(kind: .invalidResponse, request: request, httpStatus: response.status, detail: "no access_token or expires_in")
        }
        tokens.withLock { $0 = CachedToken(value: token, expiresAtMs: nowMs + min(expiresIn, 86_400) * 1000) }
        return token
    }
}

/// The push tokens' JWKS over HTTP (`rtdn.certsUrl`: Google's `https://www.googleapis.com/oauth2/v3/certs`, or the
/// Play simulator's `/play-simulator/oauth2/v3/certs`). One GET per fetch, bounded in size and time, no retries
/// (`PushTokenVerifier` decides when to fetch again).
public struct HTTPKeySetSource: JSONWebKeySetSource {
    public let url: String
    let transport: any HTTPTransport
    public let timeoutMs: Int64

    public init(url: String, transport: any HTTPTransport, timeoutMs: Int64 = 5_000) {
        self.url = url
        self.transport = transport
        self.timeoutMs = timeoutMs
    }

    public func fetchKeySet() async throws(PushTokenFailure) -> JSONWebKeySet {
        let request = HTTPClientRequest(method: "GET", url: url, headers: [("Accept", "application/json")], body: nil, timeoutMs: timeoutMs)
        guard let response = try? await transport.send(request, responseBytesMax: Self.bytesMax), response.status == 200,
            let json = try? JSONParser.parse(response.body, depthMax: 8), let set = try? JSONWebKeySet(json: json), !set.keys.isEmpty
        else { throw PushTokenFailure(.keysUnavailable) }
        return set
    }
}
