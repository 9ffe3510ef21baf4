import Foundation
import KakinCore
import KakinEvents
import KakinMetrics
import KakinService
@testable import KakinServer
import Testing

/// Issue 28's done-when for the outbox's retention: the business numbers' worker stopped longer than `retentionDays`
/// loses nothing. Local mode (events stamped with the simulator's clock), retention 1 day, purges as often as the
/// delivery worker passes.
@Suite struct MetricsCursorRetention {
    static let day: Int64 = 86_400_000

    @Test func aStoppedNumbersWorkerKeepsItsEventsRaisesTheMetricAndTheDeskWarningAndCatchesUpToARebuild() async throws {
        try await SimulatedKakin.with(configure: { config in
            config.events = EventsSettings(webhooks: [], retentionDays: 1)
        }, configureRuntime: { options in
            options.webhookOptions.retentionIntervalMs = 10
            options.webhookOptions.pollIntervalMs = 20
        }) { k in
            let numbers = k.app.services.businessMetrics, store = k.app.services.store
            func scrape() async -> String { String(decoding: await k.app.handle(HTTPRequestFactory.get("/metrics", [])).body, as: UTF8.self) }
            func desk() async -> String { String(decoding: await k.app.handle(HTTPRequestFactory.get("/admin/", [])).body, as: UTF8.self) }
            func events(_ c: String) async throws -> [String] { try await store.customerEvents(customerId: c, afterSequence: 0, limit: 100).map(\.eventId) }

            // A's events are read by the numbers' worker; then it stops, and B subscribes.
            try await k.buy("A", "coins.500")
            try await numbers.catchUp()
            await numbers.worker.stop()
            try await k.buy("B", "premium.plus.monthly")
            let kept = try await events("B")
            #expect(!kept.isEmpty)
            #expect(await scrape().contains("kakin_outbox_cursor_held_back{cursor=\"metrics\"} 0\n"))

            // Three days later (retention: one): A's events go, B's stay for the stopped worker.
            try await k.advance(days: 3)
            #expect(try await eventually { try await events("A").isEmpty }, "retention purges what every cursor has read")
            #expect(try await events("B") == kept, "no event the numbers' worker has not read is purged")
            let held = await scrape()
            #expect(held.contains("kakin_outbox_cursor_held_back{cursor=\"metrics\"} 1\n"), "\(held.split(separator: "\n").filter { $0.contains("outbox") })")
            #expect(await desk().contains("the business numbers' worker is behind"))
            print("retention with the numbers' worker stopped: \(held.split(separator: "\n").filter { $0.hasPrefix("kakin_outbox_cursor_held_back") })")

            // The worker's pass again (it restarts): B is counted, the warning goes, and the numbers are a rebuild's.
            await numbers.processDue()
            #expect(await scrape().contains("kakin_outbox_cursor_held_back{cursor=\"metrics\"} 0\n"))
            #expect(!(await desk()).contains("the business numbers' worker is behind"))
            let today = Timestamp.rfc3339(k.nowMs).prefix(10)
            let caughtUp = try await numbers.overview(from: "2026-01-01", to: String(today), filter: MetricsFilter())
            #expect(caughtUp.activeSubscriptions == 1 && caughtUp.revenue.first?.bySource["appStore"]?.gross == 1_480 + 600)
            let rebuilt = try await numbers.rebuild()
            #expect(rebuilt.differing == 0, "\(rebuilt.sample)")
            #expect(try await numbers.overview(from: "2026-01-01", to: String(today), filter: MetricsFilter()) == caughtUp)
            // And retention goes on: B's events, read now, go too.
            #expect(try await eventually { try await events("B").isEmpty })
        }
    }
}
