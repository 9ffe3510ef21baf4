import AppStoreClient
import AppStoreSecurity
@testable import AppStoreSimulator
import HTTPServer
import KakinCore
import KakinCrypto
import StoreAPITransport
import Synchronization
import Testing

/// The client over real HTTP (URLSessionTransport) against Kakin's App Store simulator on an ephemeral
/// loopback port, mounted under `/simulator` as in local mode. Purchases and clock moves go through the
/// simulator's control API in-process; everything the client returns is verified against the
/// simulator's root, as Kakin would verify Apple's.
@Suite struct SimulatorEndToEndTests {
    /// 2026-01-01T00:00:00Z.
    static let startMs: Int64 = 1_767_225_600_000
    static let dayMs: Int64 = 86_400_000

    /// Accepts or refuses every notification, switchable, like a Kakin that is up or down.
    final class SwitchableSink: NotificationSink {
        let down = Mutex(false)
        func deliver(signedPayload: String) async -> SendAttemptResult {
            down.withLock { $0 } ? .noResponse : .success
        }
    }

    final class Simulator: Sendable {
        let sim: AppStoreSimulator
        let server: HTTPServer
        let sink = SwitchableSink()
        let verifier: SignedDataVerifier
        var baseURL: String { "http://127.0.0.1:\(server.port)/simulator" }

        init() throws {
            sim = try AppStoreSimulator(
                configuration: SimulatorConfiguration(environment: .sandbox, seed: 11),
                clock: SimulatedClock(startMs: SimulatorEndToEndTests.startMs), sink: sink)
            var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
            configuration.threadCount = 2
            let sim = self.sim
            server = HTTPServer(
                configuration: configuration, handler: { await sim.handle($0) },
                rejectionResponder: { rejection, _ in HTTPResponse(status: rejection.suggestedStatus) })
            try server.start()
            let simulatorClock = sim.clock
            verifier = try SignedDataVerifier(
                trustedRoots: [sim.rootCertificateDER],
                apps: [AppIdentity(bundleId: sim.configuration.bundleId, appAppleId: sim.configuration.appAppleId,
                                   environments: [.sandbox])],
                clock: { simulatorClock.nowMs() })
        }

        func stop() async { await server.shutdown(gracePeriodSeconds: 0) }

        /// A client as Kakin configures one for the simulator: its key, its clock, its base URL.
        func client(
            key: P256PrivateKey? = nil, bundleId: String? = nil, clock: (any Clock)? = nil
        ) throws -> AppStoreServerAPIClient {
            let apiKey = sim.apiKey
            var configuration = AppStoreServerAPIConfiguration(
                issuerId: apiKey.issuerId, keyId: apiKey.keyId,
                privateKey: try key ?? P256PrivateKey(pemPKCS8: apiKey.privateKeyPEM),
                bundleId: bundleId ?? sim.configuration.bundleId, server: .baseURL(baseURL, environment: .sandbox))
            configuration.retriesMax = 1
            configuration.requestTimeoutMs = 10_000
            return try AppStoreServerAPIClient(configuration: configuration, clock: clock ?? sim.clock)
        }

        /// The control API, in-process.
        @discardableResult
        func control(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
            let response = await sim.handle(HTTPRequest(method: method, path: "/simulator/v1" + path, body: body?.serialized() ?? []))
            let json = try JSONParser.parse(response.body)
            try #require((200...299).contains(response.status), "\(method) \(path) answered \(response.status): \(json.jsonString)")
            return json
        }

        func buy(_ productId: String, account: String) async throws -> String {
            let reply = try await control("POST", "/purchases", ["productId": .string(productId), "appAccountToken": .string(account)])
            return try #require(reply["transactionId"]?.stringValue)
        }

        func transactions(_ signed: [String]) throws -> [TransactionPayload] {
            try signed.map { jws in try verifier.verifyTransaction(jws) }
        }
    }

    /// Runs `body` against a fresh simulator and always stops its server.
    static func withSimulator(_ body: (Simulator) async throws -> Void) async throws {
        let simulator = try Simulator()
        do {
            try await body(simulator)
        } catch {
            await simulator.stop()
            throw error
        }
        await simulator.stop()
    }

    static let account = "7e3fb20b-4cdb-47cc-936d-99d65f608138"

    @Test func longHistoryPagesThroughEverythingInBothOrdersAndWithAFilter() async throws {
        try await Self.withSimulator { s in
            var bought: [String] = []
            for index in 0..<115 {
                bought.append(try await s.buy(index % 5 == 0 ? "coins.500" : "coins.100", account: Self.account))
            }
            let client = try s.client()

            let ascending = try await client.allTransactionHistory(
                transactionId: bought[57], request: TransactionHistoryRequest(sort: .ascending))
            #expect(ascending.pageCount == 6)
            #expect(!ascending.hasMore)
            #expect(ascending.answeringEnvironment == .sandbox)
            #expect(ascending.bundleId == s.sim.configuration.bundleId)
            #expect(ascending.appAppleId == s.sim.configuration.appAppleId)
            let ascendingIds = try s.transactions(ascending.signedTransactions).map(\.transactionId)
            #expect(ascendingIds == bought)

            let descending = try await client.allTransactionHistory(
                transactionId: bought[0], request: TransactionHistoryRequest(sort: .descending))
            #expect(descending.pageCount == 6)
            #expect(try s.transactions(descending.signedTransactions).map(\.transactionId) == bought.reversed())

            let filtered = try await client.allTransactionHistory(
                transactionId: bought[1],
                request: TransactionHistoryRequest(productIds: ["coins.500"], productTypes: [.consumable], sort: .ascending))
            let bigPacks = stride(from: 0, to: 115, by: 5).map { bought[$0] }
            #expect(filtered.pageCount == 2)
            #expect(try s.transactions(filtered.signedTransactions).map(\.transactionId) == bigPacks)
            #expect(try s.transactions(filtered.signedTransactions).allSatisfy { $0.productId == "coins.500" })

            let none = try await client.allTransactionHistory(
                transactionId: bought[1], request: TransactionHistoryRequest(productTypes: [.autoRenewable]))
            #expect(none.signedTransactions.isEmpty)
            #expect(none.pageCount == 1)

            // Stopping early leaves a revision the next call continues from, in the same environment.
            let firstTwo = try await client.allTransactionHistory(transactionId: bought[0], pagesMax: 2)
            #expect(firstTwo.signedTransactions.count == 40)
            #expect(firstTwo.hasMore)
            let third = try await client.transactionHistory(
                transactionId: bought[0], revision: firstTwo.revision, environment: firstTwo.answeringEnvironment)
            #expect(try s.transactions(third.signedTransactions).map(\.transactionId) == Array(bought[40..<60]))
        }
    }

    @Test func transactionInfoReturnsTheSignedTransactionAndUnknownIdsAreNotFound() async throws {
        try await Self.withSimulator { s in
            let id = try await s.buy("noads", account: Self.account)
            let client = try s.client()
            let info = try await client.transactionInfo(transactionId: id)
            #expect(info.answeringEnvironment == .sandbox)
            let transaction = try s.verifier.verifyTransaction(info.signedTransactionInfo)
            #expect(transaction.transactionId == id)
            #expect(transaction.productId == "noads")

            let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
                try await client.transactionInfo(transactionId: "2999999999999999")
            })
            #expect(error.httpStatus == 404)
            #expect(error.errorCode == 4040010)
            #expect(error.attempts == 1)
        }
    }

    @Test func subscriptionStatusesFollowTheSimulatedLifecycle() async throws {
        try await Self.withSimulator { s in
            let reply = try await s.control(
                "POST", "/purchases", ["productId": "premium.monthly", "appAccountToken": .string(Self.account)])
            let original = try #require(reply["originalTransactionId"]?.stringValue)
            let client = try s.client()

            let active = try await client.allSubscriptionStatuses(transactionId: original)
            #expect(active.environment == .sandbox)
            #expect(active.appAppleId == s.sim.configuration.appAppleId)
            let item = try #require(active.data.first?.lastTransactions.first)
            #expect(active.data.count == 1)
            #expect(item.status == .active)
            #expect(item.originalTransactionId == original)
            #expect(try s.verifier.verifyTransaction(item.signedTransactionInfo).productId == "premium.monthly")
            #expect(try s.verifier.verifyRenewalInfo(item.signedRenewalInfo).autoRenewStatus == 1)

            // Cancel, then let the trial and the period lapse.
            try await s.control("POST", "/subscriptions/\(original)/actions", ["action": "disableAutoRenew"])
            await s.sim.advance(seconds: 45 * 86_400)
            let expired = try await client.allSubscriptionStatuses(transactionId: original)
            #expect(expired.data.first?.lastTransactions.map(\.status) == [.expired])
            let onlyExpired = try await client.allSubscriptionStatuses(transactionId: original, statuses: [.expired])
            #expect(onlyExpired.data.flatMap(\.lastTransactions).map(\.originalTransactionId) == [original])
            let onlyActive = try await client.allSubscriptionStatuses(transactionId: original, statuses: [.active, .billingGracePeriod])
            #expect(onlyActive.data.flatMap(\.lastTransactions).isEmpty)
        }
    }

    @Test func orderLookupFindsThePurchaseBehindAnOrderId() async throws {
        try await Self.withSimulator { s in
            let id = try await s.buy("season.pass", account: Self.account)
            // The simulator keeps order ids internal (Apple prints them on the emailed receipt).
            let orderId = try #require(s.sim.core.withLock { $0.engine.store.transactions[id]?.orderId })
            let client = try s.client()
            let found = try await client.lookUpOrderId(orderId)
            #expect(found.status == .valid)
            #expect(try s.transactions(found.signedTransactions).map(\.transactionId) == [id])

            let unknown = try await client.lookUpOrderId("ZZZZZZZZZZ")
            #expect(unknown.status == .invalid)
            #expect(unknown.signedTransactions.isEmpty)
        }
    }

    @Test func notificationHistoryPagesThroughEverythingAndFindsTheUndelivered() async throws {
        try await Self.withSimulator { s in
            var bought: [String] = []
            for index in 0..<45 {
                s.sink.down.withLock { $0 = index >= 40 }  // Kakin "down" for the last five
                bought.append(try await s.buy("coins.100", account: Self.account))
            }
            let client = try s.client()
            let now = s.sim.clock.nowMs()
            let window = NotificationHistoryRequest(startDateMs: Self.startMs - Self.dayMs, endDateMs: now + Self.dayMs)

            let all = try await client.allNotificationHistory(window)
            #expect(all.pageCount == 3)
            #expect(!all.hasMore)
            let notifications = try all.notificationHistory.map { try s.verifier.verifyNotification($0.signedPayload) }
            #expect(notifications.count == 45)
            #expect(Set(notifications.map(\.notificationUUID)).count == 45)
            #expect(notifications.allSatisfy { $0.notificationType == .oneTimeCharge })
            let notifiedIds = try notifications.map { notification in
                try s.verifier.verifyTransaction(try #require(notification.data?.signedTransactionInfo)).transactionId
            }
            #expect(Set(notifiedIds) == Set(bought))
            #expect(all.notificationHistory.allSatisfy { !$0.sendAttempts.isEmpty })

            let failures = try await client.allNotificationHistory(
                NotificationHistoryRequest(startDateMs: window.startDateMs, endDateMs: window.endDateMs, onlyFailures: true))
            #expect(failures.notificationHistory.count == 5)
            #expect(failures.notificationHistory.allSatisfy { $0.sendAttempts.map(\.sendAttemptResult) == [.noResponse] })
            let missedIds = try failures.notificationHistory.map { item in
                let notification = try s.verifier.verifyNotification(item.signedPayload)
                return try s.verifier.verifyTransaction(try #require(notification.data?.signedTransactionInfo)).transactionId
            }
            #expect(Set(missedIds) == Set(bought[40...]))

            let oneCustomerTransaction = try await client.allNotificationHistory(
                NotificationHistoryRequest(startDateMs: window.startDateMs, endDateMs: window.endDateMs, transactionId: bought[3]))
            #expect(oneCustomerTransaction.notificationHistory.count == 45)

            // The window is resent unchanged with each token: a page limit leaves a token that continues.
            let firstPage = try await client.allNotificationHistory(window, pagesMax: 1)
            #expect(firstPage.hasMore)
            #expect(firstPage.notificationHistory.count == 20)
            let secondPage = try await client.notificationHistory(window, paginationToken: firstPage.paginationToken)
            #expect(secondPage.notificationHistory.count == 20)
            #expect(Set(secondPage.notificationHistory.map(\.signedPayload)).isDisjoint(with: firstPage.notificationHistory.map(\.signedPayload)))
        }
    }

    @Test func testNotificationIsSentAndItsStatusRead() async throws {
        try await Self.withSimulator { s in
            let client = try s.client()
            let token = try await client.requestTestNotification()
            let status = try await client.testNotificationStatus(testNotificationToken: token)
            #expect(try s.verifier.verifyNotification(status.signedPayload).notificationType == .test)
            #expect(status.sendAttempts.map(\.sendAttemptResult) == [.success])
        }
    }

    @Test func wrongKeyWrongAppAndExpiredTokensAreUnauthorized() async throws {
        try await Self.withSimulator { s in
            let id = try await s.buy("coins.100", account: Self.account)
            let lagging = LaggingClock(behind: s.sim.clock, byMs: 2 * 3_600_000)
            let refused = [
                try s.client(key: P256PrivateKey()),  // same key id, another key: bad signature
                try s.client(bundleId: "com.example.other"),
                try s.client(clock: lagging),  // exp two hours ago for both the simulated and the real time
            ]
            for client in refused {
                let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
                    try await client.transactionInfo(transactionId: id)
                })
                #expect(error.kind == .unauthorized)
                #expect(error.httpStatus == 401)
                #expect(error.attempts == 1)
                #expect(!error.isRetryable)
            }
            _ = try await s.client().transactionInfo(transactionId: id)
        }
    }
}

/// A clock a fixed amount behind another (a backend whose clock is wrong).
struct LaggingClock: Clock {
    let behind: any Clock
    let byMs: Int64
    func nowMs() -> Int64 { behind.nowMs() - byMs }
}
