import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinStorage

/// Legacy app receipts (original StoreKit) in `POST …/transactions` and `POST …/restore`: Kakin reads the
/// receipt only for its transaction IDs (checking its signature when `appReceipts.verifySignature` asks)
/// and then does what it does for a `transactionId`: it asks the App Store Server API, verifies what comes
/// back, and applies that. What the receipt itself claims is never applied.
extension KakinApp {
    /// Receipt lookups in one `POST …/transactions`: the newest purchase of each chain (a subscription's
    /// renewals are one chain), newest first. Older chains beyond it are left to a restore.
    static let receiptLookupsMax = 25
    /// IDs a restore tries (newest first) until the App Store knows one: one is enough, history is per customer.
    static let receiptRestoreAttemptsMax = 3
    static let appReceiptLengthMax = 1_100_000

    /// The receipt in a request body, read and (when configured) verified, for one of this server's apps.
    func appReceipt(_ body: StrictObject) throws(KakinError) -> AppReceipt {
        let base64 = try field { () throws(ConfigurationError) in try body.boundedString("appReceipt", lengthMax: Self.appReceiptLengthMax)! }
        let receipt: AppReceipt
        do {
            let der = try AppReceipt.der(fromBase64: base64)
            if let roots = settings.appReceiptRootsDER {
                let certificates = roots.compactMap { try? X509Certificate(der: $0) }
                receipt = try AppReceipt.parse(der: der, trustedRoots: certificates, nowMs: clock.nowMs())
            } else {
                receipt = try AppReceipt.parse(der: der)
            }
        } catch {
            switch error {
            case .malformed(let reason): throw KakinError(.invalidReceipt, detail: reason)
            case .untrusted(let reason): throw KakinError(.untrustedReceipt, detail: reason)
            }
        }
        guard let bundleId = receipt.bundleId, appsByBundle[bundleId] != nil else {
            throw KakinError(.receiptForAnotherApp, detail: "receipt bundle id \(receipt.bundleId ?? "(none)")")
        }
        return receipt
    }

    /// `POST …/transactions {"appReceipt"}`: looks up the newest purchase of each chain the receipt lists
    /// and applies each like a `transactionId`; answers (201/409, the contract's fields) for the newest one,
    /// the purchase the app is finishing. An older one that the App Store does not know, that is not in
    /// the catalog, refunded, or linked to another customer is skipped; only the newest one's refusal is
    /// the answer.
    func postReceiptTransactions(_ receipt: AppReceipt, customerId: String, purchaseProcessId: String?,
                                 requestId: String) async throws(KakinError) -> HTTPResponse {
        let chains = receipt.latestPerOriginal.prefix(Self.receiptLookupsMax)
        guard !chains.isEmpty else { throw KakinError(.receiptWithoutPurchases) }
        var answer: (outcome: PurchaseOutcome, transaction: TransactionPayload)?
        for (index, purchase) in chains.enumerated() {
            let isNewest = index == 0
            guard let id = purchase.transactionId ?? purchase.originalTransactionId else { continue }
            do {
                let jws = try await fetchSignedTransaction(id)
                let tx = try verifyTransaction(jws)
                do {
                    let outcome = try await apply(tx, jws: jws, customerId: customerId, via: "receipt",
                                                  purchaseProcessId: isNewest ? purchaseProcessId : nil)
                    if isNewest { answer = (outcome, tx) }
                } catch where error.kind == .unknownProduct && !isNewest {
                    try await store.storeUnclaimedTransaction(tx, jws: jws)
                }
            } catch where !isNewest && [.transactionNotFound, .unknownProduct, .belongsToAnotherCustomer].contains(error.kind) {
                logger.info("receipt purchase skipped", ["transaction.id": .string(id), "error.id": .string(error.kind.id)])
            }
        }
        guard let answer else { throw KakinError(.internalError, detail: "no answer for the newest receipt purchase") }
        return try await purchaseResponse(answer.outcome, transaction: answer.transaction, customerId: customerId, requestId: requestId)
    }

    /// `POST …/restore {"appReceipt"}`: restores from the first receipt ID the App Store knows (newest first);
    /// a receipt without purchases restores what the customer is already linked to, like an empty body.
    func restore(customerId: String, receipt: AppReceipt) async throws(KakinError) {
        let ids = receipt.transactionIds.prefix(Self.receiptRestoreAttemptsMax)
        guard !ids.isEmpty else { return try await restore(customerId: customerId, transactionId: nil) }
        var lastError = KakinError(.transactionNotFound)
        for id in ids {
            do {
                return try await restore(customerId: customerId, transactionId: id)
            } catch where error.kind == .transactionNotFound {
                lastError = error
            }
        }
        throw lastError
    }
}
