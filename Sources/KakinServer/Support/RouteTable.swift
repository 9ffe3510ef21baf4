import HTTPServer

/// Where Kakin's own routes are registered (`registerRoutes`): a `Router` whose handlers also count their
/// answers by method, route pattern and status for `/metrics`. Same `add` as `Router`.
struct RouteTable {
    var router = Router()
    let metrics: Metrics

    mutating func add(_ method: String, _ pattern: String, _ handler: @escaping RouteHandler) {
        router.add(method, pattern) { [metrics] request, params in
            let response = await handler(request, params)
            metrics.countRequest(method: request.method, route: pattern, status: response.status)
            return response
        }
    }
}
