import HTTPServer
import KakinCore
import KakinStorage

extension KakinApp {
    func getWallet(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
            return .json(try await store.wallet(customerId).json, status: 200)
        }
    }

    /// `POST …/wallet/spend` with Stripe's idempotency semantics: the same key and body replay the stored
    /// answer (`Idempotent-Replayed: true`), another body is 422, too few coins is 409 with nothing spent.
    func postSpend(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
            let key = try idempotencyKey(request)
            let body = try request.jsonObject()
            let (amount, item, recipient) = try field { () throws(ConfigurationError) in
                try body.check(allowedKeys: ["amount", "item", "recipient"])
                return (try body.int("amount"), try body.boundedString("item")!, try body.boundedString("recipient", required: false))
            }
            let coins = try validAmount(amount)
            let requestId = request.requestId
            let answer = try await store.spend(
                customerId: customerId, idempotencyKey: key, request: body.canonical, amount: coins, item: item,
                recipient: recipient, order: settings.wallet.spendOrder
            ) { result in
                switch result {
                case .spent(let spendId, let amount, let paidUsed, let freeUsed, let wallet):
                    let json: JSONValue = ["spendId": .string(spendId), "amount": .int(amount), "paidUsed": .int(paidUsed),
                                           "freeUsed": .int(freeUsed), "wallet": wallet.json]
                    return (201, json.serialized())
                case .insufficient(let wallet):
                    let json = KakinError(.insufficientBalance, "Not enough coins: \(wallet.total) available, \(coins) needed; nothing was spent.")
                        .body(requestId: requestId)
                    return (409, json.serialized())
                }
            }
            if answer.status == 201, !answer.replayed { metrics.increment(.spends) }
            return idempotentResponse(answer)
        }
    }

    /// `POST …/wallet/grants` (backend scope): free coins under an idempotency key.
    func postGrant(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .backend)
            let key = try idempotencyKey(request)
            let body = try request.jsonObject()
            let (amount, reason) = try field { () throws(ConfigurationError) in
                try body.check(allowedKeys: ["amount", "reason"])
                return (try body.int("amount"), try body.boundedString("reason")!)
            }
            let coins = try validAmount(amount)
            let answer = try await store.grant(customerId: customerId, idempotencyKey: key, request: body.canonical, amount: coins,
                                               reason: reason) { result in
                switch result {
                case .granted(let entryId, let amount, let wallet):
                    let json: JSONValue = ["grantId": .string(entryId), "amount": .int(amount), "reason": .string(reason), "wallet": wallet.json]
                    return (201, json.serialized())
                }
            }
            if !answer.replayed { metrics.increment(.grants) }
            return idempotentResponse(answer)
        }
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

    /// `GET …/wallet/ledger?limit=50&cursor=…`, newest entry first.
    func getLedger(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
            var limit = 50
            if let l = request.query["limit"] {
                guard let n = Int(l), n >= 1, n <= RequestLimits.ledgerPageMax else {
                    throw KakinError(.invalidField, "limit must be from 1 to \(RequestLimits.ledgerPageMax).")
                }
                limit = n
            }
            let page = try await store.ledger(customerId: customerId, limit: limit, cursor: request.query["cursor"])
            return .json(["entries": .array(page.entries.map(\.json)), "nextCursor": .string(page.nextCursor)], status: 200)
        }
    }

    /// `GET /v1/recipients/{recipient}/support`: coins a program or performer received, and top supporters.
    func getRecipientSupport(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .backend)
            guard let recipient = params["recipient"], !recipient.isEmpty, recipient.utf8.count <= RequestLimits.textFieldLengthMax else {
                throw KakinError(.invalidField, "The recipient must be 1 to \(RequestLimits.textFieldLengthMax) characters.")
            }
            var top = 10
            if let t = request.query["top"] {
                guard let n = Int(t), n >= 1, n <= RequestLimits.topSupportersMax else {
                    throw KakinError(.invalidField, "top must be from 1 to \(RequestLimits.topSupportersMax).")
                }
                top = n
            }
            return .json(try await store.recipientSupport(recipient, top: top).json, status: 200)
        }
    }

    /// `GET /v1/admin/ledger/check`: proves every balance equals the sum of its entries (200 ok / 500 not).
    func getLedgerCheck(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .admin)
            let report = try await store.checkLedger()
            if !report.ok { logger.error("ledger check failed", ["ledger.problems": .int(Int64(report.problems.count))]) }
            return .json(report.json, status: report.ok ? 200 : 500)
        }
    }
}
