import AppStoreSecurity
import HTTPServer
import KakinCore

/// The App Store Server API at Apple's paths (reference §6.2), with Apple's bearer-token check: ES256 by a
/// known key (`kid`), `aud` `appstoreconnect-v1`, the app's `bid`, `exp` in the future and at most 60 minutes
/// ahead. A refused token gets 401 with an empty body, as from Apple.
extension AppStoreSimulator {
    func serverAPI(_ request: HTTPRequest, _ s: [String]) async -> HTTPResponse {
        guard let route = Self.serverRoute(request.method, s) else {
            return Self.failure(KakinError(.routeNotFound, "No App Store Server API endpoint at \(request.method) \(request.path)."), request)
        }
        guard authorized(request) else { return HTTPResponse(status: 401) }
        do {
            return try await serve(route, request)
        } catch {
            return Self.apple(error)
        }
    }

    enum ServerRoute: Sendable {
        case transactionInfo(String), history(String, version: Int), statuses(String), lookUp(String), refunds(String)
        case notificationHistory, requestTest, testStatus(String), consumption(String), extend(String), massExtend
        case massExtendStatus(productId: String, requestIdentifier: String)
        case consumptionV1(String), setAppAccountToken(String), appTransaction(String)
        /// Apple's 2026 additions (API/Apple2026API.swift).
        case finish(String), retention(RetentionRoute)
    }

    static func serverRoute(_ method: String, _ s: [String]) -> ServerRoute? {
        if let route = apple2026ServerRoute(method, s) { return route }
        let routes: [(String, String, ([String: String]) -> ServerRoute)] = [
            ("GET", "v1/transactions/:id", { .transactionInfo($0["id"]!) }),
            ("GET", "v2/history/:id", { .history($0["id"]!, version: 2) }),
            ("GET", "v1/history/:id", { .history($0["id"]!, version: 1) }),
            ("GET", "v1/subscriptions/:id", { .statuses($0["id"]!) }),
            ("GET", "v1/lookup/:order", { .lookUp($0["order"]!) }),
            ("GET", "v2/refund/lookup/:id", { .refunds($0["id"]!) }),
            ("POST", "v1/notifications/history", { _ in .notificationHistory }),
            ("POST", "v1/notifications/test", { _ in .requestTest }),
            ("GET", "v1/notifications/test/:token", { .testStatus($0["token"]!) }),
            ("PUT", "v2/transactions/consumption/:id", { .consumption($0["id"]!) }),
            ("PUT", "v1/subscriptions/extend/:otid", { .extend($0["otid"]!) }),
            ("POST", "v1/subscriptions/extend/mass", { _ in .massExtend }),
            ("GET", "v1/subscriptions/extend/mass/:product/:rid", { .massExtendStatus(productId: $0["product"]!, requestIdentifier: $0["rid"]!) }),
            ("PUT", "v1/transactions/consumption/:id", { .consumptionV1($0["id"]!) }),
            ("PUT", "v1/transactions/:otid/appAccountToken", { .setAppAccountToken($0["otid"]!) }),
            ("GET", "v1/transactions/appTransactions/:id", { .appTransaction($0["id"]!) }),
        ]
        for (m, pattern, make) in routes where m == method {
            if let p = match(s, pattern) { return make(p) }
        }
        return nil
    }

    /// Accepts a token valid against real time (outside clients) or simulated time (Kakin in local mode,
    /// which runs on the simulator's clock).
    func authorized(_ request: HTTPRequest) -> Bool {
        guard let header = request.headers["Authorization"], header.hasPrefix("Bearer ") else { return false }
        let token = String(header.dropFirst("Bearer ".count))
        let verifier = core.withLock { $0.tokenVerifier }
        if (try? verifier.verify(token, nowSeconds: wall.nowMs() / 1000)) != nil { return true }
        return (try? verifier.verify(token, nowSeconds: clock.nowMs() / 1000)) != nil
    }

    static func appleBody(_ request: HTTPRequest) throws(AppStoreAPIError) -> JSONValue {
        guard let v = try? JSONParser.parse(request.body) else { throw .generalBadRequest }
        return v
    }

    func serve(_ route: ServerRoute, _ request: HTTPRequest) async throws(AppStoreAPIError) -> HTTPResponse {
        let q = request.queryItems.map { ($0.name, $0.value) }
        switch route {
        case .transactionInfo(let id):
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.transactionInfo(id) })
        case .history(let id, let version):
            let query = try SimulatorState.HistoryQuery(items: q)
            let revision = request.query["revision"]
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.history(id, query: query, revision: revision, version: version) })
        case .statuses(let id):
            let wanted = q.filter { $0.0 == "status" }.map(\.1)
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.statuses(id, statusFilter: wanted) })
        case .lookUp(let order):
            return Self.json(try read { (e) throws(AppStoreAPIError) in e.lookUpOrder(order) })
        case .refunds(let id):
            let revision = request.query["revision"]
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.refundHistory(id, revision: revision) })
        case .notificationHistory:
            let body = try Self.appleBody(request)
            let token = request.query["paginationToken"]
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.notificationHistory(body: body, paginationToken: token) })
        case .requestTest:
            guard sink != nil else { throw .serverNotificationURLNotFound }
            let token = try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) -> String in e.requestTestNotification() }
            return Self.json(["testNotificationToken": .string(token)])
        case .testStatus(let token):
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.testNotificationStatus(token) })
        case .consumption(let id):
            let body = try Self.appleBody(request)
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.recordConsumption(id, body: body) }
            return HTTPResponse(status: 202)
        case .extend(let otid):
            let body = try Self.appleBody(request)
            return Self.json(try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) -> JSONValue in try e.extendRenewalDate(otid, body: body) })
        case .massExtend:
            let body = try Self.appleBody(request)
            return Self.json(try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) -> JSONValue in try e.massExtend(body: body) })
        case .massExtendStatus(let productId, let rid):
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.massExtensionStatus(productId: productId, requestIdentifier: rid) })
        case .consumptionV1(let id):
            let body = try Self.appleBody(request)
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.recordConsumptionV1(id, body: body) }
            return HTTPResponse(status: 202)
        case .setAppAccountToken(let otid):
            let body = try Self.appleBody(request)
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.setAppAccountToken(otid, body: body) }
            return HTTPResponse(status: 200)
        case .appTransaction(let id):
            return Self.json(try read { (e) throws(AppStoreAPIError) in try e.appTransactionInfo(id) })
        case .finish(let id): return try await serveFinish(id)
        case .retention(let route): return try await serveRetention(route, request)
        }
    }
}
