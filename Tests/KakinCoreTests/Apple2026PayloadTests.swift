import Foundation
import KakinCore
import Testing

/// Apple's 2026 fields, read from Apple's own test vectors (`Tests/Fixtures/apple-testdata/models`, the
/// payloads Apple's libraries test against), and their absence tolerated.
@Suite struct Apple2026PayloadTests {
    static func model(_ name: String) throws -> JSONValue {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = ProcessInfo.processInfo.environment["KAKIN_APPLE_TESTDATA"].map { URL(fileURLWithPath: $0) }
            ?? root.appendingPathComponent("Tests/Fixtures/apple-testdata")
        let data = try #require(FileManager.default.contents(atPath: dir.appendingPathComponent("models/" + name).path))
        return try JSONParser.parse([UInt8](data))
    }

    @Test func transactionCarriesTheMonthlyCommitment() throws {
        let t = try TransactionPayload(json: try Self.model("signedTransaction.json"))
        #expect(t.billingPlanType == .monthly)
        #expect(t.commitmentInfo == TransactionCommitmentInfo(billingPeriodNumber: 3, commitmentExpiresDate: 1_698_150_000_000,
                                                              commitmentPrice: 119_880, totalBillingPeriods: 12))
        #expect(t.appTransactionId == "71134")
        #expect(t.revocationType == nil && t.revocationPercentage == nil)
    }

    @Test func prorationOfARevocationIsRead() throws {
        let t = try TransactionPayload(json: try Self.model("signedTransactionWithRevocation.json"))
        #expect(t.revocationType == .refundProrated)
        #expect(t.revocationPercentage == 50_000)
        #expect(t.revokedShareMilli == 50_000)
        #expect(t.billingPlanType == nil && t.commitmentInfo == nil)
    }

    @Test func renewalInfoCarriesTheCommitmentRenewalAndWinBackOffers() throws {
        let r = try RenewalInfoPayload(json: try Self.model("signedRenewalInfo.json"))
        #expect(r.renewalBillingPlanType == .monthly)
        #expect(r.commitmentInfo == RenewalCommitmentInfo(
            commitmentAutoRenewProductId: "com.example.product.commitment", commitmentAutoRenewStatus: 1,
            commitmentRenewalBillingPlanType: .monthly, commitmentRenewalDate: 1_698_149_500_000, commitmentRenewalPrice: 9990))
        #expect(r.commitmentInfo?.willRenew == true)
        #expect(r.eligibleWinBackOfferIds == ["eligible1", "eligible2"])
        #expect(r.renewalPrice == 9990 && r.currency == "USD" && r.appTransactionId == "71134")
    }

    @Test func rescindConsentIsAnAppDataNotification() throws {
        let n = try NotificationPayload(json: try Self.model("signedRescindConsentNotification.json"))
        #expect(n.notificationType == .rescindConsent)
        #expect(n.isRescindConsent)
        #expect(n.data == nil)
        let appData = try #require(n.appData)
        #expect(appData.appAppleId == 41234)
        #expect(appData.signedAppTransactionInfo == "signed_app_transaction_info_value")
        #expect(n.bundleId == "com.example" && n.appAppleId == 41234 && n.environment == .localTesting)
        #expect(n.signedDate == 1_698_148_900_000)
        // Apple's appData model on its own.
        let block = try #require(AppDataPayload(json: try Self.model("appData.json")))
        #expect(block.appAppleId == 987_654_321 && block.bundleId == "com.example" && block.environment == .sandbox)
    }

    @Test func realtimeRequestDecodesAndIsToldApart() throws {
        let json = try Self.model("decodedRealtimeRequest.json")
        #expect(SignedPayloadKind.of(json) == .realtimeRequest)
        let r = try RealtimeRequestPayload(json: json)
        #expect(r.originalTransactionId == "99371282")
        #expect(r.appAppleId == 531412)
        #expect(r.productId == "com.example.product")
        #expect(r.userLocale == "en-US")
        #expect(r.requestIdentifier == "3db5c98d-8acf-4e29-831e-8e1f82f9f6e9")
        #expect(r.signedDate == 1_698_148_900_000)
        #expect(r.environment == .localTesting)
        // Every field is required, as in Apple's library.
        for key in ["originalTransactionId", "appAppleId", "productId", "userLocale", "requestIdentifier", "signedDate", "environment"] {
            guard case .object(var o) = json else { return }
            o[key] = nil
            #expect(throws: PayloadDecodingError(field: key)) { try RealtimeRequestPayload(json: .object(o)) }
        }
    }

    @Test func absentOrMistypedNewFieldsAreNilNotFailures() throws {
        guard case .object(var o) = try Self.model("signedTransaction.json") else { return }
        o["billingPlanType"] = nil
        o["commitmentInfo"] = "not an object"
        let t = try TransactionPayload(json: .object(o))
        #expect(t.billingPlanType == nil && t.commitmentInfo == nil)
        o["commitmentInfo"] = ["billingPeriodNumber": "three"]
        #expect(try TransactionPayload(json: .object(o)).commitmentInfo == TransactionCommitmentInfo())
        o["billingPlanType"] = "QUARTERLY"  // a value Apple may add: kept as is
        #expect(try TransactionPayload(json: .object(o)).billingPlanType?.rawValue == "QUARTERLY")

        guard case .object(var r) = try Self.model("signedRenewalInfo.json") else { return }
        r["commitmentInfo"] = nil
        r["renewalBillingPlanType"] = nil
        let renewal = try RenewalInfoPayload(json: .object(r))
        #expect(renewal.commitmentInfo == nil && renewal.renewalBillingPlanType == nil)
    }

    @Test func commitmentInfoWritesBackWhatItRead() throws {
        let t = try TransactionPayload(json: try Self.model("signedTransaction.json"))
        #expect(t.commitmentInfo?.json == (try Self.model("signedTransaction.json"))["commitmentInfo"])
        let r = try RenewalInfoPayload(json: try Self.model("signedRenewalInfo.json"))
        #expect(r.commitmentInfo?.json == (try Self.model("signedRenewalInfo.json"))["commitmentInfo"])
    }
}

/// One rule for "a plan change of the same duration is immediate", used by the simulator and the status engine.
@Suite struct PlanChangeTests {
    static func product(_ id: String, period: String, level: Int) -> Product {
        Product(productId: id, kind: .autoRenewable, groupId: "g", period: ISOPeriod(period)!, level: level)
    }

    @Test func sameDurationWhateverTheSpelling() {
        #expect(ISOPeriod("P1Y")!.isSameDuration(as: ISOPeriod("P12M")!))
        #expect(ISOPeriod("P7D")!.isSameDuration(as: ISOPeriod("P1W")!))
        #expect(ISOPeriod("P2W")!.isSameDuration(as: ISOPeriod("P14D")!))
        #expect(ISOPeriod("P1Y6M")!.isSameDuration(as: ISOPeriod("P18M")!))
        #expect(!ISOPeriod("P1M")!.isSameDuration(as: ISOPeriod("P30D")!))
        #expect(!ISOPeriod("P1Y")!.isSameDuration(as: ISOPeriod("P1M")!))
    }

    @Test func crossgradeBetweenP1YAndP12MIsImmediate() {
        let yearly = Self.product("a.yearly", period: "P1Y", level: 2)
        let twelve = Self.product("b.12m", period: "P12M", level: 2)
        let weekly = Self.product("c.week", period: "P1W", level: 2)
        let sevenDays = Self.product("d.7d", period: "P7D", level: 2)
        #expect(PlanChange(from: yearly, to: twelve) == .crossgradeNow)
        #expect(PlanChange(from: weekly, to: sevenDays) == .crossgradeNow)
        #expect(PlanChange(from: yearly, to: weekly) == .crossgradeAtRenewal)
        #expect(PlanChange(from: yearly, to: Self.product("up", period: "P1M", level: 1)) == .upgrade)
        #expect(PlanChange(from: yearly, to: Self.product("down", period: "P1Y", level: 3)) == .downgrade)
        #expect(PlanChange.upgrade.subtype == .upgrade && PlanChange.crossgradeNow.subtype == nil)
    }

    @Test func aCommitmentMakesOnlyUpgradesImmediate() {
        let yearly = Self.product("a.yearly", period: "P1Y", level: 2)
        #expect(PlanChange(from: yearly, to: Self.product("b.12m", period: "P12M", level: 2), committed: true) == .crossgradeAtRenewal)
        #expect(PlanChange(from: yearly, to: Self.product("up", period: "P1M", level: 1), committed: true) == .upgrade)
    }

    /// The status engine warns about exactly the changes the rule calls immediate (P1Y and P12M alike).
    @Test func statusNoticesUseTheSameRule() {
        var catalog = Catalog.demo
        catalog.upsert(Product(productId: "premium.twelve", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 12), level: 2))
        let t0 = StatusFixtures.t0, day = StatusFixtures.dayMs
        let t = StatusFixtures.transaction("1", product: "premium.yearly", purchase: t0, expires: ISOPeriod(years: 1).added(to: t0), price: 9_800_000)
        let status = StatusEngine.evaluate(CustomerHistory(transactions: [t]), catalog: catalog, nowMs: t0 + day)
        let notice = status.notices.first { $0.kind == .immediateChangeRefundsProrated }
        #expect(notice?.productIds == ["premium.plus.monthly", "premium.twelve"])
    }
}

@Suite struct CatalogCommitmentFlagTests {
    @Test func demoYearlyIsSoldBilledMonthly() {
        let yearly = Catalog.demo["premium.yearly"]!
        #expect(yearly.monthlyBillingWithCommitment)
        #expect(yearly.monthlyCommitmentCharge == 880_000)
        #expect(Catalog.demo["premium.monthly"]!.monthlyCommitmentCharge == nil)
        #expect(yearly.contractJSON["monthlyBillingWithCommitment"] == true)
        #expect(yearly.contractJSON["monthlyCommitmentPrice"] == 880)
    }

    @Test func flagIsParsedAndOnlyForYearlyProducts() throws {
        let ok: JSONValue = ["productId": "y", "type": "autoRenewable", "groupId": "g", "period": "P12M", "price": 120,
                             "monthlyBillingWithCommitment": true]
        let p = try Product(contractJSON: ok, path: "products[0]")
        #expect(p.monthlyBillingWithCommitment && p.monthlyCommitmentCharge == 10_000)
        let monthly: JSONValue = ["productId": "m", "type": "autoRenewable", "groupId": "g", "period": "P1M", "monthlyBillingWithCommitment": true]
        #expect(throws: ConfigurationError.self) { try Product(contractJSON: monthly, path: "products[1]") }
        let priceWithoutFlag: JSONValue = ["productId": "y", "type": "autoRenewable", "groupId": "g", "period": "P1Y", "monthlyCommitmentPrice": 10]
        #expect(throws: ConfigurationError.self) { try Product(contractJSON: priceWithoutFlag, path: "products[2]") }
        // Round trip through the simulator's product list.
        let again = try Product(contractJSON: p.contractJSON, path: "x")
        #expect(again.monthlyBillingWithCommitment && again.monthlyCommitmentCharge == p.monthlyCommitmentCharge)
    }
}
