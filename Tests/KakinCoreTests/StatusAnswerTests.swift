import KakinCore
import Testing

/// A status read answers `CustomerStatus.answerJSON`, written straight to bytes. It must be byte for byte what the
/// tree it replaced serialized: `json(…)` with the customer's `version` and `consentRescinded` added (as
/// `EvaluatedCustomer.json` adds them for the events), then `serialized()`.
@Suite struct StatusAnswerTests {
    typealias F = StatusFixtures

    /// The old path: the tree, its additions, serialized.
    static func treeBytes(_ status: CustomerStatus, customerId: String, token: String?, wallet: WalletBalance, version: Int64,
                          consentMs: Int64?) -> [UInt8] {
        guard case .object(var o) = status.json(customerId: customerId, appAccountToken: token, wallet: wallet) else {
            preconditionFailure("a status is an object")
        }
        o["version"] = .int(version)
        if let consentMs { o["consentRescinded"] = ["at": .string(Timestamp.rfc3339(consentMs))] }
        return JSONValue.object(o).serialized()
    }

    static func expectSameBytes(_ status: CustomerStatus, customerId: String = "u1", token: String? = "6f1c0e4c-2b7a-4a4e-9a6e-2f7a1d0b9c11",
                                wallet: WalletBalance = WalletBalance(paid: 60, free: 40), version: Int64 = 7, consentMs: Int64? = nil,
                                sourceLocation: SourceLocation = #_sourceLocation) {
        let tree = treeBytes(status, customerId: customerId, token: token, wallet: wallet, version: version, consentMs: consentMs)
        let written = status.answerJSON(customerId: customerId, appAccountToken: token, wallet: wallet, version: version,
                                        consentRescindedAtMs: consentMs)
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: tree, as: UTF8.self), sourceLocation: sourceLocation)
    }

    @Test func offersGraceFamilySharingAndPassesAnswerTheSameBytes() {
        Self.expectSameBytes(StatusContractJSONTests.richStatus())
        Self.expectSameBytes(StatusContractJSONTests.richStatus(), token: nil, wallet: WalletBalance(), version: 0, consentMs: F.at(day: 3.25))
        Self.expectSameBytes(F.evaluate([], atDay: 0), customerId: "new", token: nil, wallet: WalletBalance(), version: 0)
    }

    @Test func randomHistoriesWithRefundsUpgradesAndOffersAnswerTheSameBytes() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_0026)
        for n in 0..<500 {
            let history = StatusOrderIndependenceTests.randomHistory(&rng)
            let nowMs = F.t0 + Int64.random(in: 0...500, using: &rng) * F.dayMs + Int64.random(in: 0..<F.dayMs, using: &rng)
            let status = StatusEngine.evaluate(history, catalog: F.catalog, nowMs: nowMs)
            Self.expectSameBytes(status, customerId: "customer-\(n)", token: n % 3 == 0 ? nil : "token-\(n)",
                                 wallet: WalletBalance(paid: Int64(n), free: Int64(n % 7)), version: Int64(n),
                                 consentMs: n % 5 == 0 ? nowMs : nil)
        }
    }

    @Test func applesTestVectorsAnswerTheSameBytes() throws {
        typealias T = StoredStatusFieldsTests
        let transactions = try ["models/signedTransaction.json", "models/signedTransactionWithRevocation.json"].map {
            try TransactionPayload(json: try JSONParser.parse(try T.testdata($0)))
        }
        let xcode = try #require(StoredStatusFields.transaction(try T.testdata("xcode/xcode-signed-transaction")))
        let renewals = [try RenewalInfoPayload(json: try JSONParser.parse(try T.testdata("models/signedRenewalInfo.json"))),
                        try #require(StoredStatusFields.renewalInfo(try T.testdata("xcode/xcode-signed-renewal-info")))]
        for t in transactions + [xcode] {
            for nowMs in [t.purchaseDate, t.purchaseDate + 40 * F.dayMs, (t.expiresDate ?? t.purchaseDate) + 61 * F.dayMs] {
                for history in [CustomerHistory(transactions: [t]), CustomerHistory(transactions: [t], renewalInfos: renewals)] {
                    Self.expectSameBytes(StatusEngine.evaluate(history, catalog: F.catalog, nowMs: nowMs))
                }
            }
        }
    }

    @Test func tenYearsOfThreeSubscriptionsAnswerTheSameBytes() {
        var transactions: [TransactionPayload] = []
        var renewals: [RenewalInfoPayload] = []
        for (s, product) in ["premium.monthly", "extras.monthly", "premium.plus.monthly"].enumerated() {
            let original = String(10_000 * (s + 1))
            for month in 0..<120 {
                transactions.append(F.transaction(month == 0 ? original : String(10_000 * (s + 1) + month), original: original, product: product,
                                                  purchase: F.at(day: Double(30 * month)), expires: F.at(day: Double(30 * month + 30))))
            }
            renewals.append(F.renewal(original, product: product, signed: F.at(day: 3_590)))
        }
        let status = F.evaluate(transactions, renewals, atDay: 3_595)
        #expect(status.subscriptions.count == 3)
        Self.expectSameBytes(status, wallet: WalletBalance(paid: 0, free: 500), version: 1_000)
    }

    @Test func commitmentsAnswerTheSameBytes() {
        typealias C = StatusCommitmentTests
        for month in [1, 6, 12] {
            let transactions = (1...month).map { C.month($0) }
            let at = Double(C.monthStart(month) - F.t0) / Double(F.dayMs) + 2
            Self.expectSameBytes(F.evaluate(transactions, [C.renewal(signed: C.monthStart(month), commitmentRenews: month % 2)], atDay: at))
        }
    }

    @Test func storesOutsideTheAppStoreAndGooglePlayAnswerTheSameBytes() {
        let day = F.dayMs
        let external = [
            ExternalEntitlement(source: "stripe", id: "sub_1", productId: "premium.monthly", kind: .autoRenewable, latestId: "sub_1@1",
                                purchasedAtMs: F.t0, expiresAtMs: F.t0 + 30 * day, standing: .active, willAutoRenew: true),
            ExternalEntitlement(source: "googlePlay", id: "GPA.1234-5678", productId: "extras.monthly", kind: .autoRenewable, latestId: "GPA.1234-5678..0",
                                purchasedAtMs: F.t0, expiresAtMs: F.t0 + 40 * day, standing: .active, willAutoRenew: false,
                                purchaseToken: "token.with\"quote\\and\u{1}control"),
            ExternalEntitlement(source: "stripe", id: "pi_2", productId: "noads", kind: .nonConsumable, latestId: "pi_2", purchasedAtMs: F.t0,
                                expiresAtMs: nil, standing: .active, willAutoRenew: false),
            ExternalEntitlement(source: "googlePlay", id: "GPA.9", productId: "season.pass", kind: .nonRenewing, latestId: "GPA.9",
                                purchasedAtMs: F.t0, expiresAtMs: nil, standing: .active, willAutoRenew: false, revokedAtMs: nil),
        ]
        let history = CustomerHistory(transactions: [F.monthly("1000", startDay: 0)], external: external)
        for at in [1.0, 35, 45, 400] {
            Self.expectSameBytes(StatusEngine.evaluate(history, catalog: F.catalog, nowMs: F.at(day: at)))
        }
    }

    /// Every optional member set and unset, strings that need escaping, keys out of ASCII, timestamps at the ends of
    /// `Int64` and with milliseconds.
    @Test func everyMemberAndEveryEscapeAnswerTheSameBytes() {
        var status = StatusContractJSONTests.richStatus()
        status.introductoryOfferEligibility = ["Zeta": true, "alpha": false, "été": true, "Ω": false, "a\"b\\c": true, "": false, "\n": true]
        var s = status.subscriptions[0]
        s.commitment = StatusCommitment(billingPeriod: 3, totalBillingPeriods: 12, endsAtMs: F.at(day: 200.5), priceMilli: nil, willRenew: false)
        s.purchaseToken = "play-token"
        s.eligibleWinBackOfferIds = ["wb.1", "wb \"2\""]
        s.expirationReason = .billingError
        s.offer = StatusOffer(type: .introductory, id: nil)
        s.pendingOffer = StatusOffer(type: .winBack, id: "wb.1", period: nil)
        s.groupId = nil
        s.autoRenewProductId = nil
        for ms: Int64? in [nil, Int64.min, Int64.max, -1, 0, 1, 253_402_300_800_000, -62_167_219_200_001, F.at(day: 1.000_001)] {
            s.expiresAtMs = ms
            s.gracePeriodExpiresAtMs = ms.map { $0 / 2 }
            status.subscriptions = [s, status.subscriptions[1]]
            Self.expectSameBytes(status, customerId: "ünïcode \"quoted\"\t\u{7f}", token: "", consentMs: ms)
        }
    }
}
