@testable import AppStoreSimulator
import KakinCore
import KakinExternal
import Testing

/// The simulated App Store's external purchases: tokens as StoreKit hands them out, Apple's validation of
/// Send External Purchase Report, and EXTERNAL_PURCHASE_TOKEN/UNREPORTED on the simulator's clock.
@Suite struct ExternalPurchaseEngineTests {
    let tax = ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000)
    let jpy = CurrencyCode("JPY")!

    func issue(_ e: inout SimulatorState, _ api: SimulatorState.ExternalPurchaseAPI = .externalPurchase, type: String? = nil,
               account: String = tokenA, refresh: Bool = false, qualifying: Bool = false) throws -> SimExternalToken {
        try e.issueExternalPurchaseToken(api: api, tokenType: type, account: account, refresh: refresh, qualifyingEvent: qualifying)
    }

    func send(_ e: inout SimulatorState, _ report: ExternalPurchaseReport) -> SimulatorState.ReportOutcome {
        e.sendExternalPurchaseReport(report.json)
    }

    func refusedCodes(_ outcome: SimulatorState.ReportOutcome) -> [Int] {
        if case .refused(let errors) = outcome { return errors.map(\.errorCode) }
        return []
    }

    func isAccepted(_ outcome: SimulatorState.ReportOutcome) -> Bool {
        if case .accepted = outcome { return true }
        return false
    }

    func uuid(_ n: Int) -> String { "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - String(n).count) + String(n) }

    @Test func noticeSheetTokensAreNewEachTimeAndDecodeAsKakinReadsThem() throws {
        var e = makeState()
        let a = try issue(&e)
        let b = try issue(&e)
        #expect(a.externalPurchaseId != b.externalPurchaseId && a.externalPurchaseId.hasPrefix("SANDBOX_"))
        let decoded = try ExternalPurchaseToken(token: a.token)
        #expect(decoded.externalPurchaseId == a.externalPurchaseId && decoded.bundleId == "com.example.app" && decoded.appAppleId == 1234)
        #expect(decoded.tokenCreationDateMs == startMs && decoded.tokenType == nil && decoded.tokenExpirationDateMs == nil)
        #expect(decoded.environment == .sandbox)
        var production = makeState(environment: .production)
        #expect(try ExternalPurchaseToken(token: try issue(&production).token).environment == .production)
        #expect(throws: KakinError.self) { try issue(&e, type: "SERVICES") }
    }

    @Test func customLinkPeriodTokensFollowStoreKitsRules() throws {
        var e = makeState()
        let services = try issue(&e, .customLink, type: "SERVICES")
        let acquisition = try issue(&e, .customLink, type: "ACQUISITION")
        #expect(services.expirationMs == startMs + .hour && acquisition.tokenType == "ACQUISITION")
        // While active, the same token; a refreshed one has a new id and the same dates.
        #expect(try issue(&e, .customLink, type: "SERVICES") == services)
        let refreshed = try issue(&e, .customLink, type: "SERVICES", refresh: true)
        #expect(refreshed.externalPurchaseId != services.externalPurchaseId)
        #expect(refreshed.creationMs == services.creationMs && refreshed.expirationMs == services.expirationMs)
        _ = e.advance(by: 2 * .hour)
        // After expiry: no new ACQUISITION ever; a SERVICES one only with a qualifying event.
        #expect(throws: KakinError.self) { try issue(&e, .customLink, type: "ACQUISITION") }
        #expect(throws: KakinError.self) { try issue(&e, .customLink, type: "SERVICES") }
        let next = try issue(&e, .customLink, type: "SERVICES", qualifying: true)
        #expect(next.creationMs == e.nowMs)
        // Another account's first install gets both.
        #expect(try issue(&e, .customLink, type: "ACQUISITION", account: tokenB).accountKey == tokenB)
        // Japan's IN_APP and LINK_OUT: a new token for every potential transaction.
        let inApp1 = try issue(&e, .customLink, type: "IN_APP")
        let inApp2 = try issue(&e, .customLink, type: "IN_APP")
        #expect(inApp1.externalPurchaseId != inApp2.externalPurchaseId && inApp1.expirationMs != nil)
        #expect(throws: KakinError.self) { try issue(&e, .customLink, type: "BOGUS") }
    }

    @Test func anUnreportedTokenBringsOneUnreportedNotificationAtItsDeadline() throws {
        var e = makeState()
        let plain = try issue(&e)
        let reported = try issue(&e)
        let custom = try issue(&e, .customLink, type: "LINK_OUT")
        #expect(isAccepted(send(&e, ExternalPurchaseReport(requestIdentifier: uuid(1), externalPurchaseId: reported.externalPurchaseId, status: .noLineItem))))
        // The custom link token: an hour after its expiry (two hours from now).
        var sent = e.advance(by: 2 * .hour - 1)
        #expect(sent.isEmpty)
        sent = e.advance(by: 1)
        #expect(e.kinds(sent) == ["EXTERNAL_PURCHASE_TOKEN/UNREPORTED"])
        let note = e.notes(sent)[0]
        #expect(note["externalPurchaseToken"]?["externalPurchaseId"] == .string(custom.externalPurchaseId))
        #expect(note["externalPurchaseToken"]?["tokenType"] == "LINK_OUT" && note["externalPurchaseToken"]?["bundleId"] == "com.example.app")
        #expect(note["data"] == nil)
        // The plain token: 10 days after creation; the reported one never; each once.
        sent = e.advance(by: 10 * .day)
        #expect(e.notes(sent).map { $0["externalPurchaseToken"]?["externalPurchaseId"] } == [.string(plain.externalPurchaseId)])
        #expect(e.advance(by: 30 * .day).isEmpty)
        // A report after the notification is still taken (Kakin answers the notification with one).
        #expect(isAccepted(send(&e, ExternalPurchaseReport(requestIdentifier: uuid(2), externalPurchaseId: plain.externalPurchaseId, status: .noLineItem))))
    }

    @Test func reportsKakinBuildsAreAcceptedAndRetrievable() throws {
        var e = makeState()
        let token = try issue(&e)
        _ = e.advance(by: 40 * .day)
        let coins = ExternalPurchaseRecord(provider: "stripe", externalId: "pi_1", productId: "coins.100", kind: .oneTime(quantity: 1), price: 1200,
                                           currency: jpy, purchasedAtMs: startMs + .hour)
        func month(_ n: Int64, _ id: String) -> ExternalPurchaseRecord {
            ExternalPurchaseRecord(provider: "stripe", externalId: id, productId: "premium.monthly",
                                   kind: .subscriptionPeriod(subscriptionKey: "sub_1", periodStartMs: startMs + n * 30 * .day, periodEndMs: startMs + (n + 1) * 30 * .day),
                                   price: 980, currency: jpy, purchasedAtMs: startMs + n * 30 * .day + .hour)
        }
        var accepted = ExternalPurchaseReportBuilder.AcceptedReports()
        let first = try #require(try ExternalPurchaseReportBuilder.nextReport(
            externalPurchaseId: token.externalPurchaseId, purchases: [coins, month(0, "in_1")], accepted: accepted, tax: tax,
            noPurchaseReportDue: false, requestIdentifier: uuid(10)))
        #expect(isAccepted(send(&e, first)))
        accepted.add(first)
        // A renewal and a partial refund of the coins, in a second report.
        var refunded = coins
        refunded.refunds = [.init(refundKey: "1", amount: 600, refundedAtMs: startMs + 35 * .day)]
        let second = try #require(try ExternalPurchaseReportBuilder.nextReport(
            externalPurchaseId: token.externalPurchaseId, purchases: [refunded, month(0, "in_1"), month(1, "in_2")], accepted: accepted, tax: tax,
            noPurchaseReportDue: false, requestIdentifier: uuid(11)))
        #expect(second.lineItems.map(\.eventType) == ["BUY", "REFUND"])
        #expect(refusedCodes(send(&e, second)) == [] && e.external.tokens[token.externalPurchaseId]?.reportedStatuses == ["LINE_ITEM", "LINE_ITEM"])
        // Retrieve gives back what was accepted.
        guard case .success(let body) = e.retrieveExternalPurchaseReport(uuid(11)) else { Issue.record("not retrievable"); return }
        #expect(try ExternalPurchaseReport(json: body["report"]!) == second)
        guard case .failure(let notFound) = e.retrieveExternalPurchaseReport(uuid(99)) else { Issue.record("found"); return }
        #expect(notFound.errorCode == 3 && notFound.fieldName == "requestIdentifier")
    }

    @Test func applesValidationRefusesWhatApplesDocumentationRefuses() throws {
        var e = makeState()
        let token = try issue(&e)
        let id = token.externalPurchaseId
        _ = e.advance(by: .day)
        let coins = ExternalPurchaseRecord(provider: "web", externalId: "o1", productId: "coins.100", kind: .oneTime(quantity: 1), price: 1200,
                                           currency: jpy, purchasedAtMs: startMs + .hour)
        let items = try ExternalPurchaseReportBuilder.lineItems(for: [coins], tax: tax)
        func report(_ rid: Int, _ status: ExternalPurchaseReportStatus = .lineItem, _ lines: [ExternalPurchaseLineItem]? = nil,
                    epid: String? = nil) -> ExternalPurchaseReport {
            ExternalPurchaseReport(requestIdentifier: uuid(rid), externalPurchaseId: epid ?? id, status: status, lineItems: lines ?? items)
        }
        #expect(refusedCodes(send(&e, report(1, epid: "SANDBOX_unknown"))) == [3])                 // NotFoundError
        #expect(refusedCodes(send(&e, report(2, .lineItem, []))) == [9])                            // MissingLineItemsForStatus
        #expect(refusedCodes(e.sendExternalPurchaseReport(["requestIdentifier": .string(uuid(3)), "externalPurchaseId": .string(id),
                                                           "status": "NO_LINE_ITEM", "lineItems": .array(items.map(\.json))])) == [10])
        var badTax = items[0]
        badTax.taxAmount += 1
        var future = items[0]
        future.creationDateMs = e.nowMs + .hour
        var negative = items[0]
        negative.amountTaxExclusive = -1
        negative.netAmountTaxExclusive = -1
        #expect(refusedCodes(send(&e, report(4, .lineItem, [badTax]))) == [11])                     // IncorrectAmountTaxInclusive
        #expect(refusedCodes(send(&e, report(5, .lineItem, [future]))) == [6])                      // FutureDate
        #expect(refusedCodes(send(&e, report(6, .lineItem, [negative]))).contains(15))              // NegativeValueNotAllowed
        var badCountry = items[0]
        badCountry.taxCountry = "Japan"
        #expect(refusedCodes(send(&e, report(7, .lineItem, [badCountry]))) == [7])                 // UnknownEnum (taxCountry)
        // A refused report changes nothing and is resubmitted, corrected, with its requestIdentifier.
        #expect(e.external.tokens[id]?.isReported == false)
        #expect(isAccepted(send(&e, report(4))))
        // The same requestIdentifier again, or for another token: a duplicate.
        #expect(refusedCodes(send(&e, report(4))) == [1])
        // The same line item again without restatement: a duplicate line item.
        #expect(refusedCodes(send(&e, report(8))) == [1])
        // After LINE_ITEM, NO_LINE_ITEM is a regression.
        #expect(refusedCodes(send(&e, report(9, .noLineItem, []))) == [8])
        // Refunds must reference a buy of this token, with the right net amount.
        var refunded = coins
        refunded.refunds = [.init(refundKey: "1", amount: 300, refundedAtMs: startMs + 2 * .hour)]
        var refund = try ExternalPurchaseReportBuilder.lineItems(for: [refunded], tax: tax)[1]
        refund.netAmountTaxExclusive += 5
        #expect(refusedCodes(send(&e, report(10, .lineItem, [refund]))) == [12])                    // IncorrectNetAmount
        refund.netAmountTaxExclusive -= 5
        refund.kind = .refund(referenceLineItemId: "nope")
        #expect(refusedCodes(send(&e, report(11, .lineItem, [refund]))) == [3])
        // Subscriptions: a start has 0 days of paid service; a renewal references the start.
        let month = ExternalPurchaseRecord(provider: "web", externalId: "s1", productId: "premium.monthly",
                                           kind: .subscriptionPeriod(subscriptionKey: "k", periodStartMs: startMs, periodEndMs: startMs + 30 * .day),
                                           price: 980, currency: jpy, purchasedAtMs: startMs + 1)
        var start = try ExternalPurchaseReportBuilder.lineItems(for: [month], tax: tax)[0]
        if case .subscriptionBuy(var s) = start.kind { s.daysOfPaidService = 3; start.kind = .subscriptionBuy(s) }
        #expect(refusedCodes(send(&e, report(12, .lineItem, [start]))) == [34])
        var renewal = try ExternalPurchaseReportBuilder.lineItems(for: [month], tax: tax)[0]
        if case .subscriptionBuy(var s) = renewal.kind {
            s.event = .renewal
            s.referenceLineItemId = items[0].lineItemId  // a one-time buy, not a SUBSCRIPTION_START
            renewal.kind = .subscriptionBuy(s)
        }
        #expect(refusedCodes(send(&e, report(13, .lineItem, [renewal]))) == [29])
        // Malformed bodies.
        #expect(refusedCodes(e.sendExternalPurchaseReport(.null)) == [4])
        #expect(refusedCodes(e.sendExternalPurchaseReport(["requestIdentifier": "not-a-uuid", "externalPurchaseId": .string(id), "status": "NO_LINE_ITEM"])) == [4])
        // DUPLICATE_TOKEN is for SERVICES and ACQUISITION tokens only.
        let other = try issue(&e)
        #expect(refusedCodes(send(&e, report(14, .duplicateToken, [], epid: other.externalPurchaseId))) == [37])
    }
}
