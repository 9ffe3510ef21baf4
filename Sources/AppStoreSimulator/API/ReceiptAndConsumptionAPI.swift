import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinCrypto

/// Control API extensions for legacy receipts and refund requests:
/// - `GET /simulator/v1/receipt?appAccountToken=…&encoding=appStore|xcode`: the app receipt StoreKit 1 would
///   hand the app of that Apple account, signed so that it verifies against `ca.der`;
/// - `GET /simulator/v1/consumption?transactionId=…&limit=N`: what Send Consumption Information delivered.
extension AppStoreSimulator {
    func receiptAndConsumptionRoute(_ request: HTTPRequest, _ s: [String]) throws(KakinError) -> HTTPResponse? {
        if Self.match(s, "receipt") != nil {
            guard request.method == "GET" else { return Self.methodNotAllowed(request) }
            return Self.json(try appReceipt(request))
        }
        if Self.match(s, "consumption") != nil {
            guard request.method == "GET" else { return Self.methodNotAllowed(request) }
            let tid = request.query["transactionId"]
            let limit = try Self.limit(request.query["limit"], max: Self.consumptionListMax)
            let records = core.withLock { c in c.engine.consumptionRecords(transactionId: tid, limit: limit) }
            return Self.json(["consumption": .array(records)])
        }
        return nil
    }

    static func limit(_ value: String?, max: Int) throws(KakinError) -> Int {
        guard let value else { return max }
        guard let n = Int(value), (1...max).contains(n) else { throw KakinError(.invalidField, "limit must be a whole number from 1 to \(max).") }
        return n
    }

    /// `appStore`: DER, signed by the simulator's leaf certificate with its intermediate attached (like an App
    /// Store receipt under Apple Inc. Root). `xcode`: BER, signed by the simulator's root key itself with
    /// receipt type `Xcode` (like a StoreKit Testing receipt under the project's local certificate).
    func appReceipt(_ request: HTTPRequest) throws(KakinError) -> JSONValue {
        let account = try SimulatorState.normalizedToken(request.query["appAccountToken"]) ?? ""
        let encoding: AppReceipt.Encoding
        switch request.query["encoding"] ?? "appStore" {
        case "appStore": encoding = .der
        case "xcode": encoding = .xcode
        default: throw KakinError(.invalidField, "encoding must be appStore or xcode.")
        }
        let signed = core.withLock { c -> Result<(receipt: AppReceipt, der: [UInt8]), CryptoError> in
            catchUp(&c)
            let config = c.engine.config
            let receipt = AppReceipt(
                receiptType: encoding == .xcode ? "Xcode" : (config.environment == .production ? "Production" : "ProductionSandbox"),
                appItemId: config.environment == .production ? config.appAppleId : 0, bundleId: config.bundleId,
                applicationVersion: config.bundleVersion, originalApplicationVersion: "1.0", creationDateMs: c.engine.nowMs,
                inApp: c.engine.receiptTransactions(account: account).map { tx in
                    AppReceipt.InAppPurchase(
                        quantity: Int64(tx.quantity), productId: tx.productId, transactionId: tx.transactionId,
                        originalTransactionId: tx.originalTransactionId, purchaseDateMs: tx.purchaseDate,
                        originalPurchaseDateMs: tx.originalPurchaseDate, expiresDateMs: tx.expiresDate,
                        webOrderLineItemId: tx.webOrderLineItemId, cancellationDateMs: tx.revocationDate)
                })
            let ca = c.authority
            return Result { () throws(CryptoError) in
                let der = encoding == .xcode
                    ? try receipt.signed(key: ca.rootKey, certificate: ca.root, encoding: .xcode)
                    : try receipt.signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate], encoding: .der)
                return (receipt, der)
            }
        }
        switch signed {
        case .success(let (receipt, der)):
            return ["appReceipt": .string(Base64.encode(der)), "encoding": .string(encoding == .xcode ? "xcode" : "appStore"),
                    "transactionIds": .array(receipt.inApp.compactMap(\.transactionId).map(JSONValue.string))]
        case .failure(let error):
            throw KakinError(.internalError, "The simulator could not sign the receipt.", detail: error.description)
        }
    }
}
