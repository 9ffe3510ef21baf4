import KakinCore
import KakinExternal
import Testing

@Suite struct ExternalPurchaseReportTests {
    /// Apple's examples ("Reporting tokens with transactions") report 10.00 EUR as 10000 milli-units with 8000
    /// tax-exclusive and 2000 tax: a 25 % rate.
    let tax = ExternalPurchaseTaxPolicy(taxCountry: "ESP", taxRateBasisPoints: 2500)
    let eur = CurrencyCode("EUR")!
    let dayMs: Int64 = 86_400_000

    func oneTime(_ id: String, price: Int64, at: Int64, quantity: Int64 = 6, refunds: [ExternalPurchaseRecord.Refund] = []) -> ExternalPurchaseRecord {
        ExternalPurchaseRecord(provider: "stripe", externalId: id, productId: "example.one-time-buy.product", kind: .oneTime(quantity: quantity),
                               price: price, currency: eur, purchasedAtMs: at, refunds: refunds)
    }

    func period(_ id: String, product: String = "example.subscription.monthly", start: Int64, days: Int64 = 30, price: Int64 = 1000) -> ExternalPurchaseRecord {
        ExternalPurchaseRecord(provider: "stripe", externalId: id, productId: product,
                               kind: .subscriptionPeriod(subscriptionKey: "sub_1", periodStartMs: start, periodEndMs: start + days * dayMs),
                               price: price, currency: eur, purchasedAtMs: start)
    }

    @Test func aOneTimeBuyAndItsPartialRefundMatchApplesExamples() throws {
        let buy = oneTime("pi_1", price: 1000, at: 1_706_047_472_367,
                          refunds: [.init(refundKey: "1", amount: 250, refundedAtMs: 1_706_047_491_127)])
        let items = try ExternalPurchaseReportBuilder.lineItems(for: [buy], tax: tax)
        #expect(items.count == 2)
        let b = items[0].json, r = items[1].json
        #expect(b["eventType"] == "BUY" && b["productType"] == "ONE_TIME_BUY" && b["quantity"] == 6)
        #expect(b["amountTaxInclusive"] == 10000 && b["amountTaxExclusive"] == 8000 && b["taxAmount"] == 2000 && b["netAmountTaxExclusive"] == 8000)
        #expect(b["reportingCurrency"] == "EUR" && b["pricingCurrency"] == "EUR" && b["taxCountry"] == "ESP")
        #expect(b["creationDate"] == 1_706_047_472_367 && b["lineItemId"] == .string(buy.lineItemId))
        #expect(r["eventType"] == "REFUND" && r["referenceLineItemId"] == .string(buy.lineItemId) && r["productType"] == nil)
        #expect(r["amountTaxInclusive"] == 2500 && r["amountTaxExclusive"] == 2000 && r["taxAmount"] == 500 && r["netAmountTaxExclusive"] == 6000)
        // Line item IDs are UUIDs derived from the purchase: the same on every rebuild.
        #expect(buy.lineItemId.count == 36 && buy.lineItemId == oneTime("pi_1", price: 1, at: 0).lineItemId)
        #expect(buy.lineItemId != oneTime("pi_2", price: 1000, at: 0).lineItemId)
    }

    @Test func aWholeRefundInStepsEndsAtANetOfZero() throws {
        // 3 × 1/3 of 1.00 EUR at 10 %: rounding would leave a milli-unit; the last refund takes the rest.
        let p = oneTime("pi_3", price: 100, at: 0, refunds: [
            .init(refundKey: "1", amount: 33, refundedAtMs: 10), .init(refundKey: "2", amount: 33, refundedAtMs: 20),
            .init(refundKey: "3", amount: 34, refundedAtMs: 30),
        ])
        let items = try ExternalPurchaseReportBuilder.lineItems(for: [p], tax: ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000))
        #expect(items.last?.netAmountTaxExclusive == 0)
        #expect(items.dropFirst().map(\.amountTaxExclusive).reduce(0, +) == items[0].amountTaxExclusive)
        for item in items { #expect(item.amountTaxExclusive + item.taxAmount == item.amountTaxInclusive) }
        let over = oneTime("pi_4", price: 100, at: 0, refunds: [.init(refundKey: "1", amount: 101, refundedAtMs: 1)])
        #expect(throws: KakinError.self) { try ExternalPurchaseReportBuilder.lineItems(for: [over], tax: tax) }
    }

    @Test func subscriptionPeriodsBecomeAStartRenewalsAndPlanChanges() throws {
        let start: Int64 = 1_706_047_488_039
        let periods = [
            period("in_3", product: "example.subscription.plus", start: start + 60 * dayMs),
            period("in_1", start: start), period("in_2", start: start + 30 * dayMs),
        ]
        let items = try ExternalPurchaseReportBuilder.lineItems(for: periods, tax: tax)
        let json = items.map(\.json)
        #expect(json.map { $0["subscriptionEvent"] } == ["SUBSCRIPTION_START", "RENEWAL", "SUBSCRIPTION_CHANGE"])
        // Apple's example: the start ends 1708639488039 with 0 days of paid service, the renewal has 30.
        #expect(json[0]["subscriptionStartDate"] == .int(start) && json[0]["subscriptionEndDate"] == 1_708_639_488_039)
        #expect(json.map { $0["subscriptionDaysOfPaidService"] } == [0, 30, 60])
        #expect(json[0]["referenceLineItemId"] == nil)
        #expect(json[1]["referenceLineItemId"] == .string(periods[1].lineItemId) && json[2]["referenceLineItemId"] == .string(periods[1].lineItemId))
        #expect(json.allSatisfy { $0["productType"] == "SUBSCRIPTION" && $0["eventType"] == "BUY" && $0["quantity"] == 1 })
        // A free trial is reported but is not paid service.
        let trial = [period("in_t", start: 0, days: 7, price: 0), period("in_p", start: 7 * dayMs)]
        let days: [Int64] = try ExternalPurchaseReportBuilder.lineItems(for: trial, tax: tax).map(\.kind).compactMap { kind -> Int64? in
            if case .subscriptionBuy(let s) = kind { return s.daysOfPaidService } else { return nil }
        }
        #expect(days == [0, 0])
    }

    @Test func reportsCarryOnlyWhatAppleHasNotAcceptedAndNoLineItemWhenNothingHappened() throws {
        typealias B = ExternalPurchaseReportBuilder
        let buy = oneTime("pi_1", price: 1000, at: 100)
        var accepted = B.AcceptedReports()
        // A token without purchases: nothing until the no-purchase report is due, then NO_LINE_ITEM once.
        #expect(try B.nextReport(externalPurchaseId: "T", purchases: [], accepted: accepted, tax: tax, noPurchaseReportDue: false,
                                 requestIdentifier: "r0") == nil)
        let none = try #require(try B.nextReport(externalPurchaseId: "T", purchases: [], accepted: accepted, tax: tax,
                                                  noPurchaseReportDue: true, requestIdentifier: "r1"))
        #expect(none.status == .noLineItem && none.lineItems.isEmpty && none.json["lineItems"] == nil)
        #expect(try B.nextReport(externalPurchaseId: "T", purchases: [], accepted: accepted, tax: tax, noPurchaseReportDue: true,
                                 duplicate: true, requestIdentifier: "r1")?.status == .duplicateToken)
        // A purchase: LINE_ITEM with its buy; once accepted, nothing more until a refund.
        let first = try #require(try B.nextReport(externalPurchaseId: "T", purchases: [buy], accepted: accepted, tax: tax,
                                                   noPurchaseReportDue: true, requestIdentifier: "r2"))
        #expect(first.status == .lineItem && first.lineItems.map(\.lineItemId) == [buy.lineItemId])
        accepted.add(first)
        #expect(try B.nextReport(externalPurchaseId: "T", purchases: [buy], accepted: accepted, tax: tax, noPurchaseReportDue: true,
                                 requestIdentifier: "r3") == nil)
        var refunded = buy
        refunded.refunds = [.init(refundKey: "1", amount: 1000, refundedAtMs: 200)]
        let second = try #require(try B.nextReport(externalPurchaseId: "T", purchases: [refunded], accepted: accepted, tax: tax,
                                                    noPurchaseReportDue: true, requestIdentifier: "r4"))
        #expect(second.lineItems.map(\.eventType) == ["REFUND"] && second.lineItems[0].netAmountTaxExclusive == 0)
        #expect(B.unrecognized(externalPurchaseId: "X", requestIdentifier: "r5").json == [
            "requestIdentifier": "r5", "externalPurchaseId": "X", "status": "UNRECOGNIZED_TOKEN",
        ])
    }

    @Test func aReportRoundTripsThroughApplesJSON() throws {
        let items = try ExternalPurchaseReportBuilder.lineItems(
            for: [oneTime("pi_1", price: 1000, at: 1, refunds: [.init(refundKey: "a", amount: 1, refundedAtMs: 2)]), period("in_1", start: 3)], tax: tax)
        let report = ExternalPurchaseReport(requestIdentifier: "c4dcf1a5-afac-4e2c-83d7-280f9f2cb832", externalPurchaseId: "E", status: .lineItem,
                                            lineItems: items)
        #expect(try ExternalPurchaseReport(json: try JSONParser.parse(report.json.serialized())) == report)
    }

    @Test func theReportStateMachineKeepsErrorsAndTheRequestIdentifierUntilSent() throws {
        let report = ExternalPurchaseReport(requestIdentifier: "11111111-1111-4111-8111-111111111111", externalPurchaseId: "E",
                                            status: .lineItem, lineItems: try ExternalPurchaseReportBuilder.lineItems(for: [oneTime("pi_1", price: 1000, at: 1)], tax: tax))
        var job = ExternalPurchaseReportJob(report: report, createdAtMs: 1_000)
        #expect(job.state == .pending && job.isDue(atMs: 1_000))
        // 429 and 5xx: still pending, later; Apple's Retry-After wins when later than the backoff.
        job.markRetryable(atMs: 1_000)
        #expect(job.state == .pending && job.nextAttemptMs == 61_000 && !job.isDue(atMs: 60_999))
        job.markRetryable(atMs: 61_000, retryAfterMs: 10_000_000)
        #expect(job.nextAttemptMs == 10_000_000)
        // 400 with a line-item error: failed, errors kept for the desk.
        let error = ExternalPurchaseReportError(errorCode: 12, errorMessage: "The net amount value does not match the expected value.",
                                                fieldName: "netAmountTaxExclusive", lineItemId: report.lineItems[0].lineItemId)
        job.markRejected([error], atMs: 10_000_000)
        #expect(job.state == .failed && job.errors == [error] && !job.isDue(atMs: .max) && job.json["state"] == "failed")
        #expect(error.objectName == "IncorrectNetAmountError")
        // Corrected (same requestIdentifier), then sent.
        var fixed = report
        fixed.lineItems[0].netAmountTaxExclusive = 8000
        job.correct(with: fixed, atMs: 10_000_100)
        #expect(job.state == .corrected && job.json["state"] == "pending" && job.errors == [error] && job.isDue(atMs: 10_000_100))
        job.markSent(atMs: 10_000_200)
        #expect(job.state == .sent && job.errors.isEmpty && job.requestIdentifier == report.requestIdentifier && job.sentAtMs == 10_000_200)
    }

    @Test func theDeadlineAndWhichTokenAPurchaseGoesUnder() throws {
        let plain = ExternalPurchaseToken(externalPurchaseId: "A", appAppleId: 1, bundleId: "b", tokenCreationDateMs: 0)
        #expect(ExternalPurchaseReportSchedule.noPurchaseReportDueMs(plain) == 9 * dayMs)  // a day before Apple's 10
        let services = ExternalPurchaseToken(externalPurchaseId: "S", appAppleId: 1, bundleId: "b", tokenCreationDateMs: 0,
                                             tokenType: .services, tokenExpirationDateMs: 100 * dayMs)
        let refreshed = ExternalPurchaseToken(externalPurchaseId: "S2", appAppleId: 1, bundleId: "b", tokenCreationDateMs: 0,
                                              tokenType: .services, tokenExpirationDateMs: 100 * dayMs)
        let acquisition = ExternalPurchaseToken(externalPurchaseId: "Q", appAppleId: 1, bundleId: "b", tokenCreationDateMs: 0,
                                                tokenType: .acquisition, tokenExpirationDateMs: 50 * dayMs)
        #expect(ExternalPurchaseReportSchedule.noPurchaseReportDueMs(services) == 100 * dayMs)
        let tokens = [acquisition, services, refreshed]
        #expect(ExternalPurchaseReportSchedule.tokenForPurchase(among: tokens, atMs: 10)?.externalPurchaseId == "S")
        #expect(ExternalPurchaseReportSchedule.tokenForPurchase(among: [acquisition, plain], atMs: 10)?.externalPurchaseId == "Q")
        #expect(ExternalPurchaseReportSchedule.tokenForPurchase(among: [acquisition], atMs: 60 * dayMs) == nil)
        #expect(ExternalPurchaseReportSchedule.tokenForPurchase(among: [plain], atMs: 60 * dayMs)?.externalPurchaseId == "A")
        #expect(ExternalPurchaseReportSchedule.isDuplicate(refreshed, among: tokens) && !ExternalPurchaseReportSchedule.isDuplicate(services, among: tokens))
        #expect(!ExternalPurchaseReportSchedule.isDuplicate(acquisition, among: tokens))
    }
}
