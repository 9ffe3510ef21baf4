import KakinCore

/// Where a signed App Store fact entered Kakin. Every path runs the same `Ingest`; they differ only by the
/// options below (`IngestOptions`, in the core) and by what each adds to the write (`IngestRegistry`), which
/// `docs/architecture.md` lists in one table (`IngestRegistryTests` keeps them equal).
public enum IngestPath: String, Sendable, CaseIterable {
    /// `POST /v1/customers/{id}/transactions` with `signedTransaction` or `transactionId`: the app presents a purchase.
    case app
    /// The same route with `appReceipt`: the receipt's newest purchase, looked up at the App Store Server API.
    case receipt
    /// The receipt's older purchase chains, applied on the way (never the answer).
    case receiptOlder
    /// An App Store Server Notification (Apple's push or Notification History), applied by the inbox's worker.
    case notification
    /// `POST /v1/customers/{id}/restore` and the desk's restore: history and statuses from the Server API.
    case restore
    /// A subscription read back from the Server API after a renewal-date extension (admin API and desk).
    case refresh
    /// An import row (`kakin import appStore`/`revenuecat`): the customer's history from the Server API, every payload
    /// verified and every product known before anything is applied (a row applies whole or is a reject).
    case `import`

    /// The `via` recorded with an applied purchase (what support sees).
    public var via: String {
        switch self {
        case .app: return "client"
        case .receipt, .receiptOlder: return "receipt"
        case .notification: return "notification"
        case .restore: return "restore"
        case .refresh: return "extension"
        case .import: return "import"
        }
    }

    public var options: IngestOptions {
        switch self {
        case .app, .receipt, .import:
            return IngestOptions(owner: .presenter, unknownProduct: .refuse, ownerConflict: .refuse, renewalInfo: .mustVerify)
        case .receiptOlder:
            return IngestOptions(owner: .presenter, unknownProduct: .keepUnclaimed, ownerConflict: .keepUnclaimed, renewalInfo: .mustVerify)
        case .notification:
            return IngestOptions(owner: .currentOwner, unknownProduct: .retryLater, ownerConflict: .keepUnclaimed, renewalInfo: .mustVerify)
        case .restore:
            return IngestOptions(owner: .presenter, unknownProduct: .keepUnclaimed, ownerConflict: .refuse, renewalInfo: .skipUnverifiable)
        case .refresh:
            return IngestOptions(owner: .currentOwner, unknownProduct: .keepUnclaimed, ownerConflict: .keepUnclaimed, renewalInfo: .mustVerify)
        }
    }
}
