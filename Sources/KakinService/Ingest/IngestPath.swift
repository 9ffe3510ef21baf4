import KakinCore

/// Where a signed App Store fact entered Kakin. Every path runs the same `Ingest`; they differ only by the
/// options below, which `docs/architecture.md` lists in one table (keep the two equal).
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

/// The named choices that tell one path from another.
public struct IngestOptions: Sendable, Hashable {
    /// Who gets the purchase.
    public enum Owner: String, Sendable {
        /// The customer presenting it (the route's `{customerId}`), per the transfer policy.
        case presenter
        /// Whoever owns its chain now (`Ownership.currentOwner`); nobody yet: stored, linked when presented.
        case currentOwner
    }

    /// A product missing from the app's catalog.
    public enum UnknownProduct: String, Sendable {
        /// 422 `unknown_product`; nothing stored.
        case refuse
        /// Stored (support sees it; a later presentation applies it once the product is configured), not applied.
        case keepUnclaimed
        /// Stored; when the purchase has an owner the ingest fails with `unknown_product`, so the notification is
        /// retried (the operator may add the product) and ends `dead`, never dropped. Without an owner: kept.
        case retryLater
    }

    /// The purchase's chain belongs to a customer other than the presenter, and the policy keeps the first owner.
    public enum OwnerConflict: String, Sendable {
        /// 403 `belongs_to_another_customer`; nothing stored.
        case refuse
        /// Stored for its owner; nothing applied for the presenter.
        case keepUnclaimed
    }

    /// Renewal info that fails verification.
    public enum RenewalInfo: String, Sendable {
        /// The ingest fails with the verification error (a notification is retried, then dead).
        case mustVerify
        /// Skipped and counted (`kakin_verification_failures_total`); the rest of the facts still apply.
        case skipUnverifiable
    }

    public var owner: Owner
    public var unknownProduct: UnknownProduct
    public var ownerConflict: OwnerConflict
    public var renewalInfo: RenewalInfo
}
