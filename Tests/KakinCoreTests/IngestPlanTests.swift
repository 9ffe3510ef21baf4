import KakinCore
import Testing

/// The one apply's decisions over what a write read (`IngestPlan`), and the store-neutral fact it decides on
/// (`PurchaseFact`), tested without a database.
@Suite struct IngestPlanTests {
    let coins = Product(productId: "coins.100", kind: .consumable, coins: 100, bonusCoins: 10)
    let presenting = IngestOptions(owner: .presenter, unknownProduct: .refuse, ownerConflict: .refuse, renewalInfo: .mustVerify)
    let notified = IngestOptions(owner: .currentOwner, unknownProduct: .retryLater, ownerConflict: .keepUnclaimed, renewalInfo: .mustVerify)

    func fact(signed: Int64 = 1_000, revoked: Int64? = nil, revocationType: String? = nil, price: Int64? = 160_000,
              token: String? = nil) -> PurchaseFact {
        var f = PurchaseFact(appStore: StatusFixtures.transaction("20", original: "10", product: "coins.100", type: .consumable,
                                                                  purchase: 1_000, signed: signed, revoked: revoked,
                                                                  revocationType: revocationType, price: price))
        f.owner.accountToken = token
        return f
    }

    @Test func theAppStoreAdapterNamesTheChainThePeriodAndTheRefundedShare() {
        let f = fact(revoked: 2_000, revocationType: "REFUND_PRORATED")
        #expect(f.store == .appStore && f.chainId == "10" && f.periodId == "20" && f.productId == "coins.100")
        #expect(f.storeKind == .consumable && f.quantity == 1 && f.priceMilli == 160_000 && f.currency == "JPY")
        // A prorated refund without its percentage is Apple's full refund (`WalletRules.revokedShareMilli`).
        #expect(f.revocation == PurchaseFact.Revocation(atMs: 2_000, refund: .full))
        #expect(fact(revoked: 2_000).revocation?.shareMilli(ofQuantity: 1) == WalletRules.fullShareMilli)
        #expect(f.store.ledgerSource == nil && PurchaseStore.external(provider: "stripe").ledgerSource == "stripe")
    }

    @Test func aQuantityRefundTakesThatShareOfTheUnits() {
        let refund = PurchaseFact.Revocation(atMs: 1, refund: .quantity(1))
        #expect(refund.shareMilli(ofQuantity: 4) == 25_000)
        #expect(PurchaseFact.Revocation(atMs: 1, refund: .quantity(9)).shareMilli(ofQuantity: 4) == 100_000)
        #expect(PurchaseFact.Revocation(atMs: 1, refund: .prorated(shareMilli: 150_000)).shareMilli(ofQuantity: 1) == 100_000)
    }

    @Test func theNewestCopyIsTheLaterSignedOneAndTiesFallToItsText() {
        let older = fact(signed: 1_000), newer = fact(signed: 2_000)
        #expect(NewestCopy.isNewer(newer.signedAtMs, newer.raw, than: older.signedAtMs, older.raw))
        #expect(!NewestCopy.isNewer(older.signedAtMs, older.raw, than: newer.signedAtMs, newer.raw))
        let revoked = fact(signed: 1_000, revoked: 1_000)
        // Equal dates: exactly one of the two wins, whichever arrives first.
        #expect(NewestCopy.isNewer(revoked.signedAtMs, revoked.raw, than: older.signedAtMs, older.raw)
                != NewestCopy.isNewer(older.signedAtMs, older.raw, than: revoked.signedAtMs, revoked.raw))
        #expect(!NewestCopy.isNewer(older.signedAtMs, older.raw, than: older.signedAtMs, older.raw))
    }

    @Test func aNewPurchaseIsKeptClaimedAndGrantsForItsPresenter() {
        let plan = IngestPlan.decide(fact(), product: coins, options: presenting, presenter: "u1", policy: .keepFirstOwner,
                                     read: .init(stored: nil, linkOwner: nil, tokenOwner: nil))
        #expect(plan.keepsCopy && plan.ownership == .link(customerId: "u1") && plan.copyOwner == "u1")
        #expect(plan.step == .claim(owner: "u1", grant: .coins(paid: 100, free: 10)))
    }

    @Test func anOlderCopyIsNotKeptAndTheStoredRevocationDecides() {
        let stored = IngestPlan.StoredCopy(signedAtMs: 5_000, raw: nil, revocation: .init(atMs: 4_000, refund: .full))
        let plan = IngestPlan.decide(fact(signed: 1_000), product: coins, options: notified, presenter: nil, policy: .keepFirstOwner,
                                     read: .init(stored: stored, linkOwner: "u1", tokenOwner: nil))
        #expect(!plan.keepsCopy && plan.step == .revoked(owner: "u1", atMs: 4_000))
    }

    @Test func aPlayRefundReadInTheSameMillisecondAsThePurchaseIsKeptAndRevokes() {
        var refunded = fact(signed: 1_000)
        refunded.store = .googlePlay
        refunded.revocation = .init(atMs: 1_000, refund: .full)
        // The stored read (no refund) ties in date and its text sorts after this one's: the tie alone would drop the refund.
        let stored = IngestPlan.StoredCopy(signedAtMs: 1_000, raw: ["z": "z"], revocation: nil)
        let read = IngestPlan.Read(stored: stored, linkOwner: "u1", tokenOwner: nil)
        let plan = IngestPlan.decide(refunded, product: coins, options: notified, presenter: nil, policy: .keepFirstOwner, read: read)
        #expect(plan.keepsCopy && plan.step == .revoked(owner: "u1", atMs: 1_000))
        // Apple's refunds can be reversed: its copies follow the newest-copy rule alone.
        var apple = refunded
        apple.store = .appStore
        #expect(!IngestPlan.decide(apple, product: coins, options: notified, presenter: nil, policy: .keepFirstOwner, read: read).keepsCopy)
        // A refund already kept is not a new one.
        let kept = IngestPlan.StoredCopy(signedAtMs: 1_000, raw: ["z": "z"], revocation: .init(atMs: 1_000, refund: .full))
        #expect(!IngestPlan.decide(refunded, product: coins, options: notified, presenter: nil, policy: .keepFirstOwner,
                                   read: .init(stored: kept, linkOwner: "u1", tokenOwner: nil)).keepsCopy)
    }

    @Test func anotherCustomersChainIsRefusedOrKeptByThePathsOption() {
        let read = IngestPlan.Read(stored: nil, linkOwner: nil, tokenOwner: "u1")
        let refused = IngestPlan.decide(fact(token: "t1"), product: coins, options: presenting, presenter: "u2", policy: .keepFirstOwner, read: read)
        #expect(refused.step == .refuseOwnerConflict(owner: "u1"))
        var older = presenting
        older.ownerConflict = .keepUnclaimed
        let kept = IngestPlan.decide(fact(token: "t1"), product: coins, options: older, presenter: "u2", policy: .keepFirstOwner, read: read)
        #expect(kept.step == .keep(.ownedByAnother("u1"), owner: "u1", retryLater: false) && kept.copyOwner == nil)
        let moved = IngestPlan.decide(fact(token: "t1"), product: coins, options: presenting, presenter: "u2", policy: .transfer, read: read)
        #expect(moved.ownership == .transfer(from: "u1", to: "u2") && moved.step == .claim(owner: "u2", grant: .coins(paid: 100, free: 10)))
    }

    @Test func anUnknownProductIsKeptUnlinkedAndANotificationRetries() {
        let plan = IngestPlan.decide(fact(), product: nil, options: notified, presenter: nil, policy: .keepFirstOwner,
                                     read: .init(stored: nil, linkOwner: "u1", tokenOwner: nil))
        #expect(plan.keepsCopy && plan.copyOwner == nil && plan.step == .keep(.unknownProduct, owner: "u1", retryLater: true))
        let unclaimed = IngestPlan.decide(fact(), product: coins, options: notified, presenter: nil, policy: .keepFirstOwner,
                                          read: .init(stored: nil, linkOwner: nil, tokenOwner: nil))
        #expect(unclaimed.step == .keep(.noOwner, owner: nil, retryLater: false))
    }

    /// Property: over seeded reads, the plan keeps a copy exactly when it is newer than the stored one, never grants to
    /// anyone but the decided owner, and never claims a revoked period.
    @Test func overSeededReadsThePlanGrantsOnlyToTheOwnerAndNeverARevokedPeriod() {
        var random = SeededRandom(seed: 24)
        let owners: [String?] = [nil, "u1", "u2"]
        for _ in 0..<2_000 {
            let f = fact(signed: Int64(random.next() % 3) * 1_000, revoked: random.next() % 3 == 0 ? 500 : nil)
            let stored: IngestPlan.StoredCopy? = random.next() % 2 == 0 ? nil
                : .init(signedAtMs: Int64(random.next() % 3) * 1_000, raw: fact(signed: 0).raw,
                        revocation: random.next() % 2 == 0 ? .init(atMs: 700, refund: .full) : nil)
            let read = IngestPlan.Read(stored: stored, linkOwner: owners[Int(random.next() % 3)], tokenOwner: owners[Int(random.next() % 3)])
            let presenter = owners[Int(random.next() % 3)]
            let options = presenter == nil ? notified : presenting
            let plan = IngestPlan.decide(f, product: coins, options: options, presenter: presenter, policy: .keepFirstOwner, read: read)
            if let stored {
                #expect(plan.keepsCopy == NewestCopy.isNewer(f.signedAtMs, f.raw, than: stored.signedAtMs, stored.raw ?? .null))
            }
            #expect(plan.revocation == (plan.keepsCopy ? f.revocation : stored?.revocation))
            switch plan.step {
            case .claim(let owner, _):
                #expect(owner == plan.ownership.owner && plan.revocation == nil)
            case .revoked(let owner, _):
                #expect(owner == plan.ownership.owner && plan.revocation != nil)
            case .refuseOwnerConflict(let owner):
                #expect(presenter != nil && owner != presenter)
            case .keep:
                break
            }
        }
    }

    @Test func theClawbackStopsAtZeroUnderTheFloorPolicy() {
        let floor = WalletPolicy(allowNegativeBalance: false)
        let clawed = IngestPlan.clawback(paid: 100, free: 10, balance: WalletBalance(paid: 40, free: 20), policy: floor)
        #expect(clawed.paid == 40 && clawed.free == 10 && clawed.shortfall == 60)
        let negative = IngestPlan.clawback(paid: 100, free: 10, balance: WalletBalance(paid: 40, free: 20), policy: WalletPolicy(allowNegativeBalance: true))
        #expect(negative.paid == 100 && negative.free == 10 && negative.shortfall == 0)
    }
}
