import KakinCore
import Testing

/// The purchase rules every source shares, tested without a database: what a product grants, who owns a
/// purchase chain, and how refunds and their reversals move coins.
@Suite struct PurchasePlanTests {
    let coins = Product(productId: "coins.500", kind: .consumable, coins: 500, bonusCoins: 50)

    @Test func aConsumableGrantsPaidCoinsPerUnitAndItsBonusAsFree() {
        let grant = PurchaseGrant.of(coins, quantity: 3, originalTransactionId: "1", purchaseDateMs: 0, expiresAtMs: nil)
        #expect(grant == .coins(paid: 1500, free: 150))
        #expect(grant.json == ["coins": ["paid": 1500, "free": 150]])
    }

    @Test func entitlementsCarryTheirExpiry() {
        let pass = Product(productId: "season", kind: .nonRenewing, durationDays: 90)
        let grant = PurchaseGrant.of(pass, quantity: 1, originalTransactionId: "7", purchaseDateMs: 0, expiresAtMs: nil)
        #expect(grant.json["entitlement"]?["expiresAt"] == .string("1970-04-01T00:00:00Z"))
        let sub = Product(productId: "premium.monthly", kind: .autoRenewable, groupId: "premium")
        #expect(PurchaseGrant.of(sub, quantity: 1, originalTransactionId: "7", purchaseDateMs: 0, expiresAtMs: nil).json["entitlement"]?["expiresAt"] == .null)
        let noads = Product(productId: "noads", kind: .nonConsumable)
        #expect(PurchaseGrant.of(noads, quantity: 1, originalTransactionId: "7", purchaseDateMs: 0, expiresAtMs: nil).json["entitlement"]?["expiresAt"] == nil)
    }

    @Test func theLinkDecidesOwnershipBeforeTheToken() {
        // A chain moved to u2 keeps carrying u1's token: u2 is its owner, for a notification and for u2's POST.
        #expect(Ownership.decide(presenter: nil, linkOwner: "u2", tokenOwner: "u1", policy: .keepFirstOwner) == .link(customerId: "u2"))
        #expect(Ownership.decide(presenter: "u2", linkOwner: "u2", tokenOwner: "u1", policy: .keepFirstOwner) == .link(customerId: "u2"))
        #expect(Ownership.decide(presenter: "u1", linkOwner: "u2", tokenOwner: "u1", policy: .keepFirstOwner) == .refuse(owner: "u2"))
        #expect(Ownership.decide(presenter: "u1", linkOwner: "u2", tokenOwner: nil, policy: .transfer) == .transfer(from: "u2", to: "u1"))
        #expect(Ownership.decide(presenter: nil, linkOwner: nil, tokenOwner: "u1", policy: .transfer) == .link(customerId: "u1"))
        #expect(Ownership.decide(presenter: nil, linkOwner: nil, tokenOwner: nil, policy: .transfer) == .unclaimed)
        #expect(Ownership.decide(presenter: "u3", linkOwner: nil, tokenOwner: nil, policy: .keepFirstOwner) == .link(customerId: "u3"))
    }

    /// Property: whatever order and however often the copies of a refunded, reversed, refunded… transaction
    /// arrive, the coins end where the newest copy says (credited, or taken back once), and the ledger's
    /// entries alternate refund / reversal.
    @Test(arguments: [WalletPolicy(allowNegativeBalance: true), WalletPolicy(allowNegativeBalance: false)])
    func refundsFollowTheNewestCopyWhateverTheArrivalOrder(policy: WalletPolicy) {
        var random = SeededRandom(seed: 42)
        for _ in 0..<500 {
            let credited = WalletBalance(paid: Int64.random(in: 1...1000, using: &random), free: Int64.random(in: 0...100, using: &random))
            let spentBefore = Int64.random(in: 0...credited.total, using: &random)
            // Copies by signedDate: each is revoked or not; the newest one seen so far is what reconciliation follows.
            let copies = (0..<Int.random(in: 1...6, using: &random)).map { ($0, Bool.random(using: &random)) }
            let arrivals = (copies + copies.filter { _ in Bool.random(using: &random) }).shuffled(using: &random)
            let used = spentBefore == 0 ? (paid: Int64(0), free: Int64(0)) : WalletRules.split(amount: spentBefore, of: credited, order: .freeFirst)!
            let afterSpend = WalletBalance(paid: credited.paid - used.paid, free: credited.free - used.free)
            var balance = afterSpend
            var ledger = RefundReconciliation.Ledger(creditedPaid: credited.paid, creditedFree: credited.free, refunds: 0, reversals: 0, lastRefund: nil)
            var newest = -1
            var revoked = false
            for (signed, isRevoked) in arrivals {
                if signed > newest { (newest, revoked) = (signed, isRevoked) }
                switch RefundReconciliation.step(ledger, revoked: revoked, balance: balance, policy: policy) {
                case .none: break
                case .refund(let paid, let free, _, let number):
                    #expect(number == ledger.refunds + 1)
                    balance.paid += paid
                    balance.free += free
                    ledger.refunds += 1
                    ledger.lastRefund = WalletBalance(paid: paid, free: free)
                case .reverse(let paid, let free, let number):
                    #expect(number == ledger.reversals + 1)
                    balance.paid += paid
                    balance.free += free
                    ledger.reversals += 1
                }
                if !policy.allowNegativeBalance { #expect(balance.paid >= 0 && balance.free >= 0) }
            }
            #expect(ledger.refunds - ledger.reversals == (revoked ? 1 : 0))
            if !revoked {
                #expect(balance == afterSpend)
            } else if policy.allowNegativeBalance {
                #expect(balance == WalletBalance(paid: -used.paid, free: -used.free))
            } else {
                #expect(balance == WalletBalance())
            }
            // Once settled, the same copy again changes nothing.
            #expect(RefundReconciliation.step(ledger, revoked: revoked, balance: balance, policy: policy) == .none)
        }
    }
}
