/// The contract's customer `status`, counting entitlements only (consumables never count).
public enum CustomerState: String, Sendable, CaseIterable, Hashable {
    /// Never had a subscription, non-consumable or non-renewing purchase (refunded ones included).
    case new
    /// At least one entitlement now: `subscribed` or `inGracePeriod`, a non-consumable owned, a pass unexpired.
    case active
    /// Had one, none active now: expired, refunded or revoked, family sharing removed, or in billing retry.
    case inactive
}

/// A non-consumable the customer owns.
public struct NonConsumableOwnership: Sendable, Hashable {
    public var productId: String
    /// The earliest purchase still standing: a `purchased` copy when there is one, else a family-shared one.
    public var transactionId: String
    public var ownership: InAppOwnershipType
    /// `appStore`, or the provider it was bought from (then `transactionId` is the provider's id).
    public var source: String

    public init(productId: String, transactionId: String, ownership: InAppOwnershipType, source: String = "appStore") {
        self.productId = productId
        self.transactionId = transactionId
        self.ownership = ownership
        self.source = source
    }

    public var json: JSONValue {
        ["productId": .string(productId), "transactionId": .string(transactionId), "ownership": .string(ownership.contractName),
         "source": .string(source)]
    }

    /// `json`, written straight to bytes.
    func write(to w: inout JSONBytesWriter) {
        w.object { w in
            w.member("ownership", ownership.contractName)
            w.member("productId", productId)
            w.member("source", source)
            w.member("transactionId", transactionId)
        }
    }
}

/// A non-renewing subscription product: Apple sends no expiry, so each purchase lasts the catalog's
/// `durationDays` from its `purchaseDate`.
public struct NonRenewingStatus: Sendable, Hashable {
    public var productId: String
    /// The latest end over non-revoked purchases; nil when the catalog has no length for the product.
    public var expiresAtMs: Int64?
    public var active: Bool
    /// Where the purchase with the latest end was made: `appStore` or a provider.
    public var source: String

    public init(productId: String, expiresAtMs: Int64?, active: Bool, source: String = "appStore") {
        self.productId = productId
        self.expiresAtMs = expiresAtMs
        self.active = active
        self.source = source
    }

    public var json: JSONValue {
        ["productId": .string(productId), "expiresAt": Timestamp.rfc3339(expiresAtMs), "active": .bool(active), "source": .string(source)]
    }

    /// `json`, written straight to bytes.
    func write(to w: inout JSONBytesWriter) {
        w.object { w in
            w.member("active", active)
            w.member("expiresAt", timestamp: expiresAtMs)
            w.member("productId", productId)
            w.member("source", source)
        }
    }
}

/// Something the app may want to tell the user before they act (mission item 15). Derived from the status and
/// the catalog; not part of the contract's status body.
public struct StatusNotice: Sendable, Hashable {
    public enum Kind: String, Sendable, CaseIterable, Hashable {
        /// An offer is pending for the next renewal: redeeming another offer replaces it (offers never stack).
        case pendingOfferWouldBeReplaced
        /// The current period is free (trial or free offer): switching now to one of `productIds` (upgrade, or
        /// crossgrade of the same duration, both immediate) discards the rest of it.
        case immediateChangeDiscardsFreePeriod
        /// The current period is paid: switching now to one of `productIds` ends it early with a prorated refund.
        case immediateChangeRefundsProrated
        /// A 12-month commitment billed monthly, before its last month: cancelling stops the commitment from
        /// renewing, but every month until its end is still billed and served.
        case cancellationAtCommitmentEnd
    }

    public var kind: Kind
    public var originalTransactionId: String
    /// For the immediate-change kinds, the products that would trigger it, sorted.
    public var productIds: [String]

    public init(kind: Kind, originalTransactionId: String, productIds: [String]) {
        self.kind = kind
        self.originalTransactionId = originalTransactionId
        self.productIds = productIds
    }

    public var json: JSONValue {
        ["kind": .string(kind.rawValue), "originalTransactionId": .string(originalTransactionId),
         "productIds": .array(productIds.map { .string($0) })]
    }
}

/// Everything `GET /v1/customers/{customerId}` answers, typed. Built by `StatusEngine.evaluate`.
public struct CustomerStatus: Sendable, Hashable {
    public var status: CustomerState
    /// One per subscription instance, sorted by group, then `originalTransactionId`.
    public var subscriptions: [SubscriptionStatus]
    /// Sorted by product.
    public var nonConsumables: [NonConsumableOwnership]
    /// Sorted by product.
    public var nonRenewing: [NonRenewingStatus]
    /// Group → whether Kakin considers the customer eligible for an introductory offer there: never had a
    /// subscription in the group (the contract's decision; what the eligibility JWS Kakin signs says).
    public var introductoryOfferEligibility: [String: Bool]
    /// Sorted by instance, then kind.
    public var notices: [StatusNotice]

    /// The contract's body.
    /// - Parameters:
    ///   - customerId: the path's customer.
    ///   - appAccountToken: the customer's token, or nil (written as null).
    ///   - wallet: the coin balance, read from the ledger by the caller.
    public func json(customerId: String, appAccountToken: String?, wallet: WalletBalance) -> JSONValue {
        [
            "customerId": .string(customerId),
            "appAccountToken": .string(appAccountToken),
            "status": .string(status.rawValue),
            "subscriptions": .array(subscriptions.map(\.json)),
            "nonConsumables": .array(nonConsumables.map(\.json)),
            "nonRenewing": .array(nonRenewing.map(\.json)),
            "wallet": wallet.json,
            "eligibility": ["introductoryOffer": .object(introductoryOfferEligibility.mapValues { .bool($0) })],
        ]
    }

    /// The answer of `GET /v1/customers/{customerId}`, written straight to bytes: `json(…)` with the customer's
    /// `version` and, once the customer rescinded consent, `consentRescinded` (`{"at": …}`), serialized, byte for byte,
    /// without building the tree (a status read's answer; `StatusAnswerTests` compares the two on varied customers).
    public func answerJSON(customerId: String, appAccountToken: String?, wallet: WalletBalance, version: Int64,
                           consentRescindedAtMs: Int64?) -> [UInt8] {
        var w = JSONBytesWriter(capacity: 512 + 512 * subscriptions.count)
        w.object { w in
            w.member("appAccountToken", appAccountToken)
            if let consentRescindedAtMs {
                w.key("consentRescinded")
                w.object { $0.member("at", timestamp: consentRescindedAtMs) }
            }
            w.member("customerId", customerId)
            w.key("eligibility")
            w.object { w in
                w.key("introductoryOffer")
                w.object { w in
                    for (group, eligible) in introductoryOfferEligibility.sorted(by: { $0.key < $1.key }) { w.member(group, eligible) }
                }
            }
            w.key("nonConsumables")
            w.array(nonConsumables) { w, n in n.write(to: &w) }
            w.key("nonRenewing")
            w.array(nonRenewing) { w, n in n.write(to: &w) }
            w.member("status", status.rawValue)
            w.key("subscriptions")
            w.array(subscriptions) { w, s in s.write(to: &w) }
            w.member("version", version)
            w.key("wallet")
            wallet.write(to: &w)
        }
        return w.bytes
    }
}
