import GooglePlaySecurity
import HTTPServer
import KakinCore

/// One HTTP entry point for the whole Play simulator, mounted under `/play-simulator/`:
/// - `androidpublisher/v3/applications/{packageName}/…`: the Developer API at Google's paths (bearer token required,
///   Google's error body);
/// - `token`, `oauth2/v3/certs`: the OAuth token endpoint and the push tokens' JWKS;
/// - `v1/…`: the control API (the contract's, plus documented extensions; Kakin's error body).
extension GooglePlaySimulator {
    public static let mount = "/play-simulator"

    /// Answers one request. Never throws, never crashes on bad input.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        await routes().handle(request, notFound: { Self.failure(KakinError(.routeNotFound), $0) }, methodNotAllowed: { request, _ in
            Self.failure(KakinError(.methodNotAllowed, "\(request.method) is not allowed on \(request.path)."), request)
        })
    }

    func routes() -> Router {
        var r = Router()
        let m = Self.mount
        let api = m + "/androidpublisher/v3/applications/{packageName}"
        r.add("GET", api + "/purchases/subscriptionsv2/tokens/{token}") { req, p in await self.developerAPI(req, p, .subscriptionV2) }
        r.add("POST", api + "/purchases/subscriptionsv2/tokens/{token}") { req, p in await self.developerAPI(req, p, .subscriptionV2) }
        r.add("POST", api + "/purchases/subscriptions/{productId}/tokens/{token}") { req, p in await self.developerAPI(req, p, .subscriptionV1) }
        r.add("GET", api + "/purchases/products/{productId}/tokens/{token}") { req, p in await self.developerAPI(req, p, .product) }
        r.add("POST", api + "/purchases/products/{productId}/tokens/{token}") { req, p in await self.developerAPI(req, p, .product) }
        r.add("GET", api + "/purchases/productsv2/tokens/{token}") { req, p in await self.developerAPI(req, p, .productV2) }
        r.add("GET", api + "/purchases/voidedpurchases") { req, p in await self.developerAPI(req, p, .voided) }
        r.add("GET", api + "/orders/{token}") { req, p in await self.developerAPI(req, p, .order) }
        r.add("POST", api + "/orders/{token}") { req, p in await self.developerAPI(req, p, .order) }
        r.add("POST", m + "/token") { req, _ in self.tokenEndpoint(req) }
        r.add("GET", m + "/oauth2/v3/certs") { _, _ in Self.json(self.pushKeySet.json) }
        r.add("GET", m + "/v1/service-account.json") { req, _ in
            .json(self.serviceAccountFile(tokenURI: Self.ownTokenURL(req)))
        }
        r.add("GET", m + "/v1/access-token") { _, _ in
            Self.json(["accessToken": .string(self.issueAccessToken()), "expiresIn": .int(Self.accessTokenLifetimeSeconds - 1)])
        }
        r.add("GET", m + "/v1/products") { _, _ in
            let c = self.configuration
            return Self.json(["packageName": .string(c.packageName), "products": .array(c.products.map(\.json))])
        }
        r.add("POST", m + "/v1/purchases") { req, _ in await self.control(req) { () async throws(KakinError) -> HTTPResponse in try await self.purchase(req) } }
        r.add("POST", m + "/v1/subscriptions/{token}/actions") { req, p in await self.control(req) { () async throws(KakinError) -> HTTPResponse in try await self.subscriptionAction(req, token: p["token"]!) } }
        r.add("POST", m + "/v1/orders/{orderId}/refund") { req, p in await self.control(req) { () async throws(KakinError) -> HTTPResponse in try await self.refund(req, orderId: p["orderId"]!) } }
        r.add("GET", m + "/v1/notifications") { req, _ in await self.control(req) { () async throws(KakinError) -> HTTPResponse in try self.notificationLog(req) } }
        r.add("POST", m + "/v1/notifications/test") { req, _ in
            await self.control(req) { () async throws(KakinError) -> HTTPResponse in
                let sent = await self.act { (e: inout PlayEngine) -> [String] in
                    e.publishTest()
                    return [e.notifications.last!.summary]
                }
                return Self.json(["notifications": .array(sent.map(JSONValue.string))], status: 201)
            }
        }
        r.add("GET", m + "/v1/push") { _, _ in Self.json(self.pushJSON) }
        r.add("PUT", m + "/v1/push") { req, _ in await self.control(req) { () async throws(KakinError) -> HTTPResponse in try self.configurePush(req) } }
        return r
    }

    // MARK: Framing

    static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse { .json(value.serialized(), status: status) }

    static func failure(_ error: KakinError, _ request: HTTPRequest) -> HTTPResponse {
        .json(error.body(requestId: request.requestId).serialized(), status: error.httpStatus)
    }

    static func google(_ error: PlayAPIError) -> HTTPResponse { .json(error.json.serialized(), status: error.code) }

    /// A control endpoint: its errors in Kakin's body.
    func control(_ request: HTTPRequest, _ body: () async throws(KakinError) -> HTTPResponse) async -> HTTPResponse {
        do {
            return try await body()
        } catch {
            return Self.failure(error, request)
        }
    }

    /// `http://<Host>/play-simulator/token`: the token URL as the caller reaches this simulator.
    static func ownTokenURL(_ request: HTTPRequest) -> String {
        "http://\(request.headers["Host"] ?? "127.0.0.1")\(mount)/token"
    }

    /// The JSON object a control request carries, with only the keys the endpoint knows (an empty body is `{}`).
    static func bodyObject(_ request: HTTPRequest, allowed: Set<String>) throws(KakinError) -> JSONValue {
        if request.body.isEmpty { return [:] }
        guard let value = try? JSONParser.parse(request.body, depthMax: 8) else { throw KakinError(.malformedJSON) }
        guard let keys = value.objectValue?.keys else { throw KakinError(.invalidField, "The request body must be a JSON object.") }
        if let unknown = Set(keys).subtracting(allowed).min() {
            throw KakinError(.invalidField, "Unknown field \(unknown); the fields are \(allowed.sorted().joined(separator: ", ")).")
        }
        return value
    }
}

/// Typed reads of control request fields: nil when absent or null, an error naming the field when malformed.
extension JSONValue {
    func field<T>(_ key: String, expected: String, _ read: (JSONValue) -> T?) throws(KakinError) -> T? {
        guard let value = self[key], !value.isNull else { return nil }
        guard let typed = read(value) else { throw KakinError(.invalidField, "\(key) must be \(expected).") }
        return typed
    }

    func text(_ key: String) throws(KakinError) -> String? {
        try field(key, expected: "a string of 1 to 255 characters") { v in v.stringValue.flatMap { (1...255).contains($0.count) ? $0 : nil } }
    }

    func number(_ key: String, in range: ClosedRange<Int>) throws(KakinError) -> Int? {
        try field(key, expected: "a whole number from \(range.lowerBound) to \(range.upperBound)") { v in
            v.intValue.flatMap { range.contains($0) && v.doubleValue == Double($0) ? $0 : nil }
        }
    }

    func flag(_ key: String) throws(KakinError) -> Bool? {
        try field(key, expected: "true or false") { v in if case .bool(let b) = v { b } else { nil } }
    }
}
