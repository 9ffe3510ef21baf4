@testable import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinSystem
import Synchronization
import Testing

/// A wall clock the test moves by hand.
final class ManualWall: Clock {
    let ms: Mutex<Int64>
    init(_ start: Int64) { ms = Mutex(start) }
    func nowMs() -> Int64 { ms.withLock { $0 } }
    func move(_ delta: Int64) { ms.withLock { $0 += delta } }
}

@Suite struct SimulatedTime {
    @Test func theClockStandsStillUntilAdvancedAndNeverGoesBack() {
        let wall = ManualWall(1_000)
        let clock = SimulatedClock(startMs: startMs, wall: wall)
        wall.move(60_000)
        #expect(clock.nowMs() == startMs)
        #expect(clock.moveForward(toMs: startMs + 5) == startMs + 5)
        #expect(clock.moveForward(toMs: startMs) == startMs + 5)
    }

    @Test func aTimeRateRunsSimulatedTimeFasterThanRealTime() {
        let wall = ManualWall(1_000)
        // 720 simulated seconds per real second: a 30-day month per real hour.
        let clock = SimulatedClock(startMs: startMs, timeRate: 720, wall: wall)
        wall.move(1_000)
        #expect(clock.nowMs() == startMs + 720_000)
        clock.setTimeRate(0)
        wall.move(1_000)
        #expect(clock.nowMs() == startMs + 720_000)
    }

    @Test func renewalsHappenAsRatedTimePassesWithoutAnyAdvanceCall() async throws {
        let wall = ManualWall(SystemClock().nowMs())
        let sink = ScriptedSink()
        let config = SimulatorConfiguration(catalog: offersCatalog(), bundleId: "com.example.app", appAppleId: 1234, seed: 3)
        let sim = try AppStoreSimulator(configuration: config, clock: SimulatedClock(startMs: startMs, timeRate: 86_400, wall: wall), sink: sink, wall: wall)
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B"])
        wall.move(40_000)   // 40 real seconds = 40 simulated days
        _ = await sim.advance(toMs: sim.clock.nowMs())
        #expect(sink.received.count == 2)
        let view = sim.core.withLock { c in c.engine.store.subscriptions.values.first!.latestTransactionId }
        #expect(sim.core.withLock { $0.engine.store.transactions[view]!.purchaseDate } == plus("P1M", startMs))
    }
}

@Suite struct InProcessDelivery {
    @Test func notificationsPostApplesBodyToTheHandlerAndItsStatusDecides() async throws {
        let seen = Mutex<[HTTPRequest]>([])
        let sink = InProcessNotificationSink { request in
            let count = seen.withLock { s -> Int in
                s.append(request)
                return s.count
            }
            return HTTPResponse(status: count == 1 ? 503 : 200)
        }
        let sim = try makeSimulator(sink: sink)
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins"])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": 3_600])
        let requests = seen.withLock { $0 }
        #expect(requests.count == 2)
        #expect(requests[0].path == "/v1/notifications/appstore")
        #expect(requests[0].method == "POST")
        let body = try JSONParser.parse(requests[0].body)
        #expect(try verifier(sim).verifyNotification(body["signedPayload"]!.stringValue!).notificationType == .oneTimeCharge)
        #expect(requests[1].body == requests[0].body)
        #expect(sim.core.withLock { $0.engine.store.notifications[0].attempts.map(\.sendAttemptResult) } == ["UNSUCCESSFUL_HTTP_RESPONSE_CODE", "SUCCESS"])
    }
}

@Suite struct CommandLineOfTheSimulator {
    @Test func flagsAreReadAndBadOnesRefused() throws {
        let o = try SimulatorCommand.parse(["serve", "--port", "8090", "--notify", "http://127.0.0.1:8080/v1/notifications/appstore",
                                            "--grace-days", "16", "--seed", "9", "--start", "2026-01-01T00:00:00Z", "--time-rate", "720"])
        #expect(o.port == 8090)
        #expect(o.graceDays == 16)
        #expect(o.seed == 9)
        #expect(o.startMs == Timestamp.parseRFC3339("2026-01-01T00:00:00Z"))
        #expect(o.timeRate == 720)
        for bad in [["serve"], ["serve", "--port", "8090"], ["serve", "--port", "x", "--notify", "http://a"], ["serve", "--port", "1", "--notify", "http://a", "--nope"],
                    ["serve", "--port", "1", "--notify", "http://a", "--grace-days", "40"], ["serve", "--port", "1", "--notify", "http://a", "--environment", "Xcode"],
                    ["run"]] {
            #expect(throws: SimulatorCommand.UsageError.self) { try SimulatorCommand.parse(bad) }
        }
    }

    @Test func catalogFilesAreReadByKind() throws {
        var o = try SimulatorCommand.parse(["serve", "--port", "1", "--notify", "http://a"])
        #expect(try SimulatorCommand.configuration(o).bundleId == Catalog.demoBundleId)
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Fixtures").standardizedFileURL
        o.catalogPath = fixtures.appendingPathComponent("apple-sample-food-truck-Products.storekit").path
        o.bundleId = "com.example.foodtruck"
        let storekit = try SimulatorCommand.configuration(o)
        #expect(storekit.catalog["socialfeedplus.monthly"]?.introductoryOffer?.mode == .payAsYouGo)
        let json = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-catalog-\(UUID().uuidString).json")
        try Data(#"{"bundleId":"com.example.json","products":[{"productId":"c","type":"consumable","coins":10}]}"#.utf8).write(to: json)
        defer { try? FileManager.default.removeItem(at: json) }
        o.catalogPath = json.path
        o.bundleId = nil
        let contract = try SimulatorCommand.configuration(o)
        #expect(contract.bundleId == "com.example.json")
        #expect(contract.catalog["c"]?.coins == 10)
        o.catalogPath = "/nonexistent.json"
        #expect(throws: SimulatorCommand.StartError.self) { try SimulatorCommand.configuration(o) }
    }

    @Test func aReadyMadeTokenOpensTheServerAPI() async throws {
        let sim = try makeSimulator()
        let tid = (await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins"])).json["transactionId"]!.stringValue!
        let token = (await call(sim, "GET", "/simulator/v1/api-token")).json["token"]!.stringValue!
        #expect((await call(sim, "GET", "/inApps/v1/transactions/\(tid)", bearer: token)).status == 200)
    }
}
