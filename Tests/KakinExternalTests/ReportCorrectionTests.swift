import KakinCore
import KakinExternal
import Testing

/// A report job survives a restart (its stored form), and what Kakin corrects itself in a report Apple refused.
@Suite struct ReportCorrectionTests {
    let tax = ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000)
    let jpy = CurrencyCode("JPY")!

    func report(at ms: Int64, rid: String = "6a1e2f30-0000-4000-8000-000000000001") throws -> ExternalPurchaseReport {
        let buy = ExternalPurchaseRecord(provider: "web", externalId: "ord_1", productId: "coins.100", kind: .oneTime(quantity: 1), price: 120,
                                         currency: jpy, purchasedAtMs: ms)
        return try #require(try ExternalPurchaseReportBuilder.nextReport(
            externalPurchaseId: "SANDBOX_1", purchases: [buy], accepted: .init(), tax: tax, noPurchaseReportDue: false, requestIdentifier: rid))
    }

    @Test func aJobReadBackFromItsStoredFormIsTheSameJob() throws {
        var job = ExternalPurchaseReportJob(report: try report(at: 1_000), createdAtMs: 5)
        #expect(ExternalPurchaseReportJob(stored: job.storedJSON) == job)
        job.markRetryable(atMs: 10, retryAfterMs: 90_000)
        #expect(ExternalPurchaseReportJob(stored: job.storedJSON) == job)
        job.markRejected([ExternalPurchaseReportError(errorCode: 6, errorMessage: "future", fieldName: "creationDate", lineItemId: "x")], atMs: 20)
        #expect(ExternalPurchaseReportJob(stored: job.storedJSON) == job)
        #expect(ExternalPurchaseReportJob(stored: ["state": "sent"]) == nil)
    }

    @Test func aLineAppleCalledFutureDatedIsDatedAtResubmissionAndNothingElseIsInvented() throws {
        let refused = try report(at: 2_000)
        let line = refused.lineItems[0].lineItemId
        let future = [ExternalPurchaseReportError(errorCode: 6, errorMessage: "future", fieldName: "creationDate", lineItemId: line)]
        let rebuilt = try report(at: 2_000, rid: "6a1e2f30-0000-4000-8000-000000000002")
        let corrected = try #require(ExternalPurchaseReportCorrection.corrected(refused, errors: future, rebuilt: rebuilt, nowMs: 5_000))
        #expect(corrected.requestIdentifier == refused.requestIdentifier)
        #expect(corrected.lineItems[0].creationDateMs == 5_000)
        // Another refusal with nothing Kakin can fix: no correction until the records change.
        let other = [ExternalPurchaseReportError(errorCode: 11, errorMessage: "amount", fieldName: "amountTaxInclusive", lineItemId: line)]
        #expect(ExternalPurchaseReportCorrection.corrected(refused, errors: other, rebuilt: rebuilt, nowMs: 5_000) == nil)
        #expect(ExternalPurchaseReportCorrection.corrected(refused, errors: other, rebuilt: try report(at: 1_500), nowMs: 5_000)?.lineItems[0].creationDateMs == 1_500)
        #expect(ExternalPurchaseReportCorrection.corrected(refused, errors: future, rebuilt: nil, nowMs: 5_000) == nil)
    }
}
