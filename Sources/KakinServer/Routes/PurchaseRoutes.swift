import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinStorage

extension KakinApp {
    /// `POST /v1/customers/{customerId}/transactions`: verify, credit exactly once, answer 201 the first
    /// time and 409 `already_processed` (same fields) every later time, so the app can finish the transaction.
    func postTransaction(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
            let body = try request.jsonObject()
            let processId = try request.header("X-Purchase-Process-Id", lengthMax: RequestLimits.purchaseProcessIdLengthMax)
            try field { () throws(ConfigurationError) in try body.check(allowedKeys: ["signedTransaction", "transactionId", "appReceipt"]) }
            let given = ["signedTransaction", "transactionId", "appReceipt"].filter { body.has($0) }
            guard given.count == 1 else {
                throw KakinError(.invalidField, "The body must hold exactly one of signedTransaction, transactionId or appReceipt.")
            }
            let jws: String
            if body.has("signedTransaction") {
                jws = try field { () throws(ConfigurationError) in
                    try body.boundedString("signedTransaction", lengthMax: RequestLimits.jwsBytesMax)!
                }
            } else if body.has("transactionId") {
                let id = try field { () throws(ConfigurationError) in try body.boundedString("transactionId", lengthMax: 64)! }
                jws = try await fetchSignedTransaction(id)
            } else {
                let receipt = try appReceipt(body)
                return try await postReceiptTransactions(receipt, customerId: customerId, purchaseProcessId: processId,
                                                         requestId: request.requestId)
            }
            let transaction = try verifyTransaction(jws)
            let outcome = try await apply(transaction, jws: jws, customerId: customerId, via: "client", purchaseProcessId: processId)
            return try await purchaseResponse(outcome, transaction: transaction, customerId: customerId, requestId: request.requestId)
        }
    }

    func verifyTransaction(_ jws: String) throws(KakinError) -> TransactionPayload {
        do {
            return try verifier.verifyTransaction(jws)
        } catch {
            metrics.countVerificationFailure(error.code)
            throw error.kakinError
        }
    }

    /// Applies a verified transaction to a customer (shared by the client, notification and restore paths).
    func apply(_ transaction: TransactionPayload, jws: String, customerId: String, via: String,
               purchaseProcessId: String?) async throws(KakinError) -> PurchaseOutcome {
        guard let product = appsByBundle[transaction.bundleId]?.catalog[transaction.productId] else {
            throw KakinError(.unknownProduct, "Product \(transaction.productId) is not in this server's catalog.")
        }
        let setsToken = (transaction.appAccountToken ?? "").isEmpty && setsAppAccountTokens(bundleId: transaction.bundleId)
        let outcome = try await store.applyPurchase(PurchaseApplication(
            customerId: customerId, transaction: transaction, jws: jws, product: product, via: via,
            purchaseProcessId: purchaseProcessId, transferPolicy: settings.transferPolicy, walletPolicy: settings.wallet,
            setsAppAccountToken: setsToken))
        if setsToken { appStoreJobsWorker.wake() }
        switch outcome {
        case .applied: metrics.increment(.purchasesApplied)
        case .alreadyProcessed: metrics.increment(.purchasesDuplicate)
        case .revoked: break
        }
        return outcome
    }

    func purchaseResponse(_ outcome: PurchaseOutcome, transaction: TransactionPayload, customerId: String,
                          requestId: String) async throws(KakinError) -> HTTPResponse {
        let status = try await customerStatusJSON(customerId)
        switch outcome {
        case .applied(let applied):
            return .json(["transaction": transaction.raw, "grant": applied.grant, "customer": status], status: 201)
        case .alreadyProcessed(let applied):
            return .error(KakinError(.alreadyProcessed), requestId: requestId,
                          extra: ["transaction": transaction.raw, "grant": applied.grant, "customer": status])
        case .revoked(let at):
            throw KakinError(.transactionRevoked, detail: "transaction \(transaction.transactionId) revoked at \(at)")
        }
    }

    /// `GET /v1/customers/{customerId}`: the proactive-restore answer.
    func getCustomer(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
            return .json(try await customerStatusJSON(customerId), status: 200)
        }
    }

    /// The status from the customer's status inputs (one read of a bounded handful of rows), or from the
    /// whole history when they can't stand for it; a customer seen for the first time is created.
    func customerStatusJSON(_ customerId: String) async throws(KakinError) -> JSONValue {
        var snapshot: CustomerSnapshot
        if let inputs = try await store.customerStatusInputs(customerId) {
            snapshot = inputs
        } else {
            snapshot = try await store.customerSnapshot(customerId)
        }
        var history = Self.history(snapshot)
        if StatusInputs.needsWholeHistory(history.transactions) {
            snapshot = try await store.customerSnapshot(customerId)
            history = Self.history(snapshot)
        }
        let status = StatusEngine.evaluate(history, catalog: mergedCatalog, nowMs: clock.nowMs())
        return status.json(customerId: customerId, appAccountToken: snapshot.customer.appAccountToken, wallet: snapshot.wallet)
    }

    static func history(_ snapshot: CustomerSnapshot) -> CustomerHistory {
        CustomerHistory(
            transactions: snapshot.transactionJWS.compactMap { StoredJWS.payload($0).flatMap { try? TransactionPayload(json: $0) } },
            renewalInfos: snapshot.renewalInfoJWS.compactMap { StoredJWS.payload($0).flatMap { try? RenewalInfoPayload(json: $0) } })
    }
}
