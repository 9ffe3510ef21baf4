import Foundation
import KakinKit
import Testing

/// One device (the in-memory App Store, which outlives every app process) and one Kakin. Each `app()` is a
/// fresh process of the app: a new coordinator that knows only what the device and Kakin kept.
struct World: Sendable {
    let kill = Killswitch()
    let store: InMemoryAppStore
    let kakin: InMemoryKakin
    let sleeps = Locked<[Duration]>([])

    init() {
        store = InMemoryAppStore(kill: kill)
        kakin = InMemoryKakin(kill: kill)
    }

    func app(format: OfferSignatureFormat = .legacy, attemptsMax: Int = 3) -> PurchaseCoordinator {
        let sleeps = self.sleeps
        let uuids = Locked(0)
        return PurchaseCoordinator(customerID: "u1", store: store, backend: kakin, options: .init(
            retry: RetryPolicy(attemptsMax: attemptsMax, initialDelay: .seconds(1), delayMax: .seconds(30)),
            offerFormat: format,
            sleep: { d in sleeps.with { $0.append(d) } },
            makeUUID: { UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", uuids.with { $0 += 1; return $0 }))! }))
    }

    /// Runs `body` on a new app process and kills the process when it reaches `point`. Returns false (and
    /// the test fails) when the step ended without reaching it.
    func runUntilKilled(_ point: KillPoint, _ body: @escaping @Sendable (PurchaseCoordinator) async -> Void) async -> Bool {
        kill.arm(point)
        let app = app()
        let kill = self.kill
        Task {
            await body(app)
            kill.noteFinished()
        }
        for await event in kill.kills {
            // The process is gone: its listener dies with it.
            await app.stopListening()
            return event == point
        }
        return false
    }

    /// A new process of the app runs its launch sequence.
    @discardableResult
    func relaunch() async -> LaunchReport {
        let app = app()
        let report = await app.launch()
        await app.stopListening()
        return report
    }

    /// The promise of seed 000: every charge of `productID` credited exactly once, nothing left unfinished.
    func expectChargedOnceCreditedOnce(_ productID: String, coins: Int64, sourceLocation: SourceLocation = #_sourceLocation) {
        let charges = store.charges.filter { $0.productID == productID }
        #expect(charges.count == 1, "charged \(charges.count) times", sourceLocation: sourceLocation)
        #expect(charges.allSatisfy { kakin.credits[$0.id] == 1 }, "credits: \(kakin.credits)", sourceLocation: sourceLocation)
        #expect(store.queue.isEmpty, "still unfinished: \(store.queue.map(\.id))", sourceLocation: sourceLocation)
        #expect(kakin.paidCoins == coins, sourceLocation: sourceLocation)
    }
}

extension PurchaseOutcome {
    var completed: CompletedPurchase? {
        if case .completed(let c) = self { return c }
        return nil
    }
}

extension RetryOutcome.Result {
    var name: String {
        switch self {
        case .credited: return "credited"
        case .alreadyCredited: return "alreadyCredited"
        case .revoked: return "revoked"
        case .stillUnfinished: return "stillUnfinished"
        }
    }
}

/// The next `count` events, in order.
func nextEvents(_ app: PurchaseCoordinator, _ count: Int) async -> [PurchaseEvent] {
    var out: [PurchaseEvent] = []
    for await e in app.events {
        out.append(e)
        if out.count == count { break }
    }
    return out
}
