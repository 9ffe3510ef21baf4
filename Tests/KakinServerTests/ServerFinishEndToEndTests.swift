import Foundation
import KakinCore
import KakinService
import KakinStorage
@testable import KakinServer
import Testing

/// `serverFinish` end to end in local mode, with `kakin app` as separate processes on one device directory (seed
/// 000's worst case): the app paid and never reached Kakin; the App Store's notification credited the coins; once the
/// simulator's clock moved past `serverFinish.afterSeconds`, Kakin finished the transaction at the App Store, and the
/// device's unfinished queue follows it.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ServerFinishEndToEndTests {
    static let demo = LocalMode.configuration().apple2026Settings(bundleId: Catalog.demoBundleId)

    /// Moves the simulated clock through Kakin's local-mode route (`POST /simulator/v1/clock`), as a tester's curl does.
    static func advance(_ sk: SimulatedKakin, seconds: Int64) async throws {
        let moved = await sk.kakin("POST", "/simulator/v1/clock", ["advanceSeconds": .int(seconds)])
        #expect(moved.status == 200, "\(moved)")
    }

    @Test func aCoinPackTheAppNeverSentIsFinishedByKakinAfterTheDelayAndCreditedOnce() async throws {
        #expect(Self.demo.serverFinish?.afterSeconds == 600)
        try await SimulatedKakin.with(apple2026: Self.demo) { sk in
            let device = KakinAppTests.deviceDirectory(sk)
            let buy = try await KakinAppTests.app(sk, device, ["buy", "coins.500", "--fail-at", "send"])
            #expect(buy.status == 1, "\(buy)")
            let waiting = try await KakinAppTests.app(sk, device, ["unfinished"])
            #expect(waiting.stdout.hasSuffix(" coins.500\n"), "\(waiting)")
            let transactionId = String(waiting.stdout.split(separator: " ")[0])
            #expect(await KakinAppTests.settledWallet(sk).purchases == 1)
            #expect(try await sk.app.store.serverFinishRequest(transactionId: transactionId)?.state == .pending)

            // Not yet due: five minutes.
            try await Self.advance(sk, seconds: 300)
            #expect(try await KakinAppTests.app(sk, device, ["unfinished"]).stdout.hasSuffix(" coins.500\n"))
            #expect(try await sk.app.store.serverFinishRequest(transactionId: transactionId)?.state == .pending)

            // Past serverFinish.afterSeconds (600): Kakin calls Finish Transaction.
            try await Self.advance(sk, seconds: 301)
            let after = try await KakinAppTests.app(sk, device, ["unfinished"])
            print("kakin app unfinished (after the clock moved past serverFinish.afterSeconds): \(after.stdout)", terminator: "")
            #expect(after.stdout == "none\n", "\(after)")
            let job = try #require(try await sk.app.store.serverFinishRequest(transactionId: transactionId))
            #expect(job.state == .sent && job.attempts == 1)
            #expect(sk.app.metrics.value(.serverFinishesSent) == 1)

            // The next launch has nothing to retry, and the coins were credited once.
            let launch = try await KakinAppTests.app(sk, device, ["launch"])
            #expect(launch.status == 0, "\(launch)")
            #expect(!launch.stdout.contains("retry \(transactionId)"), "\(launch)")
            let settled = await KakinAppTests.settledWallet(sk)
            print("coins credited: paid \(settled.paid ?? -1) free \(settled.free ?? -1), purchase entries \(settled.purchases)")
            #expect(settled.paid == 500 && settled.free == 50 && settled.purchases == 1)
            let timeline = "\(await sk.kakin("GET", "/v1/admin/customers/u1/events").json)"
            #expect(timeline.contains("serverFinish.scheduled") && timeline.contains("serverFinish.sent"))
        }
    }

    @Test func aTransactionTheAppSentIsLeftToTheApp() async throws {
        try await SimulatedKakin.with(apple2026: Self.demo) { sk in
            let device = KakinAppTests.deviceDirectory(sk)
            // The notification credits it first (local mode delivers it before the purchase answers); the app's send is a 409.
            let buy = try await KakinAppTests.app(sk, device, ["buy", "coins.100"])
            #expect(buy.status == 0, "\(buy)")
            let unfinished = try await KakinAppTests.app(sk, device, ["unfinished"])
            #expect(unfinished.stdout == "none\n")
            let ledger = await sk.kakin("GET", "/v1/customers/u1/wallet/ledger").json
            let transactionId = try #require(ledger["entries"]?.arrayValue?.first?["reference"]?.stringValue)
            #expect(try await sk.app.store.serverFinishRequest(transactionId: transactionId)?.state == .appSent)
            try await Self.advance(sk, seconds: 3_600)
            #expect(try await sk.app.store.serverFinishRequest(transactionId: transactionId)?.state == .appSent)
            #expect(sk.app.metrics.value(.serverFinishesSent) == 0)
        }
    }

    @Test func withoutServerFinishNothingIsScheduled() async throws {
        try await SimulatedKakin.with { sk in
            let bought = try await sk.buy("u1", "coins.100")
            let transactionId = try #require(bought["transactionId"]?.stringValue)
            #expect(try await sk.app.store.serverFinishRequest(transactionId: transactionId) == nil)
        }
    }
}
