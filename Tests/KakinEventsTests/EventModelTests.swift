import KakinCore
import KakinCrypto
@testable import KakinEvents
import KakinStorage
import KakinTestPostgres
import Testing

@Suite struct EventTypesAndFilters {
    @Test func theTypesAreTheContractsNames() {
        #expect(EventType.allCases.map(\.rawValue) == [
            "customer.created", "customer.transferred", "coins.credited", "coins.spent", "coins.granted", "coins.clawed_back",
            "purchase.refunded", "entitlement.granted", "entitlement.revoked", "subscription.started", "subscription.renewed",
            "subscription.plan_changed", "subscription.offer_redeemed", "subscription.auto_renew_changed", "subscription.billing_issue",
            "subscription.recovered", "subscription.extended", "subscription.expired", "subscription.revoked", "consent.rescinded",
            "external_purchase.reported", "notification.dead", "experiment.enrolled",
        ])
    }

    @Test func aFilterTakesExactNamesPrefixesEndingInDotStarAndStar() throws {
        let coins = try EventTypeFilter(patterns: ["coins.*", "purchase.refunded"])
        #expect(coins.admitted == [.coinsCredited, .coinsSpent, .coinsGranted, .coinsClawedBack, .purchaseRefunded])
        #expect(try EventTypeFilter(patterns: ["*"]) == .all)
        #expect(try EventTypeFilter(query: "subscription.renewed,subscription.expired").admittedNames == ["subscription.renewed", "subscription.expired"])
    }

    @Test func aNameThatIsNoTypeOrAPrefixMatchingNoneIsRefusedWithItsIndex() {
        #expect(throws: EventTypeFilter.Invalid(index: 1, message: "coins.credit is not an event type (exact names, a prefix ending in .*, or *)")) {
            try EventTypeFilter(patterns: ["coins.spent", "coins.credit"])
        }
        #expect(throws: EventTypeFilter.Invalid.self) { try EventTypeFilter(patterns: ["wallet.*"]) }
        #expect(throws: EventTypeFilter.Invalid.self) { try EventTypeFilter(patterns: []) }
        #expect(throws: EventTypeFilter.Invalid.self) { try EventTypeFilter(patterns: ["subscription*"]) }
        #expect(throws: EventTypeFilter.Invalid.self) { try EventTypeFilter(query: "coins.spent,") }
    }
}

@Suite struct RetryScheduleRules {
    @Test func delaysStartAtOneSecondAndDoubleUpToAnHour() {
        let s = RetrySchedule()
        #expect((1...13).map { s.delayMs(afterFailedAttempts: $0) } == [
            1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 512_000, 1_024_000, 2_048_000, 3_600_000,
        ])
        #expect(s.delayMs(afterFailedAttempts: 10_000) == 3_600_000)
    }

    @Test func aDeliveryIsRetriedForSeventyTwoHoursThenDead() {
        let s = RetrySchedule()
        let created: Int64 = 1_000_000
        let deadline = s.deadline(fromMs: created)
        #expect(deadline == created + 72 * 3_600_000)
        var now = created
        var attempts = 0
        while true {
            attempts += 1
            guard case .retry(let at) = s.afterFailure(failedAttempts: attempts, nowMs: now, deadlineMs: deadline) else { break }
            #expect(at > now && at <= deadline)
            now = at
        }
        // 12 doubling waits (about 68 minutes), then hourly to the 72nd hour.
        #expect(attempts == 83)
        #expect(deadline - now < 3_600_000)
        #expect(s.afterFailure(failedAttempts: 1, nowMs: deadline, deadlineMs: deadline) == .dead)
    }
}

@Suite struct WebhookEndpointRules {
    @Test func httpsIsRequiredOutsideLocalModeUnlessTheHostIsLoopback() {
        #expect(WebhookEndpoint.urlProblem("https://backend.example.com/hooks/kakin", localMode: false) == nil)
        #expect(WebhookEndpoint.urlProblem("http://backend.example.com/hooks", localMode: false) != nil)
        #expect(WebhookEndpoint.urlProblem("http://backend.example.com/hooks", localMode: true) == nil)
        #expect(WebhookEndpoint.urlProblem("http://127.0.0.1:9000/", localMode: false) == nil)
        #expect(WebhookEndpoint.urlProblem("http://localhost:9000/", localMode: false) == nil)
        #expect(WebhookEndpoint.urlProblem("http://[::1]:9000/", localMode: false) == nil)
        for bad in ["ftp://x.example/", "/hooks", "https://user:pass@x.example/", "https://x.example/#f", "https://", "not a url"] {
            #expect(WebhookEndpoint.urlProblem(bad, localMode: true) != nil, "\(bad)")
        }
    }

    @Test func idsAreShortAndPlain() {
        #expect(WebhookEndpoint.idProblem("backend-1.prod_a") == nil)
        for bad in ["", "a b", "a/b", String(repeating: "x", count: 65), "é"] { #expect(WebhookEndpoint.idProblem(bad) != nil) }
    }

    @Test func aSecretEnvHoldsOneOrTwoSecretsAndEachSigns() throws {
        let secrets = try WebhookEndpoint.parseSecrets("whsec_new_0123456789abcdef,whsec_old_0123456789abcdef").get()
        #expect(secrets.count == 2)
        #expect(throws: WebhookEndpoint.SecretProblem.self) { try WebhookEndpoint.parseSecrets("short").get() }
        #expect(throws: WebhookEndpoint.SecretProblem.self) { try WebhookEndpoint.parseSecrets("a123456789abcdefgh,b123456789abcdefgh,c123456789abcdefgh").get() }
        #expect(throws: WebhookEndpoint.SecretProblem.self) { try WebhookEndpoint.parseSecrets("whsec_new_0123456789abcdef,").get() }

        let endpoint = WebhookEndpoint(id: "backend", url: "https://b.example/h", secrets: secrets)
        let request = WebhookRequest(endpoint: endpoint, eventId: "evt_1", payload: #"{"id":"evt_1"}"#, nowSeconds: 1_790_000_000, timeoutMs: 10_000)
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(request.headers["Kakin-Event-Id"] == "evt_1")
        let header = try #require(request.headers["Kakin-Signature"])
        #expect(header.hasPrefix("t=1790000000,v1=") && header.components(separatedBy: ",v1=").count == 3)
        // A receiver that knows only the old secret (or only the new one) accepts it.
        for secret in secrets {
            #expect(throws: Never.self) {
                try TimestampedSignature.verify(header: header, body: request.body, secrets: [secret], nowSeconds: 1_790_000_010, toleranceSeconds: 300)
            }
        }
        #expect(throws: TimestampedSignature.Failure.noMatchingSignature) {
            try TimestampedSignature.verify(header: header, body: request.body, secrets: [Array("another_secret_0123456789".utf8)],
                                            nowSeconds: 1_790_000_010, toleranceSeconds: 300)
        }
    }
}

@Suite struct EventOutboxAppend {
    /// The outbox writes each event's JSON straight out, the status once for all of an append's events: the bytes are
    /// what the event serialized as one `JSONValue` object are (keys sorted at every level, `data.customer` among them).
    @Test func anAppendedEventsJSONIsTheEventSerializedAsOneObject() throws {
        let status: JSONValue = ["customerId": "u\"1", "status": "active", "wallet": ["paid": 1, "free": 2, "total": 3], "subscriptions": []]
        let drafts = [
            EventDraft(type: .coinsGranted, data: ["amount": 5, "reason": "a \u{1}ß\n", "zeta": ["b": 1, "a": [true, .null]]]),
            EventDraft(type: .customerCreated),
            EventDraft(type: .coinsCredited, data: ["coins": 1, "cust": "x", "customerX": 2, "Customer": 3, "d": 1.5],
                       environment: "Sandbox", bundleId: "com.example.app"),
        ]
        var versioned = status.objectValue ?? [:]
        versioned["version"] = 44
        var batch = WriteBatch()
        let rows = EventOutbox.append(to: &batch, customerId: "u\"1", lastSequence: 41, drafts: drafts,
                                      customerStatusJSON: JSONValue.object(versioned).serialized(), statusView: nil,
                                      nowMs: 1_790_000_000_123, ids: SequentialIDs())
        #expect(rows.map(\.sequence) == [42, 43, 44])
        for (row, draft) in zip(rows, drafts) {
            var data = draft.data
            data["customer"] = .object(versioned)
            let tree: JSONValue = [
                "id": .string(row.eventId), "type": .string(draft.type.rawValue), "customerId": "u\"1", "sequence": .int(row.sequence),
                "createdAt": "2026-09-21T14:13:20.123Z", "environment": .string(draft.environment), "bundleId": .string(draft.bundleId),
                "data": .object(data),
            ]
            #expect(row.payload == tree.jsonString)
            let event = try #require(Event(payload: row.payload))
            #expect(event.payload == row.payload)
        }
    }

    @Test(arguments: Backend.available) func anEventCarriesTheContractsFieldsAndTheStatusWithItsVersion(_ backend: Backend) async throws {
        try await withStores(backend) { stores async throws in
            let store = stores[0]
            let status: JSONValue = ["customerId": "u1", "status": "active", "wallet": ["paid": 100, "free": 10, "total": 110]]
            let ids = SequentialIDs()
            let events = try await store.database.write { db in
                try EventOutbox.append(db, customerId: "u1", drafts: [
                    EventDraft(type: .coinsCredited, data: ["transactionId": "2000000001", "coins": ["paid": 100, "free": 10]],
                               environment: "Sandbox", bundleId: "com.example.app"),
                    EventDraft(type: .entitlementGranted, data: ["productId": "noads"], environment: "Sandbox", bundleId: "com.example.app"),
                ], customerStatus: status, nowMs: 1_790_000_000_123, ids: ids)
            }
            #expect(events.map(\.sequence) == [1, 2])
            #expect(events.allSatisfy { $0.id.hasPrefix("evt_") })
            let json = try JSONParser.parse(events[0].payload)
            #expect(Set(json.objectValue?.keys.map { $0 } ?? []) == ["id", "type", "customerId", "sequence", "createdAt", "environment", "bundleId", "data"])
            #expect(json["type"] == "coins.credited")
            #expect(json["customerId"] == "u1")
            #expect(json["sequence"] == 1)
            #expect(json["createdAt"] == "2026-09-21T14:13:20.123Z")
            #expect(json["environment"] == "Sandbox" && json["bundleId"] == "com.example.app")
            #expect(json["data"]?["transactionId"] == "2000000001")
            // The status after the change, with the version it now has (the last sequence of this change).
            #expect(json["data"]?["customer"]?["version"] == 2)
            #expect(json["data"]?["customer"]?["wallet"]?["total"] == 110)
            #expect(Event(payload: events[1].payload) == events[1])
            #expect(try await store.eventVersion(customerId: "u1") == 2)

            // A spend has no app or environment: both are null, and still present.
            let spend = try await store.database.write { db in
                try EventOutbox.append(db, customerId: "u1", drafts: [EventDraft(type: .coinsSpent, data: ["amount": 30])],
                                       customerStatus: status, nowMs: 1_790_000_001_000, ids: ids)
            }
            let spent = try JSONParser.parse(spend[0].payload)
            #expect(spent["sequence"] == 3 && spent["environment"] == .null && spent["bundleId"] == .null)
            #expect(spent.objectValue?.keys.contains("bundleId") == true)
            // No drafts: nothing written, no number used.
            #expect(try await store.database.write { db in
                try EventOutbox.append(db, customerId: "u1", drafts: [], customerStatus: status, nowMs: 0, ids: ids)
            }.isEmpty)
            #expect(try await store.eventVersion(customerId: "u1") == 3)
        }
    }

    @Test(arguments: Backend.available) func theFeedAnswersTheStoredJSONAndACursor(_ backend: Backend) async throws {
        try await withStores(backend) { stores async throws in
            let store = stores[0]
            let ids = SequentialIDs()
            let events = try await store.database.write { db in
                try EventOutbox.append(db, customerId: "u1", drafts: [EventDraft(type: .coinsGranted, data: ["amount": 5])], customerStatus: ["customerId": "u1"],
                                       nowMs: 1_790_000_000_000, ids: ids)
            }
            // (On PostgreSQL the event enters the feed once every older transaction on the cluster ended: other tests' too.)
            let page = try await polled({ try await store.eventFeed(after: .start, limit: 10, types: EventTypeFilter(query: "coins.*").admittedNames) },
                                        until: { !$0.events.isEmpty })
            let body = try JSONParser.parse(EventFeed.pageJSON(page))
            #expect(body["events"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == events.map(\.id))
            #expect(body["nextCursor"]?.stringValue.flatMap(EventFeedCursor.init(token:)) == page.nextCursor)
            let customer = try JSONParser.parse(EventFeed.customerPageJSON(try await store.customerEvents(customerId: "u1", afterSequence: 0, limit: 10), afterSequence: 0))
            #expect(customer["events"]?.arrayValue?.count == 1 && customer["nextAfterSequence"] == 1)
        }
    }
}

@Suite struct EventRequestParsing {
    @Test func theFeedQueryTakesAnOpaqueCursorALimitOfOneTo500AndTypes() throws {
        let q = try EventFeedQuery(after: EventFeedCursor(txid: 5, position: 9).token, limit: "500", types: "coins.*,notification.dead")
        #expect(q.after == EventFeedCursor(txid: 5, position: 9) && q.limit == 500)
        #expect(q.types?.admitted.count == 5)
        let plain = try EventFeedQuery(after: nil, limit: nil, types: nil)
        #expect(plain.after == .start && plain.limit == 100 && plain.types == nil)
        for (after, limit, types, kind) in [("x", nil, nil, ErrorKind.invalidCursor), (nil, "0", nil, .invalidEventQuery), (nil, "501", nil, .invalidEventQuery),
                                            (nil, "ten", nil, .invalidEventQuery), (nil, nil, "coins.credit", .invalidEventQuery)] as [(String?, String?, String?, ErrorKind)] {
            #expect { try EventFeedQuery(after: after, limit: limit, types: types) } throws: { ($0 as? KakinError)?.kind == kind }
        }
        #expect(try CustomerEventsQuery(afterSequence: "12", limit: "3") == CustomerEventsQuery(afterSequence: "12", limit: "3"))
        #expect(try CustomerEventsQuery(afterSequence: nil, limit: nil).afterSequence == 0)
        #expect { try CustomerEventsQuery(afterSequence: "-1", limit: nil) } throws: { ($0 as? KakinError)?.kind == .invalidEventQuery }
    }

    @Test func aReplayNamesEventsOrATimeNotBoth() throws {
        #expect(try ReplayRequest(json: ["eventIds": ["evt_1", "evt_2"]]) == .eventIds(["evt_1", "evt_2"]))
        #expect(try ReplayRequest(json: ["since": "2026-11-30T15:00:00Z"]) == .since(ms: Timestamp.parseRFC3339("2026-11-30T15:00:00Z")!))
        let tooMany = JSONValue.array((0...1_000).map { .string("evt_\($0)") })
        for bad: JSONValue in [[:], ["eventIds": []], ["eventIds": [1]], ["eventIds": tooMany], ["since": "yesterday"],
                               ["since": "2026-11-30T15:00:00Z", "eventIds": ["evt_1"]], ["other": 1], "text"] {
            #expect { try ReplayRequest(json: bad) } throws: { ($0 as? KakinError)?.kind == .invalidReplayRequest }
        }
    }
}
