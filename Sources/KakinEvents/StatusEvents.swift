import KakinCore

/// What a customer's backend was last told about the customer's entitlements: the parts of the status that events
/// describe, stored with the customer's last event (`outbox_heads.status_view`, migration 13). The next change's
/// status is compared with it, so each transition is told once, whichever path or process brought the fact in, and
/// a transition the clock made (a period that ended with no notification yet) is told with the next change.
public struct StatusView: Sendable, Hashable {
    public struct Subscription: Sendable, Hashable {
        public var productId: String
        public var latestTransactionId: String
        public var state: SubscriptionState
        public var expiresAtMs: Int64?
        public var willAutoRenew: Bool
        public var offerType: String?
        public var offerId: String?
    }

    /// By original transaction ID.
    public var subscriptions: [String: Subscription] = [:]
    /// What the customer had access to, by entitlement, with the sources serving it (`CustomerStatus.entitlementSources`).
    /// nil for a view stored before subscription groups were told: `toldEntitlements(now:)` reads it then.
    public var access: [String: Set<String>]? = [:]
    /// A view stored before subscription groups were told: its non-consumables and active passes.
    var productsBeforeGroups: Set<String> = []

    public init() {}

    public init(_ status: CustomerStatus) {
        for s in status.subscriptions { subscriptions[s.originalTransactionId] = Subscription(s) }
        access = status.entitlementSources
    }

    /// The view as JSON (members in key order at every level; read back by `init?(json:)`), written straight to bytes:
    /// what `outbox_heads.status_view` stores and each change compares its view with.
    public var jsonString: String {
        var w = JSONBytesWriter(capacity: 64 + 256 * subscriptions.count)
        w.object { w in
            w.key("access")
            w.object { w in
                for (entitlement, sources) in (access ?? [:]).sorted(by: { $0.key < $1.key }) {
                    w.key(entitlement)
                    w.array(sources.sorted()) { w, source in w.string(source) }
                }
            }
            w.key("subscriptions")
            w.object { w in
                for (otid, s) in subscriptions.sorted(by: { $0.key < $1.key }) {
                    w.key(otid)
                    w.object { w in
                        w.member("expiresAtMs", s.expiresAtMs)
                        w.member("latestTransactionId", s.latestTransactionId)
                        w.member("offerId", s.offerId)
                        w.member("offerType", s.offerType)
                        w.member("productId", s.productId)
                        w.member("state", s.state.rawValue)
                        w.member("willAutoRenew", s.willAutoRenew)
                    }
                }
            }
        }
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// A stored view; nil for anything unreadable (then every current entitlement is told again as new).
    public init?(json: JSONValue) {
        guard case .object(let subs)? = json["subscriptions"] else { return nil }
        for (otid, s) in subs {
            guard let productId = s["productId"]?.stringValue, let latest = s["latestTransactionId"]?.stringValue,
                  let state = s["state"]?.stringValue.flatMap(SubscriptionState.init(rawValue:)) else { return nil }
            subscriptions[otid] = Subscription(productId: productId, latestTransactionId: latest, state: state,
                                               expiresAtMs: s["expiresAtMs"]?.int64Value, willAutoRenew: s["willAutoRenew"]?.boolValue ?? false,
                                               offerType: s["offerType"]?.stringValue, offerId: s["offerId"]?.stringValue)
        }
        if case .object(let told)? = json["access"] {
            access = told.mapValues { Set(($0.arrayValue ?? []).compactMap(\.stringValue)) }
        } else if let products = json["entitlements"]?.arrayValue {
            access = nil
            productsBeforeGroups = Set(products.compactMap(\.stringValue))
        } else {
            return nil
        }
    }

    /// The entitlements this view told the customer has. A view stored before groups were told had products only: its
    /// subscriptions that were entitled add their groups (read from the status now), so an upgrade tells no group as new.
    func toldEntitlements(now status: CustomerStatus) -> Set<String> {
        if let access { return Set(access.keys) }
        var told = productsBeforeGroups
        for s in status.subscriptions where subscriptions[s.originalTransactionId]?.state.isEntitled == true { told.insert(s.entitlement) }
        return told
    }
}

extension StatusView.Subscription {
    init(_ s: SubscriptionStatus) {
        self.init(productId: s.productId, latestTransactionId: s.latestTransactionId, state: s.state, expiresAtMs: s.expiresAtMs,
                  willAutoRenew: s.willAutoRenew, offerType: s.offer?.type.contractName, offerId: s.offer?.id)
    }
}

/// The entitlement and subscription events a status change tells, pure: `previous` is what was last told, `current`
/// the status after the change. Per subscription, in this order: started, plan changed, renewed or extended, offer
/// redeemed, auto-renew changed, billing issue or recovered, expired or revoked. A subscription first seen already
/// ended (an old purchase restored) tells nothing. Then the entitlements (`CustomerStatus.entitlementSources`): granted
/// for each the customer gained from any source, revoked for each no source serves any more, with `data.entitlement`
/// (a group, or a non-consumable's or pass's product, then also in `productId`) and `data.sources` after the change.
public enum StatusEvents {
    public static func drafts(previous: StatusView, current status: CustomerStatus) -> [EventDraft] {
        var drafts: [EventDraft] = []
        for s in status.subscriptions.sorted(by: { $0.originalTransactionId < $1.originalTransactionId }) {
            let now = StatusView.Subscription(s)
            func draft(_ type: EventType, _ extra: [String: JSONValue] = [:]) {
                var data: [String: JSONValue] = ["originalTransactionId": .string(s.originalTransactionId), "productId": .string(s.productId),
                                                 "transactionId": .string(s.latestTransactionId), "state": .string(s.state.rawValue),
                                                 "expiresAt": Timestamp.rfc3339(s.expiresAtMs), "source": .string(s.source)]
                for (k, v) in extra { data[k] = v }
                drafts.append(EventDraft(type: type, data: data))
            }
            guard let before = previous.subscriptions[s.originalTransactionId] else {
                if s.state.isEntitled {
                    draft(.subscriptionStarted)
                    if let type = now.offerType { draft(.subscriptionOfferRedeemed, ["offer": ["type": .string(type), "id": .string(now.offerId)]]) }
                }
                continue
            }
            if before.productId != now.productId {
                draft(.subscriptionPlanChanged, ["fromProductId": .string(before.productId)])
            } else if before.latestTransactionId != now.latestTransactionId, s.state.isRenewable {
                draft(.subscriptionRenewed)
            } else if before.latestTransactionId == now.latestTransactionId, let old = before.expiresAtMs, let new = now.expiresAtMs, new > old {
                draft(.subscriptionExtended, ["previousExpiresAt": Timestamp.rfc3339(old)])
            }
            if let type = now.offerType, before.latestTransactionId != now.latestTransactionId || before.offerType != now.offerType
                || before.offerId != now.offerId {
                draft(.subscriptionOfferRedeemed, ["offer": ["type": .string(type), "id": .string(now.offerId)]])
            }
            if before.willAutoRenew != now.willAutoRenew {
                draft(.subscriptionAutoRenewChanged, ["willAutoRenew": .bool(now.willAutoRenew)])
            }
            let wasTroubled = before.state == .inGracePeriod || before.state == .inBillingRetryPeriod
            let isTroubled = now.state == .inGracePeriod || now.state == .inBillingRetryPeriod
            if isTroubled, !wasTroubled {
                draft(.subscriptionBillingIssue)
            } else if wasTroubled, now.state == .subscribed {
                draft(.subscriptionRecovered)
            }
            if now.state == .expired, before.state != .expired {
                draft(.subscriptionExpired, ["expirationReason": .string(s.expirationReason?.rawValue)])
            } else if now.state == .revoked, before.state != .revoked {
                draft(.subscriptionRevoked)
            } else if now.state.isEntitled, before.state == .expired || before.state == .revoked {
                draft(.subscriptionStarted, ["resubscribed": true])
            }
        }
        // Entitlements across sources: granted when the first source serves one, revoked when the last one stops.
        let now = status.entitlementSources, told = previous.toldEntitlements(now: status)
        func draft(_ type: EventType, _ entitlement: String) {
            var data: [String: JSONValue] = ["entitlement": .string(entitlement), "sources": .array((now[entitlement] ?? []).sorted().map(JSONValue.string))]
            if !status.isSubscriptionEntitlement(entitlement) { data["productId"] = .string(entitlement) }
            drafts.append(EventDraft(type: type, data: data))
        }
        for entitlement in Set(now.keys).subtracting(told).sorted() { draft(.entitlementGranted, entitlement) }
        for entitlement in told.subtracting(now.keys).sorted() { draft(.entitlementRevoked, entitlement) }
        return drafts
    }
}
