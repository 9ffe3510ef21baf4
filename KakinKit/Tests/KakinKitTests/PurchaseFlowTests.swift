import Foundation
import KakinKit
import Testing

/// The coordinator's rules, one flow at a time (seeds 000, 001, 004 and the mission's app-side items).
@Suite(.timeLimit(.minutes(1)))
struct PurchaseFlowTests {
    @Test func aPlacementsOfferingIsWhatKakinDecidedWithItsPackagesMetadataAndVariant() async throws {
        let w = World()
        let offering = try await w.app().offering(placement: "onboarding", appVersion: "2.4.1", country: "JP")
        #expect(offering.placement == "onboarding" && offering.offering.id == "annual-first")
        #expect(offering.offering.packages.map(\.productId) == ["premium.yearly", "premium.monthly"])
        #expect(offering.offering.metadata?["highlight"]?.stringValue == "annual" && offering.offering.metadata?["discount"] == .number(40))
        #expect(offering.experiment?.id == "paywall-test" && offering.experiment?.variant == "b")
        #expect(w.kakin.offeringRequests.map { "\($0.placement) \($0.appVersion ?? "-") \($0.country ?? "-")" } == ["onboarding 2.4.1 JP"])
    }

    @Test func aPurchaseIsFinishedOnlyAfterKakinCreditedIt() async {
        let w = World()
        let app = w.app()
        let gate = Gate()
        w.kakin.pauseNextSubmit(gate)
        let buying = Task { await app.purchase("coins.500") }
        await gate.untilReached()
        // Paid, Kakin not answered yet: not finished.
        #expect(w.store.queue.count == 1)
        #expect(w.store.finished.isEmpty)
        gate.open()
        let outcome = await buying.value
        let completed = outcome.completed
        #expect(completed?.submission.httpStatus == 201)
        #expect(completed?.submission.grant?.coins?.paid == 500)
        #expect(completed?.processID.hasPrefix("purchase-") == true)
        #expect(w.kakin.submits.map(\.processID) == [completed?.processID ?? ""])
        #expect(w.store.finished == [completed?.transaction.id ?? ""])
        // The customer's appAccountToken from Kakin went with the purchase.
        #expect(w.store.lastOptions?.appAccountToken == w.kakin.token)
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    @Test func buyingAProductWithAnUnfinishedTransactionIsRefusedWithoutASecondCharge() async {
        let w = World()
        #expect(await w.runUntilKilled(.beforeFinish) { _ = await $0.purchase("coins.500") })
        let app = w.app()
        guard case .stillProcessing(let product, let unfinished, let error) = await app.purchase("coins.500") else {
            Issue.record("expected .stillProcessing")
            return
        }
        #expect(product == "coins.500")
        #expect(unfinished.map(\.id) == w.store.queue.map(\.id))
        #expect(error.id == "KKN-8005")
        #expect(error.code == "purchase_still_processing")
        // No payment sheet: one charge only, and the refusal did not retry on the purchase path.
        #expect(w.store.charges.count == 1)
        #expect(w.kakin.submits.count == 1)
        // Another product can still be bought.
        #expect(await app.purchase("coins.100").completed != nil)
    }

    @Test func aDoubleTapOpensOnePaymentSheet() async {
        let w = World()
        let app = w.app()
        let gate = Gate()
        w.store.pauseNextPurchase(gate)
        let first = Task { await app.purchase("coins.100") }
        await gate.untilReached()
        let second = await app.purchase("coins.100")
        gate.open()
        #expect(await first.value.completed != nil)
        guard case .stillProcessing(_, _, let e) = second else {
            Issue.record("the second tap should be refused")
            return
        }
        #expect(e.id == "KKN-8005")
        w.expectChargedOnceCreditedOnce("coins.100", coins: 100)
    }

    @Test func pendingAndCancelledAreOutcomesNotErrors() async {
        let w = World()
        let app = w.app()
        w.store.setNext(.pending)
        #expect(await app.purchase("premium.monthly") == .pending)
        w.store.setNext(.cancel)
        #expect(await app.purchase("premium.monthly") == .cancelled)
        #expect(w.store.charges.isEmpty)
        #expect(w.kakin.submits.isEmpty)
    }

    @Test func anAskToBuyApprovalArrivesAsAnUpdateAndIsCredited() async {
        let w = World()
        let app = w.app()
        _ = await app.launch()
        w.store.setNext(.pending)
        #expect(await app.purchase("coins.100") == .pending)
        // The parent approves: StoreKit delivers the transaction through Transaction.updates.
        w.store.deliverFromOutside("coins.100")
        let events = await nextEvents(app, 3)
        await app.stopListening()
        guard case .retryFinished(let outcome) = events.last(where: { if case .retryFinished = $0 { return true } else { return false } }) else {
            Issue.record("no retry event: \(events)")
            return
        }
        #expect(outcome.trigger == .update)
        #expect(outcome.processID.hasPrefix("retry-update-"))
        #expect(outcome.result.name == "credited")
        w.expectChargedOnceCreditedOnce("coins.100", coins: 100)
    }

    @Test func theListenerLeavesAPurchaseInFlightToThePurchasePath() async {
        let w = World()
        let app = w.app()
        _ = await app.launch()
        let gate = Gate()
        w.kakin.pauseNextSubmit(gate)
        let buying = Task { await app.purchase("coins.100") }
        await gate.untilReached()
        // StoreKit hands the same transaction to the updates stream while the purchase path sends it.
        w.store.redeliver(w.store.queue[0])
        for _ in 0..<50 { await Task.yield() }
        gate.open()
        #expect(await buying.value.completed?.submission.httpStatus == 201)
        await app.stopListening()
        // Sent once, by the purchase path.
        #expect(w.kakin.submits.count == 1)
        #expect(w.kakin.submits.first?.processID.hasPrefix("purchase-") == true)
        w.expectChargedOnceCreditedOnce("coins.100", coins: 100)
    }

    /// StoreKit's updates may still hold a transaction another path finished: the listener sends it no
    /// second time.
    @Test func anUpdateForATransactionAlreadyFinishedIsNotSentAgain() async {
        let w = World()
        let app = w.app()
        guard let bought = await app.purchase("coins.100").completed else {
            Issue.record("not bought")
            return
        }
        await app.startListening()
        w.store.redeliver(bought.transaction)
        let other = w.store.deliverFromOutside("coins.500")
        for await event in app.events {
            if case .retryFinished(let o) = event, o.transaction.id == other.id { break }
        }
        await app.stopListening()
        #expect(w.kakin.submits.map(\.transactionID) == [bought.transaction.id, other.id])
        #expect(w.store.queue.isEmpty)
    }

    @Test func eachRetryOutcomeAndTheStillProcessingAlertAreEvents() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.100") })
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        // coins.100 will be refused for good (another customer owns it); coins.500 goes through.
        let conflict = KakinKitError(id: "KKN-3004", code: "belongs_to_another_customer", message: "linked to another customer", httpStatus: 403)
        w.kakin.fail(.refuse(conflict))
        let app = w.app()
        let report = await app.launch()
        await app.stopListening()
        #expect(report.retries.map(\.result.name) == ["stillUnfinished", "credited"])
        // A refusal is not retried with backoff: it needs a person, and the UI shows its ID.
        #expect(report.retries.first?.attempts == 1)
        #expect(report.retries.first?.error?.id == "KKN-3004")
        let events = await nextEvents(app, 5)
        let retries = events.compactMap { e -> RetryOutcome? in if case .retryFinished(let o) = e { return o } else { return nil } }
        #expect(retries.map(\.transaction.productID) == ["coins.100", "coins.500"])
        #expect(events.contains(.stillProcessing(report.stillUnfinished)))
        #expect(report.stillUnfinished.map(\.productID) == ["coins.100"])
    }

    @Test func whenKakinIsDownTheRestOfTheRoundGetsOneTryEach() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.100") })
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        w.kakin.fail(.unavailable, .unavailable, .unavailable, .unavailable)
        let app = w.app()
        let retries = await app.enterForeground()
        #expect(retries.map(\.attempts) == [3, 1])
        #expect(retries.allSatisfy { $0.error?.id == "KKN-1009" && $0.error?.requestId == "req_1" })
        #expect(w.store.finished.isEmpty)
    }

    @Test func theWalletIsReadAfterUnfinishedPurchasesAreRetried() async {
        let w = World()
        #expect(await w.runUntilKilled(.sendBeforeKakin) { _ = await $0.purchase("coins.500") })
        let report = try? await w.app().wallet()
        #expect(report?.retries.map(\.trigger) == [.wallet])
        #expect(report?.retries.first?.processID.hasPrefix("retry-wallet-") == true)
        #expect(report?.wallet.paid == 500)
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    @Test func aRefundedTransactionIsRecordedAndFinished() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        w.kakin.revoke(w.store.queue[0].id)
        let report = await w.relaunch()
        #expect(report.retries.map(\.result.name) == ["revoked"])
        #expect(report.retries.first?.error?.id == "KKN-3003")
        #expect(w.store.queue.isEmpty)
        #expect(w.kakin.paidCoins == 0)
    }

    @Test func launchSaysWhoTheCustomerIs() async {
        let w = World()
        let report = await w.relaunch()
        guard case .success(let status) = report.status else {
            Issue.record("no status")
            return
        }
        #expect(status.kind == .new)
        #expect(status.eligibility?.introductoryOffer?["premium"] == true)
        #expect(report.retries.isEmpty)
        #expect(report.stillUnfinished.isEmpty)
    }

    @Test func aStoreFailureChargesNothingAndCarriesAnID() async {
        let w = World()
        w.store.setNext(.fail)
        #expect(await w.app().purchase("coins.100") == .failed(KakinKitError(.storeFailed)))
        #expect(await w.app().purchase("unknown.product") == .failed(KakinKitError(.productUnavailable)))
        #expect(w.store.charges.isEmpty)
    }

    @Test func aPurchaseNeedsKakinToSayWhoPays() async {
        let w = World()
        w.kakin.failStatus(.network)
        guard case .failed(let e) = await w.app().purchase("coins.100") else {
            Issue.record("expected .failed")
            return
        }
        #expect(e.id == "KKN-8001")
        #expect(w.store.charges.isEmpty)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct RestoreAndOfferTests {
    @Test func restoreSyncsRetriesUnfinishedThenAsksKakinWithATransactionOfTheAccount() async throws {
        let w = World()
        let app = w.app()
        #expect(await app.purchase("noads").completed != nil)
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.100") })
        let report = try await w.app().restore()
        #expect(w.store.syncs == 1)
        #expect(report.syncError == nil)
        #expect(report.retries.map(\.trigger) == [.restore])
        #expect(report.retries.first?.processID.hasPrefix("retry-restore-") == true)
        #expect(w.kakin.restores == [w.store.charges.first { $0.productID == "noads" }?.id])
        #expect(w.store.queue.isEmpty)
    }

    @Test func restoreStillAsksKakinWhenTheAppStoreSyncIsDismissed() async throws {
        let w = World()
        w.store.setSyncFails()
        let report = try await w.app().restore()
        #expect(report.syncError?.id == "KKN-8003")
        #expect(w.kakin.restores == [nil])
    }

    @Test func anOfferOnAServerWithoutOffersIsAClearErrorAndChargesNothing() async {
        let w = World()
        #expect(await w.app().purchase("premium.monthly", offerID: "promo.1y.free") == .failed(KakinKitError(.offersNotSupported)))
        #expect(KakinKitError(.offersNotSupported).id == "KKN-8004")
        #expect(w.store.charges.isEmpty)
    }

    @Test func aSubscriptionIsBoughtWithKakinsSignedIntroductoryEligibility() async {
        let w = World()
        w.kakin.supportOffers()
        #expect(await w.app().purchase("premium.monthly").completed != nil)
        #expect(w.store.lastOptions?.introductoryOfferEligibility == "eligibility.premium.monthly.jws")
        // Kakin names a customer who never bought by the device's app transaction.
        #expect(w.kakin.eligibilityRequests.map(\.productID) == ["premium.monthly"])
        #expect(w.kakin.eligibilityRequests.first?.appTransactionID == InMemoryAppStore.appTransactionID)
        // Coins have no introductory offer: Kakin is not asked; a promotional offer replaces the eligibility.
        #expect(await w.app().purchase("coins.100").completed != nil)
        #expect(w.store.lastOptions?.introductoryOfferEligibility == nil)
        #expect(await w.app().purchase("premium.monthly", offerID: "promo.1y.free").completed != nil)
        #expect(w.store.lastOptions?.offer?.offerID == "promo.1y.free")
        #expect(w.store.lastOptions?.introductoryOfferEligibility == nil)
        #expect(w.kakin.eligibilityRequests.count == 1)
    }

    @Test func aKakinWithoutEligibilityLeavesItToTheAppStore() async {
        let w = World()
        #expect(await w.app().purchase("premium.monthly").completed != nil)
        #expect(w.kakin.eligibilityRequests.count == 1)
        #expect(w.store.lastOptions?.introductoryOfferEligibility == nil)
        #expect(w.store.charges.count == 1)
    }

    @Test(arguments: [OfferSignatureFormat.legacy, .jws])
    func anOfferIsSignedByKakinAndAppliedToThePurchase(_ format: OfferSignatureFormat) async {
        let w = World()
        w.kakin.supportOffers()
        #expect(await w.app(format: format).purchase("premium.monthly", offerID: "promo.1y.free").completed != nil)
        let offer = w.store.lastOptions?.offer
        #expect(offer?.offerID == "promo.1y.free")
        switch (format, offer) {
        case (.legacy, .legacy(_, let keyID, _, _, _)?): #expect(keyID == "KEY1")
        case (.jws, .jws(_, let jws)?): #expect(jws == "h.p.s")
        default: Issue.record("wrong offer form: \(String(describing: offer))")
        }
    }
}

@Suite struct RetryPolicyTests {
    @Test func waitsDoubleUpToTheCap() {
        let p = RetryPolicy(attemptsMax: 5, initialDelay: .seconds(1), delayMax: .seconds(5))
        #expect((1...5).map { p.delay(afterAttempt: $0) } == [.seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)])
        #expect(RetryPolicy(attemptsMax: 0).attemptsMax == 1)
        #expect(RetryPolicy(attemptsMax: 1_000).attemptsMax == 10)
    }
}
