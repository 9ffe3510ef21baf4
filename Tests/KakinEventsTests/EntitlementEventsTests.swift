import KakinCore
import Testing
@testable import KakinEvents

/// `entitlement.granted` / `entitlement.revoked` across sources (the contract's "Entitlements across sources"): a
/// subscription group is granted when its first source starts serving it and revoked when the last one stops.
@Suite struct EntitlementEventsTests {
    static let day: Int64 = 86_400_000
    static let t0: Int64 = 1_767_225_600_000  // 2026-01-01
    static let catalog = Catalog([Product(productId: "premium.monthly", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1)),
                                  Product(productId: "noads", kind: .nonConsumable)])

    static let appStore = try! TransactionPayload(json: [
        "transactionId": "5000", "originalTransactionId": "5000", "bundleId": "b", "productId": "premium.monthly",
        "purchaseDate": .int(t0), "expiresDate": .int(t0 + 30 * day), "quantity": 1, "type": "Auto-Renewable Subscription",
        "inAppOwnershipType": "PURCHASED", "signedDate": .int(t0), "environment": "Sandbox", "price": 980000, "currency": "JPY",
    ])
    static let web = ExternalEntitlement(source: "stripe", id: "sub_W", productId: "premium.monthly", kind: .autoRenewable, latestId: "sub_W@1",
                                         purchasedAtMs: t0 + 10 * day, expiresAtMs: t0 + 40 * day, standing: .active, willAutoRenew: false)

    static func status(_ history: CustomerHistory, atDay d: Int64) -> CustomerStatus {
        StatusEngine.evaluate(history, catalog: catalog, nowMs: t0 + d * day)
    }

    static func entitlementEvents(_ drafts: [EventDraft]) -> [String] {
        drafts.filter { $0.type == .entitlementGranted || $0.type == .entitlementRevoked }.map { d in
            "\(d.type.rawValue) \(d.data["entitlement"]?.stringValue ?? "-") \(d.data["sources"]?.arrayValue?.compactMap(\.stringValue) ?? [])"
                + (d.data["productId"].map { " productId=\($0.stringValue ?? "")" } ?? "")
        }
    }

    @Test func aGroupServedByTheAppStoreAndTheWebIsGrantedOnceAndRevokedWhenBothEnded() {
        let both = CustomerHistory(transactions: [Self.appStore], external: [Self.web])
        var told = StatusView()
        var lines: [String] = []
        var types: [String] = []
        for (history, day) in [(CustomerHistory(transactions: [Self.appStore]), Int64(1)), (both, 11), (both, 35), (both, 45)] {
            let now = Self.status(history, atDay: day)
            let drafts = StatusEvents.drafts(previous: told, current: now)
            lines += Self.entitlementEvents(drafts)
            types += drafts.map(\.type.rawValue)
            told = StatusView(now)
        }
        #expect(lines == ["entitlement.granted premium [\"appStore\"]", "entitlement.revoked premium []"])
        #expect(types == ["subscription.started", "entitlement.granted", "subscription.started", "subscription.expired",
                          "subscription.expired", "entitlement.revoked"])
        // The view the next change is compared with keeps the sources (stored JSON, read back).
        let stored = StatusView(json: StatusView(Self.status(both, atDay: 11)).json)
        #expect(stored?.access == ["premium": ["appStore", "stripe"]])
    }

    @Test func aProductKeepsItsProductIdAndAViewFromBeforeGroupsTellsNoGroupAgain() throws {
        let noads = try TransactionPayload(json: [
            "transactionId": "6000", "originalTransactionId": "6000", "bundleId": "b", "productId": "noads", "purchaseDate": .int(Self.t0),
            "quantity": 1, "type": "Non-Consumable", "inAppOwnershipType": "PURCHASED", "signedDate": .int(Self.t0), "environment": "Sandbox",
        ])
        let now = Self.status(CustomerHistory(transactions: [Self.appStore, noads]), atDay: 1)
        #expect(Self.entitlementEvents(StatusEvents.drafts(previous: StatusView(), current: now))
                == ["entitlement.granted noads [\"appStore\"] productId=noads", "entitlement.granted premium [\"appStore\"]"])
        // A view stored before groups were told: its products, and subscriptions entitled then (their group is not new).
        let before: JSONValue = ["subscriptions": ["5000": ["productId": "premium.monthly", "latestTransactionId": "5000", "state": "subscribed",
                                                            "expiresAtMs": .int(Self.t0 + 30 * Self.day), "willAutoRenew": false]],
                                 "entitlements": ["noads"]]
        let old = try #require(StatusView(json: before))
        #expect(StatusEvents.drafts(previous: old, current: now).isEmpty)
        #expect(old != StatusView(now), "rewritten with its sources at the next change")
    }
}
