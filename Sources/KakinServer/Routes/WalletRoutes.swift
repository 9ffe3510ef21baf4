import HTTPServer
import KakinCore
import KakinService
import KakinStorage

/// The wallet's routes: parse, call `Wallets`, render. Spends and grants follow Stripe's idempotency semantics (the
/// same key and body replay the stored answer with `Idempotent-Replayed: true`, another body is 422).
extension KakinApp {
    func postSpend(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let key = try idempotencyKey(c.request)
        let body = try c.request.jsonObject()
        let (amount, item, recipient) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["amount", "item", "recipient"])
            return (try body.int("amount"), try body.boundedString("item")!, try body.boundedString("recipient", required: false))
        }
        let spend = SpendRequest(customerId: c.customerId, idempotencyKey: key, canonicalRequest: body.canonical, amount: try validAmount(amount),
                                 item: item, recipient: recipient)
        return idempotentResponse(try await services.wallets.spend(spend, requestId: c.request.requestId))
    }

    func postGrant(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let key = try idempotencyKey(c.request)
        let body = try c.request.jsonObject()
        let (amount, reason) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["amount", "reason"])
            return (try body.int("amount"), try body.boundedString("reason")!)
        }
        let grant = GrantRequest(customerId: c.customerId, idempotencyKey: key, amount: try validAmount(amount), reason: reason)
        return idempotentResponse(try await services.wallets.grant(grant))
    }

    /// `GET …/wallet/ledger?limit=50&cursor=…`, newest entry first.
    func getLedger(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        var limit = 50
        if let l = c.request.query["limit"] {
            guard let n = Int(l), n >= 1, n <= RequestLimits.ledgerPageMax else {
                throw KakinError(.invalidField, "limit must be from 1 to \(RequestLimits.ledgerPageMax).")
            }
            limit = n
        }
        let page = try await services.wallets.ledger(customerId: c.customerId, limit: limit, cursor: c.request.query["cursor"])
        return .json(["entries": .array(page.entries.map(\.json)), "nextCursor": .string(page.nextCursor)], status: 200)
    }

    /// `GET /v1/recipients/{recipient}/support`: coins a program or performer received, and top supporters.
    func getRecipientSupport(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let recipient = c["recipient"]
        guard !recipient.isEmpty, recipient.utf8.count <= RequestLimits.textFieldLengthMax else {
            throw KakinError(.invalidField, "The recipient must be 1 to \(RequestLimits.textFieldLengthMax) characters.")
        }
        var top = 10
        if let t = c.request.query["top"] {
            guard let n = Int(t), n >= 1, n <= RequestLimits.topSupportersMax else {
                throw KakinError(.invalidField, "top must be from 1 to \(RequestLimits.topSupportersMax).")
            }
            top = n
        }
        return .json(try await services.wallets.recipientSupport(recipient, top: top).json, status: 200)
    }

    func idempotencyKey(_ request: HTTPRequest) throws(KakinError) -> String {
        guard let key = request.headers["Idempotency-Key"], !key.isEmpty, key.utf8.count <= RequestLimits.idempotencyKeyLengthMax else {
            throw KakinError(.idempotencyKeyRequired)
        }
        return key
    }

    func validAmount(_ amount: Int64?) throws(KakinError) -> Int64 {
        guard let amount, amount > 0, amount <= WalletRules.amountMax else {
            throw KakinError(.invalidAmount, "The amount must be a whole number of coins from 1 to \(WalletRules.amountMax).")
        }
        return amount
    }

    func idempotentResponse(_ answer: IdempotentAnswer) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json; charset=utf-8")
        if answer.replayed { headers.add("Idempotent-Replayed", "true") }
        return HTTPResponse(status: answer.status, headers: headers, body: answer.body)
    }
}
