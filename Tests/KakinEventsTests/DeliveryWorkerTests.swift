import Foundation
import HTTPServer
import KakinCore
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinEvents

let secret = Array("whsec_test_0123456789abcdef".utf8)

/// Appends `count` events of one type for a customer (the status after the change is a stand-in).
@discardableResult
func append(_ store: KakinStore, _ customer: String, count: Int = 1, type: EventType = .coinsCredited, ids: SequentialIDs) async throws -> [Event] {
    let now = RealClock().nowMs()
    return try await store.database.write { db in
        try EventOutbox.append(db, customerId: customer, drafts: Array(repeating: EventDraft(type: type, data: ["n": 1]), count: count),
                               customerStatus: ["customerId": .string(customer)], nowMs: now, ids: ids)
    }
}

@Suite(.serialized) struct DeliveryWorker {
    /// The receiver fails 30 % of requests, lets some first attempts hang past the 200 ms deadline, and is down for a
    /// while in the middle; events keep coming throughout. Every event arrives, each customer's in sequence order, none
    /// missing, none dead — with one worker on SQLite and two side by side (two processes) on PostgreSQL.
    @Test(arguments: Backend.available) func everyEventArrivesInOrderPerCustomerThroughFailuresTimeoutsAndAnOutage(_ backend: Backend) async throws {
        try await withStores(backend, count: backend == .postgresql ? 2 : 1) { stores async throws in
            let receiver = try TestReceiver(secrets: [secret], failRate: 0.3, seed: 42, faults: .init(hangShare: 0.15, hangMs: 400))
            let endpoint = WebhookEndpoint(id: "backend", url: receiver.url, secrets: [secret])
            let sender = CountingSender()
            let workers = stores.enumerated().map { i, store in
                WebhookDeliveryWorker(store: store, endpoints: [endpoint], sender: sender, clock: RealClock(), owner: "worker-\(i)",
                                      options: testWorkerOptions())
            }
            for w in workers { try await w.prepare() }
            for w in workers { w.start() }
            let ids = SequentialIDs()
            var appended: [Event] = []
            for round in 0..<30 {
                if round == 10 { await receiver.goDown() }
                if round == 20 {
                    // Down until an attempt was refused (asserted below), however slowly a loaded machine runs the rounds.
                    _ = try await polled({ sender.counts }, until: { ($0["cannot connect to host"] ?? 0) > 0 })
                    try receiver.comeBack()
                }
                for c in 0..<8 where (round + c) % 3 == 0 {
                    appended += try await append(stores[(round + c) % stores.count], "c\(c)", count: c % 2 + 1, ids: ids)
                }
                for w in workers { w.wake() }
                try await Task.sleep(for: .milliseconds(20))
            }
            let arrived = try await receiver.waitForPrinted(appended.count)
            // A first attempt held past its deadline can print its event while the retry is still to come: the backlog
            // empties only once the retry is recorded.
            _ = try await polled({ try await stores[0].webhookCounts(endpointIds: ["backend"]) }, until: { $0.first?.backlog == 0 })
            for w in workers { await w.stop() }
            await receiver.stop()
            #expect(arrived)
            let (sequences, printedIds) = printedByCustomer(receiver.printed)
            #expect(Set(printedIds) == Set(appended.map(\.id)))
            #expect(printedIds.count == appended.count)
            for (customer, events) in Dictionary(grouping: appended, by: \.customerId) {
                #expect(sequences[customer] == events.map(\.sequence).sorted(), "\(customer)")
            }
            // The faults happened: 500s, answers past the deadline, refused connections while down.
            let outcomes = sender.counts
            #expect((outcomes["500"] ?? 0) > 0 && (outcomes["timed out"] ?? 0) > 0 && (outcomes["cannot connect to host"] ?? 0) > 0, "\(outcomes)")
            // (The listener also fails some answers that came too late for the sender.)
            #expect(receiver.listener.counts.failed >= outcomes["500"] ?? 0)
            #expect(receiver.requests > appended.count)
            let counts = try #require(try await stores[0].webhookCounts(endpointIds: ["backend"]).first)
            #expect(counts.backlog == 0 && counts.dead == 0)
        }
    }

    /// One endpoint never answers in time; the other gets every event meanwhile, each customer's in order, and the slow
    /// one never has more than its slots in flight.
    @Test func aSlowEndpointHoldsUpNeitherAnotherEndpointNorOtherCustomers() async throws {
        try await withStores(.sqlite) { stores async throws in
            let store = stores[0]
            let fast = try TestReceiver(secrets: [secret])
            let slow = try TestReceiver(secrets: [secret], faults: .init(hangShare: 1, hangMs: 1_000, hangEveryAttempt: true))
            var options = testWorkerOptions()
            options.concurrencyPerEndpoint = 2
            let worker = WebhookDeliveryWorker(store: store, endpoints: [
                WebhookEndpoint(id: "fast", url: fast.url, secrets: [secret]), WebhookEndpoint(id: "slow", url: slow.url, secrets: [secret]),
            ], sender: HTTPWebhookSender(), clock: RealClock(), owner: "w", options: options)
            try await worker.prepare()
            worker.start()
            let ids = SequentialIDs()
            var appended: [Event] = []
            for c in 0..<6 { appended += try await append(store, "c\(c)", count: 3, ids: ids) }
            worker.wake()
            var slowInFlightMax = 0
            let deadline = Date().addingTimeInterval(30)
            // Sampled until the fast endpoint has everything and the slow one was seen in flight: the fast one can finish
            // before the first sample catches a slow attempt.
            while fast.printed.count < appended.count || slowInFlightMax == 0, Date() < deadline {
                slowInFlightMax = max(slowInFlightMax, worker.inFlight["slow"] ?? 0)
                try await Task.sleep(for: .milliseconds(10))
            }
            // The last answer is printed before the worker records it.
            let counts = try await polled({ try await store.webhookCounts(endpointIds: ["fast", "slow"]) },
                                          until: { $0.first?.backlog == 0 && $0.last?.backlog == appended.count })
            await worker.stop()
            await fast.stop()
            await slow.stop()
            #expect(fast.printed.count == appended.count)
            #expect(printedByCustomer(fast.printed).sequences == Dictionary(grouping: appended, by: \.customerId).mapValues { $0.map(\.sequence) })
            #expect(slowInFlightMax >= 1 && slowInFlightMax <= 2)
            #expect(counts.first { $0.endpointId == "fast" }?.backlog == 0)
            #expect(counts.first { $0.endpointId == "slow" }?.backlog == appended.count)
            #expect(slow.printed.isEmpty)
        }
    }

    /// Past its deadline a failing delivery is dead (and the customer's next event goes on); a replay brings it back.
    @Test(arguments: Backend.available) func aDeadEventComesBackAfterReplay(_ backend: Backend) async throws {
        try await withStores(backend) { stores async throws in
            let store = stores[0]
            let receiver = try TestReceiver(secrets: [secret], faults: .init(answerAll: 500))
            let endpoint = WebhookEndpoint(id: "backend", url: receiver.url, secrets: [secret])
            let worker = WebhookDeliveryWorker(store: store, endpoints: [endpoint], sender: HTTPWebhookSender(), clock: RealClock(), owner: "w",
                                               options: testWorkerOptions(windowMs: 150))
            try await worker.prepare()
            worker.start()
            let ids = SequentialIDs()
            let start = RealClock().nowMs()
            let events = try await append(store, "u1", count: 2, ids: ids)
            worker.wake()
            let counts = try await polled({ try await store.webhookCounts(endpointIds: ["backend"]) },
                                          until: { $0.first?.dead == 2 && $0.first?.backlog == 0 })
            #expect(counts.first?.dead == 2 && counts.first?.backlog == 0)
            let dead = try await store.webhookDeliveries(endpointId: "backend", state: .dead, limit: 10)
            #expect(dead.allSatisfy { $0.lastStatus == 500 && $0.attempts >= 1 && $0.lastAnswer == "refused by the test" })

            receiver.setFaults(.init())
            let queued = try await store.replayWebhookDeliveries(route: endpoint.route, sinceMs: start, nowMs: RealClock().nowMs(),
                                                                 deadlineMs: RealClock().nowMs() + 60_000)
            #expect(queued == 2)
            worker.wake()
            #expect(try await receiver.waitForPrinted(2, timeoutSeconds: 30))
            await worker.stop()
            await receiver.stop()
            #expect(printedByCustomer(receiver.printed).ids == events.map(\.id))
        }
    }

    /// While a secret is rotated the endpoint signs with both; a receiver that knows only the old one accepts. A receiver
    /// with a secret Kakin does not have refuses (400) and the deliveries keep retrying.
    @Test func deliveriesAreSignedWithEverySecretOfTheEndpoint() async throws {
        try await withStores(.sqlite) { stores async throws in
            let store = stores[0]
            let old = Array("whsec_old_0123456789abcdef".utf8), new = Array("whsec_new_0123456789abcdef".utf8)
            let oldOnly = try TestReceiver(secrets: [old])
            let stranger = try TestReceiver(secrets: [Array("whsec_someone_else_0123456".utf8)])
            let worker = WebhookDeliveryWorker(store: store, endpoints: [
                WebhookEndpoint(id: "rotating", url: oldOnly.url, secrets: [new, old]),
                WebhookEndpoint(id: "wrong", url: stranger.url, secrets: [new]),
            ], sender: HTTPWebhookSender(), clock: RealClock(), owner: "w", options: testWorkerOptions())
            try await worker.prepare()
            worker.start()
            let events = try await append(store, "u1", count: 3, ids: SequentialIDs())
            worker.wake()
            #expect(try await oldOnly.waitForPrinted(3, timeoutSeconds: 30))
            // The other endpoint is attempted on its own schedule: wait until its refusal is recorded.
            let wrong = try await polled({ try await store.webhookDeliveries(endpointId: "wrong", state: nil, limit: 10) },
                                         until: { $0.contains { $0.state == .retrying && $0.lastStatus == 400 } })
            await worker.stop()
            await oldOnly.stop()
            await stranger.stop()
            #expect(printedByCustomer(oldOnly.printed).ids == events.map(\.id))
            #expect(stranger.printed.isEmpty && stranger.listener.counts.rejected > 0)
            #expect(wrong.contains { $0.state == .retrying && $0.lastStatus == 400 })
        }
    }

    /// A worker that died holding a customer's chain delays it by its lease at most; then another sends it, in order.
    /// (The living worker's clock is moved past the lease once the other customer's events arrived: how long they take
    /// on a loaded machine does not matter.)
    @Test(arguments: Backend.available) func aChainHeldByAWorkerThatDiedIsSentAfterItsLease(_ backend: Backend) async throws {
        try await withStores(backend) { stores async throws in
            let store = stores[0]
            let receiver = try TestReceiver(secrets: [secret])
            let endpoint = WebhookEndpoint(id: "backend", url: receiver.url, secrets: [secret])
            let leaseMs: Int64 = 60_000
            let clock = MovedClock()
            let worker = WebhookDeliveryWorker(store: store, endpoints: [endpoint], sender: HTTPWebhookSender(), clock: clock, owner: "alive",
                                               options: testWorkerOptions())
            try await worker.prepare()
            let ids = SequentialIDs()
            let events = try await append(store, "u1", count: 3, ids: ids)
            // The dead worker fanned out and claimed u1's chain, then vanished (SIGKILL) before sending anything.
            var claimed: [ClaimedWebhookDelivery] = []
            for _ in 0..<500 where claimed.isEmpty {
                let now = RealClock().nowMs()
                _ = try await store.fanOutWebhookEvents(routes: [endpoint.route], nowMs: now, deadlineMs: now + 60_000, batchMax: 10)
                claimed = try await store.claimWebhookDeliveries(endpointId: "backend", owner: "killed", nowMs: now, leaseMs: leaseMs, limit: 1)
                if claimed.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(claimed.first?.sequence == 1)
            let others = try await append(store, "u2", count: 2, ids: ids)
            worker.start()
            // u2 is not held up by u1's claim; u1 waits for its lease.
            #expect(try await receiver.waitForPrinted(2, timeoutSeconds: 30))
            #expect(printedByCustomer(receiver.printed).sequences == ["u2": [1, 2]])
            clock.move(byMs: leaseMs)
            #expect(try await receiver.waitForPrinted(5, timeoutSeconds: 30))
            await worker.stop()
            await receiver.stop()
            let printed = printedByCustomer(receiver.printed)
            #expect(printed.sequences == ["u1": [1, 2, 3], "u2": [1, 2]])
            // u2 was never held up by u1's lapsed claim.
            #expect(printed.ids.firstIndex(of: others[1].id)! < printed.ids.firstIndex(of: events[0].id)!)
        }
    }

    @Test func theSenderNeverFollowsARedirectAndGivesUpAtItsDeadline() async throws {
        let target = try TestReceiver(secrets: [secret])
        let slow = try TestReceiver(secrets: [secret], faults: .init(hangShare: 1, hangMs: 2_000, hangEveryAttempt: true))
        let redirect = try TestReceiver.start(port: 0) { _ in HTTPResponse(status: 307, headers: ["Location": target.url]) }
        let sender = HTTPWebhookSender()
        let event = #"{"id":"evt_1"}"#
        func request(_ url: String, timeoutMs: Int64 = 5_000) -> WebhookRequest {
            WebhookRequest(endpoint: WebhookEndpoint(id: "e", url: url, secrets: [secret]), eventId: "evt_1", payload: event,
                           nowSeconds: RealClock().nowMs() / 1000, timeoutMs: timeoutMs)
        }
        let redirected = await sender.send(request("http://127.0.0.1:\(redirect.port)/hooks"))
        let late = await sender.send(request(slow.url, timeoutMs: 150))
        await redirect.shutdown(gracePeriodSeconds: 0.2)
        for r in [target, slow] { await r.stop() }
        guard case .answered(307, _) = redirected else { Issue.record("\(redirected)"); return }
        #expect(!redirected.isDelivered && target.printed.isEmpty)
        // The endpoint would have answered 504 after 2 s; the sender gave up at its deadline.
        #expect(late == .failed(reason: "timed out after 150 ms"))
    }

    /// Without any webhook the worker still keeps the feed to `retentionDays` (by the events' own clock).
    @Test(arguments: Backend.available) func withoutWebhooksTheFeedIsStillKeptToItsRetention(_ backend: Backend) async throws {
        struct Later: Clock { func nowMs() -> Int64 { RealClock().nowMs() + 2 * 86_400_000 } }
        try await withStores(backend) { stores async throws in
            let store = stores[0]
            let ids = SequentialIDs()
            let events = try await append(store, "u1", count: 3, ids: ids)
            var options = testWorkerOptions()
            options.retentionDays = 1
            let worker = WebhookDeliveryWorker(store: store, endpoints: [], sender: HTTPWebhookSender(), clock: RealClock(), eventClock: Later(),
                                               owner: "w", options: options)
            #expect(try await store.outboxEvents(ids: events.map(\.id)).count == 3)
            await worker.runPass()
            #expect(try await store.outboxEvents(ids: events.map(\.id)).isEmpty)
            // The sequence goes on.
            #expect(try await append(store, "u1", ids: ids).map(\.sequence) == [4])
        }
    }
}
