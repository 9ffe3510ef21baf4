import Foundation
import KakinKit
import Testing

/// Seed 000's purchase sequence (buy → send to Kakin → 201 → finish; a retry → 409 → finish) with the app
/// killed or the network dropped at every step. Whatever happens, the customer is charged once, credited
/// once, and nothing stays unfinished once the app has launched again.
@Suite(.timeLimit(.minutes(1)))
struct SeedZeroFailureTests {
    @Test(arguments: [KillPoint.afterPayment, .sendBeforeKakin, .sendAfterKakin, .beforeFinish])
    func aPurchaseKilledAtAnyStepIsCreditedOnceAfterRelaunch(_ point: KillPoint) async {
        let w = World()
        #expect(await w.runUntilKilled(point) { _ = await $0.purchase("coins.500") })
        // The process is gone: the transaction is paid and unfinished on the device.
        #expect(w.store.queue.map(\.productID) == ["coins.500"])

        let report = await w.relaunch()
        #expect(report.retries.count == 1)
        let credited = w.kakin.credits.isEmpty == false
        #expect(credited)
        // Before Kakin heard of it: credited now (201). After Kakin credited it: 409, and finished all the same.
        let expected = (point == .afterPayment || point == .sendBeforeKakin) ? "credited" : "alreadyCredited"
        #expect(report.retries.first?.result.name == expected)
        #expect(report.retries.first?.processID.hasPrefix("retry-launch-") == true)
        #expect(report.stillUnfinished.isEmpty)
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    @Test func theNetworkDroppingDuringTheKakinCallLeavesItUnfinishedUntilTheNextForeground() async {
        let w = World()
        let app = w.app()
        w.kakin.fail(.network)
        guard case .unfinished(let t, let processID, let error) = await app.purchase("coins.500") else {
            Issue.record("expected .unfinished")
            return
        }
        #expect(error.id == "KKN-8001")
        #expect(processID.hasPrefix("purchase-"))
        #expect(w.store.queue == [t])
        #expect(w.store.finished.isEmpty)

        let retries = await app.enterForeground()
        #expect(retries.map(\.result.name) == ["credited"])
        #expect(retries.first?.processID.hasPrefix("retry-foreground-") == true)
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    @Test func aRetryKilledAfter409IsFinishedAtTheNextLaunch() async {
        let w = World()
        #expect(await w.runUntilKilled(.beforeFinish) { _ = await $0.purchase("coins.100") })
        // First relaunch: Kakin answers 409 (credited before) and the app is killed before finish again.
        #expect(await w.runUntilKilled(.beforeFinish) { _ = await $0.launch() })
        #expect(w.store.queue.count == 1)
        let report = await w.relaunch()
        #expect(report.retries.map(\.result.name) == ["alreadyCredited"])
        w.expectChargedOnceCreditedOnce("coins.100", coins: 100)
        // Every try was a retry after the first one: support can tell them apart by prefix.
        let processes = w.kakin.submits.map(\.processID)
        #expect(processes.count == 3)
        #expect(processes[0].hasPrefix("purchase-"))
        #expect(processes.dropFirst().allSatisfy { $0.hasPrefix("retry-launch-") })
    }

    @Test func aRelaunchKilledDuringItsRetryIsFinishedByTheNextOne() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        #expect(await w.runUntilKilled(.sendAfterKakin) { _ = await $0.launch() })
        #expect(w.kakin.credits.values.reduce(0, +) == 1)
        let report = await w.relaunch()
        #expect(report.retries.map(\.result.name) == ["alreadyCredited"])
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    /// StoreKit hands every unfinished transaction to a new listener: when the listener's retry ends before
    /// the launch round lists what is unfinished, the launch report still shows it (the UI's snackbar).
    @Test func aRetryTheListenerFinishesFirstIsInTheLaunchReport() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        let gate = Gate()
        w.store.pauseNextUnfinished(gate)
        let app = w.app()
        Task {
            for await event in app.events {
                if case .retryFinished = event { return gate.open() }
            }
        }
        let report = await app.launch()
        await app.stopListening()
        #expect(report.retries.map(\.result.name) == ["credited"])
        #expect(report.retries.first?.trigger == .launch)
        #expect(report.stillUnfinished.isEmpty)
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    @Test func kakinUnreachableAtRelaunchIsRetriedWithBackoffThenAtForeground() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        w.kakin.fail(.network, .network, .network)
        w.kakin.failStatus(.network)
        let app = w.app()
        let report = await app.launch()
        // Three attempts on one retry process, waiting 1 s then 2 s.
        #expect(report.retries.count == 1)
        #expect(report.retries.first?.attempts == 3)
        #expect(report.retries.first?.error?.id == "KKN-8001")
        #expect(Set(w.kakin.submits.map(\.processID)).count == 1)
        #expect(w.sleeps.with { $0 } == [.seconds(1), .seconds(2)])
        // The status could not be read either, and the UI is told a purchase is still being processed.
        if case .failure(let e) = report.status { #expect(e.id == "KKN-8001") } else { Issue.record("status should have failed") }
        #expect(report.stillUnfinished.map(\.productID) == ["coins.500"])

        let later = await app.enterForeground()
        await app.stopListening()
        #expect(later.map(\.result.name) == ["credited"])
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }

    @Test func aNotificationThatCreditedFirstStillLetsThePurchaseFinish() async {
        let w = World()
        #expect(await w.runUntilKilled(.afterPayment) { _ = await $0.purchase("coins.500") })
        // The App Store's notification reached Kakin while the app was dead.
        w.kakin.creditFromNotification(w.store.queue[0])
        let report = await w.relaunch()
        #expect(report.retries.map(\.result.name) == ["alreadyCredited"])
        w.expectChargedOnceCreditedOnce("coins.500", coins: 500)
    }
}
