import AppStoreSecurity
import HTTPServer
import KakinAdmin
import KakinCore
import KakinCrypto
import KakinService

/// The support desk's `/v1/admin/…` JSON reads (their access is declared in the route table).
extension KakinApp {
    /// Who acts through the API: the key's fingerprint (local mode: `local`).
    func apiActor(_ request: HTTPRequest) -> String {
        guard settings.auth != nil, let header = request.headers["Authorization"], header.hasPrefix("Bearer ") else { return "local" }
        return "api key " + Hex.encode(Array(SHA256Hash.digest(Array(header.dropFirst(7).utf8)).prefix(4)))
    }

    func getAdminCustomerEvents(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        .json(try await desk.eventsJSON(customerId: c.customerId, limit: try intParameter(c, "limit"), cursor: c.request.query["cursor"]), status: 200)
    }

    func getAdminNotifications(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        .json(try await desk.notificationsJSON(state: c.request.query["state"], limit: try intParameter(c, "limit"), cursor: c.request.query["cursor"]),
              status: 200)
    }

    /// `GET /v1/admin/reports/unused-balance?asOf=YYYY-MM-DD[&format=csv]`.
    func getUnusedBalance(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let asOf = c.request.query["asOf"] ?? ""
        switch c.request.query["format"] ?? "json" {
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

    func intParameter(_ c: RouteCall, _ name: String) throws(KakinError) -> Int? {
        guard let value = c.request.query[name] else { return nil }
        guard let n = Int(value) else { throw KakinError(.invalidField, "\(name) must be a whole number.") }
        return n
    }
}
