/// What happens when a purchase chain (an original transaction) or its `appAccountToken` belongs to a customer
/// other than the one presenting it (the contract's `accounts.transferPolicy`).
public enum TransferPolicy: String, Sendable, CaseIterable {
    /// The first owner keeps it; the other customer gets 403 `belongs_to_another_customer`.
    case keepFirstOwner
    /// Move it to the customer who presented it, and record the transfer in both timelines.
    case transfer
}

/// Who owns a purchase chain, decided in one place for every path.
///
/// The current owner is the chain's link (`original_links`, which records transfers), else the customer whose
/// `appAccountToken` the transaction carries. The link comes first because it is the later decision: a chain
/// moved under the `transfer` policy keeps carrying its first buyer's token, and its new owner must not be
/// refused for it. Without a link, the token names the buyer (Kakin hands each customer its own token).
public enum Ownership {
    public enum Decision: Sendable, Hashable {
        /// Link (or keep linked) the chain to this customer.
        case link(customerId: String)
        /// Move the chain from one customer to the other (the `transfer` policy).
        case transfer(from: String, to: String)
        /// The chain belongs to `owner`; the presenter is refused (the `keepFirstOwner` policy).
        case refuse(owner: String)
        /// Nobody presented it and nobody owns it yet: store it; the customer's POST or restore links it later.
        case unclaimed
    }

    /// The chain's current owner.
    public static func currentOwner(linkOwner: String?, tokenOwner: String?) -> String? { linkOwner ?? tokenOwner }

    /// - Parameters:
    ///   - presenter: the customer presenting the transaction (the app's POST, a restore), or nil when the fact
    ///     arrived on its own (a notification): then the current owner, if any, gets it.
    ///   - linkOwner: the customer the chain is linked to, if any.
    ///   - tokenOwner: the customer owning the transaction's `appAccountToken`, if any.
    public static func decide(presenter: String?, linkOwner: String?, tokenOwner: String?, policy: TransferPolicy) -> Decision {
        let owner = currentOwner(linkOwner: linkOwner, tokenOwner: tokenOwner)
        guard let presenter else { return owner.map { .link(customerId: $0) } ?? .unclaimed }
        guard let owner, owner != presenter else { return .link(customerId: presenter) }
        switch policy {
        case .keepFirstOwner: return .refuse(owner: owner)
        case .transfer: return .transfer(from: owner, to: presenter)
        }
    }
}

extension Ownership.Decision {
    /// The customer the chain belongs to after the decision (nil: refused or unclaimed).
    public var owner: String? {
        switch self {
        case .link(let c): return c
        case .transfer(_, let to): return to
        case .refuse, .unclaimed: return nil
        }
    }
}
