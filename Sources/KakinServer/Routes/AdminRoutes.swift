import AppStoreSecurity
import HTTPServer
import KakinAdmin
import KakinCore
import KakinStorage

/// The support desk's routes: `/admin/…` pages are the desk's own (`KakinAdmin`); the `/v1/admin/…` JSON reads
/// here check `admin` scope (a bearer key, or a signed-in desk session for reads) and call the desk.
extension KakinApp {
    /// Reads accept an `admin` bearer key or a support session cookie (so the pages' JSON links work).
    func authorizeAdminRead(_ request: HTTPRequest) async throws(KakinError) {
        if request.headers["Authorization"] == nil, !desk.isOpen, await desk.session(for: request) != nil { return }
        try authenticator.authorize(request, customerId: nil, needs: .admin)
    }

    /// Who acts through the API: the key's fingerprint (local mode: `local`).
    func apiActor(_ request: HTTPRequest) -> String {
        guard settings.auth != nil, let header = request.headers["Authorization"], header.hasPrefix("Bearer ") else { return "local" }
        return "api key " + Hex.encode(Array(SHA256Hash.digest(Array(header.dropFirst(7).utf8)).prefix(4)))
    }

    func getAdminCustomerEvents(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await authorizeAdminRead(request)
            let limit = try request.query["limit"].map { (s: String) throws(KakinError) -> Int in try Self.intParameter("limit", s) }
            return .json(try await desk.eventsJSON(customerId: try customerID(params), limit: limit, cursor: request.query["cursor"]), status: 200)
        }
    }

    func getAdminOrder(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await authorizeAdminRead(request)
            return .json(try await desk.orderJSON(orderId: params["orderId"] ?? ""), status: 200)
        }
    }

    func getAdminNotifications(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await authorizeAdminRead(request)
            let limit = try request.query["limit"].map { (s: String) throws(KakinError) -> Int in try Self.intParameter("limit", s) }
            return .json(try await desk.notificationsJSON(state: request.query["state"], limit: limit, cursor: request.query["cursor"]), status: 200)
        }
    }

    /// `POST /v1/admin/notifications/{notificationUUID}/replay`: back to the inbox with a fresh attempt budget.
    func postAdminReplay(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .admin)
            return .json(try await desk.replayJSON(notificationUUID: params["notificationUUID"] ?? "", actor: apiActor(request)), status: 200)
        }
    }

    func getAdminError(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await authorizeAdminRead(request)
            return .json(try await desk.errorsJSON(requestId: params["requestId"] ?? ""), status: 200)
        }
    }

    func getAdminSearch(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await authorizeAdminRead(request)
            return .json(await desk.search(request.query["q"] ?? "").json, status: 200)
        }
    }

    /// `GET /v1/admin/reports/unused-balance?asOf=YYYY-MM-DD[&format=csv]`.
    func getUnusedBalance(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await authorizeAdminRead(request)
            let asOf = request.query["asOf"] ?? ""
            switch request.query["format"] ?? "json" {
            case "json":
                return .json(try await desk.unusedBalance(asOf: asOf).json, status: 200)
            case "csv":
                var headers = HTTPHeaders()
                headers.add("Content-Type", "text/csv; charset=utf-8")
                return HTTPResponse(status: 200, headers: headers, body: try await desk.unusedBalanceCSV(asOf: asOf))
            default:
                throw KakinError(.invalidField, "format must be json or csv.")
            }
        }
    }

    static func intParameter(_ name: String, _ value: String) throws(KakinError) -> Int {
        guard let n = Int(value) else { throw KakinError(.invalidField, "\(name) must be a whole number.") }
        return n
    }
}
