import HTTPServer
import KakinCore
import KakinService

/// Purchases outside the App Store (the contract's "Purchases outside the App Store"): thin adapters over
/// `ExternalPurchases` (parse → call → render), registered from `registerRoutes` with their access.
extension KakinApp {
    func registerExternalRoutes(_ r: inout RouteTable) {
        r.add("POST", "/v1/customers/{customerId}/external-purchases", .backend) { [unowned self] c throws(KakinError) in
            try await postExternalPurchase(c)
        }
        r.add("POST", "/v1/customers/{customerId}/external-purchases/{provider}/{externalId}/refund", .backend) { [unowned self] c throws(KakinError) in
            let answer = try await services.externalPurchases.refund(customerId: c.customerId, provider: c["provider"], externalId: c["externalId"],
                                                                     body: c.request.body)
            return .json(answer.json, status: answer.status)
        }
        // No API key: the Stripe-Signature header over the raw body is the credential.
        r.add("POST", "/v1/webhooks/stripe/{bundleId}", .open) { [unowned self] c throws(KakinError) in
            let answer = try await services.externalPurchases.stripeWebhook(bundleId: c["bundleId"], signatureHeader: c.request.headers["Stripe-Signature"],
                                                                            body: c.request.body)
            return .json(answer.json, status: 200)
        }
        r.add("POST", "/v1/customers/{customerId}/external-purchase-tokens", .customer) { [unowned self] c throws(KakinError) in
            let body = JSONValue.object(try c.request.jsonObject().object)
            return .json(try await services.externalPurchases.recordToken(customerId: c.customerId, body: body), status: 201)
        }
        r.add("GET", "/v1/admin/external-purchase-reports", .adminRead) { [unowned self] c throws(KakinError) in
            var limit = 100
            if let l = c.request.query["limit"] {
                guard let n = Int(l), n >= 1, n <= 500 else { throw KakinError(.invalidField, "limit must be from 1 to 500.") }
                limit = n
            }
            return .json(try await services.externalPurchases.reporter.reports(state: c.request.query["state"], limit: limit), status: 200)
        }
        // The support desk's page of the same list, Apple's errors shown (KakinAdmin).
        r.add("GET", "/admin/external-purchase-reports", .desk) { [unowned self] c in await desk.externalReportsPage(c.request) }
    }

    /// `POST /v1/customers/{id}/external-purchases` (`Idempotency-Key` required; the purchase itself is idempotent by
    /// `provider` + `externalId`): 201, or 409 `already_processed` with the same fields.
    func postExternalPurchase(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        _ = try idempotencyKey(c.request)
        let body = JSONValue.object(try c.request.jsonObject().object)
        let answer = try await services.externalPurchases.record(customerId: c.customerId, body: body)
        guard answer.status == 409, case .object(let fields) = answer.json else { return .json(answer.json, status: answer.status) }
        return .error(KakinError(.alreadyProcessed), requestId: c.request.requestId, extra: fields)
    }
}
