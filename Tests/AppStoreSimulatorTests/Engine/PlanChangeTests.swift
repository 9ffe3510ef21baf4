@testable import AppStoreSimulator
import KakinCore
import Testing

/// Upgrades, downgrades and crossgrades by Apple's rules (reference §7; levels: 1 is the highest tier).
@Suite struct PlanChanges {
    @Test func upgradeIsImmediateWithANewPeriodProratedRefundAndIsUpgradedOnTheOldTransaction() throws {
        var s = makeState()
        let first = try s.buy("B")
        let otid = first.originalTransactionId!
        let now = startMs + 10 * .day
        _ = s.advance(toMs: now)
        let up = try s.changeProduct(otid, to: "P")
        #expect(up.kind == .upgraded)
        #expect(s.kinds(up.notificationUUIDs) == ["DID_CHANGE_RENEWAL_PREF/UPGRADE"])
        let old = s.tx(first.transactionId)
        #expect(old["isUpgraded"] == true)
        #expect(old["signedDate"] == .int(now))
        #expect(old["revocationDate"] == nil)
        let new = s.tx(up.transactionId)
        #expect(new["productId"] == "P")
        #expect(new["originalTransactionId"]?.stringValue == otid)
        #expect(new["purchaseDate"] == .int(now))
        #expect(new["expiresDate"] == .int(plus("P1M", now)))
        #expect(new["transactionReason"] == "PURCHASE")
        #expect(new["price"] == 9_990)
        let end = plus("P1M", startMs)
        #expect(up.proratedRefund?.amountMilli == 4_990 * (end - now) / (end - startMs))
        #expect(s.renewal(otid)["productId"] == "P")
        #expect(s.renewal(otid)["autoRenewProductId"] == "P")
        // The upgraded-away transaction comes back in the UPGRADE notification's history, latest is P.
        #expect(s.latestTx(otid)["productId"] == "P")
    }

    @Test func downgradeWaitsForTheNextRenewalAndCanBeCancelled() throws {
        var s = makeState()
        let otid = try s.buy("P").originalTransactionId!
        let down = try s.changeProduct(otid, to: "L")
        #expect(down.kind == .scheduled)
        #expect(down.effectiveDateMs == plus("P1M", startMs))
        #expect(s.kinds(down.notificationUUIDs) == ["DID_CHANGE_RENEWAL_PREF/DOWNGRADE"])
        #expect(s.renewal(otid)["productId"] == "P")
        #expect(s.renewal(otid)["autoRenewProductId"] == "L")
        #expect(s.renewal(otid)["renewalPrice"] == 2_990)
        let back = try s.changeProduct(otid, to: "P")
        #expect(s.kinds(back.notificationUUIDs) == ["DID_CHANGE_RENEWAL_PREF"])
        #expect(s.renewal(otid)["autoRenewProductId"] == "P")
        _ = try s.changeProduct(otid, to: "L")
        let renewed = s.advance(by: 31 * .day)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
        #expect(s.latestTx(otid)["productId"] == "L")
        #expect(s.latestTx(otid)["purchaseDate"] == .int(plus("P1M", startMs)))
        #expect(s.latestTx(otid)["price"] == 2_990)
    }

    @Test func crossgradeOfTheSameDurationIsImmediateWithoutSubtype() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = s.advance(by: 5 * .day)
        let cross = try s.changeProduct(otid, to: "A")
        #expect(cross.kind == .crossgraded)
        #expect(s.kinds(cross.notificationUUIDs) == ["DID_CHANGE_RENEWAL_PREF"])
        #expect(s.latestTx(otid)["productId"] == "A")
        #expect(s.latestTx(otid)["purchaseDate"] == .int(startMs + 5 * .day))
        #expect(cross.proratedRefund != nil)
    }

    @Test func crossgradeOfAnotherDurationWaitsForTheNextRenewal() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        let cross = try s.changeProduct(otid, to: "Y")
        #expect(cross.kind == .scheduled)
        #expect(s.kinds(cross.notificationUUIDs) == ["DID_CHANGE_RENEWAL_PREF"])
        #expect(throws: KakinError.self) { try s.changeProduct(otid, to: "Y") }
        _ = s.advance(by: 32 * .day)
        #expect(s.latestTx(otid)["productId"] == "Y")
        #expect(s.latestTx(otid)["expiresDate"] == .int(plus("P1Y", plus("P1M", startMs))))
    }

    @Test func buyingAnotherProductOfTheGroupIsThePlanChangeStoreKitMakes() throws {
        var s = makeState()
        let first = try s.buy("B")
        let up = try s.buy("P")
        #expect(up.kind == .upgraded)
        #expect(up.originalTransactionId == first.originalTransactionId)
        #expect(s.kinds(up.notificationUUIDs) == ["DID_CHANGE_RENEWAL_PREF/UPGRADE"])
        #expect(throws: KakinError.self) { try s.buy("P") }
        let upgraded = try s.buy("L")
        #expect(upgraded.kind == .scheduled)
        #expect(upgraded.transactionId == up.transactionId)
    }

    @Test func changingToAProductOfAnotherGroupIsRefused() throws {
        let catalog = Catalog(offersCatalog().sortedProducts + [Product(productId: "other", kind: .autoRenewable, groupId: "h", period: ISOPeriod(months: 1))])
        var s = makeState(catalog: catalog)
        let otid = try s.buy("B").originalTransactionId!
        #expect(throws: KakinError.self) { try s.changeProduct(otid, to: "other") }
        #expect(throws: KakinError.self) { try s.changeProduct("999", to: "A") }
        // A purchase in another group is a separate instance.
        let other = try s.buy("other")
        #expect(other.originalTransactionId != otid)
    }
}
