import HTTPServer
import KakinCore
import KakinService

/// Who may call a route, declared once per route in the table (`Routes.swift`) and checked before its handler runs.
enum RouteAccess: Sendable {
    /// Anyone: health checks; Apple's notifications and signed requests (their JWS is the credential).
    case open
    /// The path's `{customerId}`: its own customer token, a `backend` or `admin` key (or local mode).
    case customer
    /// A `backend` or `admin` key.
    case backend
    /// An `admin` key.
    case admin
    /// An `admin` key, or a signed-in support-desk session (the desk's pages link to these JSON reads).
    case adminRead
    /// The support desk's own pages: they check their session and form tokens themselves.
    case desk
}

/// What a handler gets: the request, its path parameters, and the `{customerId}` already validated.
struct RouteCall {
    let request: HTTPRequest
    let params: PathParameters
    /// The path's `{customerId}`, validated (400 `invalid_customer_id` before the handler otherwise).
    let customerId: String

    /// A path parameter by name ("" when the pattern has none of that name).
    subscript(_ name: String) -> String { params[name] ?? "" }
}

/// Where Kakin's routes are registered: each with its access, checked before the handler; each answer counted by
/// method, route pattern and status for `/metrics`; a thrown `KakinError` answered with the contract's body.
struct RouteTable {
    var router = Router()
    unowned let app: KakinApp
    /// Every route added, in order: what a table test checks (the desk's navigation links each page).
    private(set) var declared: [(method: String, pattern: String, access: RouteAccess)] = []

    init(app: KakinApp) { self.app = app }

    mutating func add(_ method: String, _ pattern: String, _ access: RouteAccess,
                      _ handler: @escaping @Sendable (RouteCall) async throws(KakinError) -> HTTPResponse) {
        declared.append((method, pattern, access))
        // The desk's pages render their own refusals; every other route gets a validated customer ID.
        let takesCustomer = pattern.contains("{customerId}") && access != .desk
        router.add(method, pattern) { [unowned app] request, params in
            let response: HTTPResponse
            do throws(KakinError) {
                var customerId = ""
                if takesCustomer {
                    guard let id = params["customerId"], CustomerID.isValid(id) else { throw KakinError(.invalidCustomerID) }
                    customerId = id
                }
                try await app.authorize(request, access, customerId: customerId)
                response = try await handler(RouteCall(request: request, params: params, customerId: customerId))
            } catch {
                response = app.errorResponse(error, for: request)
            }
            app.metrics.countRequest(method: request.method, route: pattern, status: response.status)
            return response
        }
    }
}

extension KakinApp {
    func authorize(_ request: HTTPRequest, _ access: RouteAccess, customerId: String) async throws(KakinError) {
        switch access {
        case .open, .desk:
            return
        case .customer:
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
        case .backend:
            try authenticator.authorize(request, customerId: nil, needs: .backend)
        case .admin:
            try authenticator.authorize(request, customerId: nil, needs: .admin)
        case .adminRead:
            if request.headers["Authorization"] == nil, !desk.isOpen, await desk.session(for: request) != nil { return }
            try authenticator.authorize(request, customerId: nil, needs: .admin)
        }
    }
}
