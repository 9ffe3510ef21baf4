import HTTPServer
import KakinCore
import KakinService
import KakinStorage

/// Purchases and restores: parse the body, call the ingest (`KakinService`), render the contract's answer.
extension KakinApp {
    /// `POST /v1/customers/{customerId}/transactions`: 201 the first time this transaction is applied, 409
    /// `already_processed` (same fields) every later time, so the app can finish the transaction.
    func postTransaction(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        if try field({ () throws(ConfigurationError) in try body.string("store") }) == "googlePlay" { return try await postPlayTransaction(c, body) }
        let processId = try c.request.header("X-Purchase-Process-Id", lengthMax: RequestLimits.purchaseProcessIdLengthMax)
        let kinds = ["signedTransaction", "transactionId", "appReceipt"]
        try field { () throws(ConfigurationError) in try body.check(allowedKeys: Set(kinds)) }
        guard kinds.filter(body.has).count == 1 else {
            throw KakinError(.invalidField, "The body must hold exactly one of signedTransaction, transactionId or appReceipt.")
        }
        let transaction: VerifiedTransaction
        let outcome: IngestOutcome
        var status: EvaluatedCustomer?
        if body.has("appReceipt") {
            let receipt = try services.appStoreSync.readReceipt(base64: try appReceiptField(body))
            (outcome, transaction) = try await services.appStoreSync.applyReceipt(receipt, customerId: c.customerId, purchaseProcessId: processId)
        } else {
            if body.has("signedTransaction") {
                let jws = try field { () throws(ConfigurationError) in try body.boundedString("signedTransaction", lengthMax: RequestLimits.jwsBytesMax)! }
                transaction = try services.ingest.verifyTransaction(jws)
            } else {
                let id = try field { () throws(ConfigurationError) in try body.boundedString("transactionId", lengthMax: 64)! }
                transaction = try await services.appStoreSync.fetchTransaction(id)
            }
            let result = try await services.ingest.apply(transaction: transaction, path: .app, presenter: c.customerId,
                                                         purchaseProcessId: processId, withStatus: true)
            outcome = result.outcome!
            status = result.status
        }
        return try await purchaseResponse(outcome, transaction: transaction.payload, customerId: c.customerId, status: status,
                                          requestId: c.request.requestId)
    }

    /// `POST …/transactions` `{"store": "googlePlay", "packageName", "productId", "purchaseToken"}`: read from the Developer
    /// API and applied once (201, then 409 with the same fields); acknowledged after the commit.
    func postPlayTransaction(_ c: RouteCall, _ body: StrictObject) async throws(KakinError) -> HTTPResponse {
        let (packageName, productId, token) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["store", "packageName", "productId", "purchaseToken"])
            return (try body.boundedString("packageName", lengthMax: 255)!, try body.boundedString("productId", lengthMax: 150)!,
                    try body.boundedString("purchaseToken", lengthMax: 1_024)!)
        }
        let answer = try await services.googlePlay.present(customerId: c.customerId, packageName: packageName, productId: productId,
                                                           purchaseToken: token)
        let status: JSONValue
        if let evaluated = answer.status { status = evaluated.json } else { status = try await services.statusReads.status(c.customerId).json }
        switch answer.outcome {
        case .applied(let applied):
            return .json(["transaction": answer.transaction, "grant": applied.grant, "customer": status], status: 201)
        case .alreadyProcessed(let applied):
            return .error(KakinError(.alreadyProcessed), requestId: c.request.requestId,
                          extra: ["transaction": answer.transaction, "grant": applied.grant, "customer": status])
        case .revoked, .notApplied:
            throw KakinError(.internalError, detail: "Play purchase answered without an applied outcome")
        }
    }

    /// The 201/409 answer; `status` is the customer's status when the ingest evaluated it in its write.
    func purchaseResponse(_ outcome: IngestOutcome, transaction: TransactionPayload, customerId: String, status evaluated: EvaluatedCustomer?,
                          requestId: String) async throws(KakinError) -> HTTPResponse {
        func customerStatus() async throws(KakinError) -> JSONValue {
            if let evaluated { return evaluated.json }
            return try await services.statusReads.status(customerId).json
        }
        switch outcome {
        case .applied(let applied):
            let status = try await customerStatus()
            return .json(["transaction": transaction.raw, "grant": applied.grant, "customer": status], status: 201)
        case .alreadyProcessed(let applied):
            let status = try await customerStatus()
            return .error(KakinError(.alreadyProcessed), requestId: requestId,
                          extra: ["transaction": transaction.raw, "grant": applied.grant, "customer": status])
        case .revoked(let at):
            throw KakinError(.transactionRevoked, detail: "transaction \(transaction.transactionId) revoked at \(at)")
        case .notApplied(let reason):
            // The presenting paths refuse these before anything is stored (`IngestPath.app`, `.receipt`).
            throw KakinError(.internalError, detail: "transaction \(transaction.transactionId) not applied: \(reason)")
        }
    }

    /// `POST /v1/customers/{customerId}/restore` (optional body `{"transactionId"}` or `{"appReceipt"}`): pulls the
    /// history from the App Store Server API, ingests it idempotently, and answers the customer's status.
    func postRestore(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        var transactionId: String?
        var receiptBase64: String?
        if !c.request.body.isEmpty {
            let body = try c.request.jsonObject()
            transactionId = try field { () throws(ConfigurationError) in
                try body.check(allowedKeys: ["transactionId", "appReceipt"])
                return try body.boundedString("transactionId", lengthMax: 64, required: false)
            }
            if body.has("appReceipt") {
                guard transactionId == nil else { throw KakinError(.invalidField, "Give transactionId or appReceipt, not both.") }
                receiptBase64 = try appReceiptField(body)
            }
        }
        if let receiptBase64 {
            try await services.appStoreSync.restore(customerId: c.customerId, receipt: try services.appStoreSync.readReceipt(base64: receiptBase64))
        } else {
            try await services.appStoreSync.restore(customerId: c.customerId, transactionId: transactionId)
        }
        return .jsonBytes(try await services.statusReads.status(c.customerId).answerJSON)
    }

    func appReceiptField(_ body: StrictObject) throws(KakinError) -> String {
        try field { () throws(ConfigurationError) in try body.boundedString("appReceipt", lengthMax: Self.appReceiptLengthMax)! }
    }
}
