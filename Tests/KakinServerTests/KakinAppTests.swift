import AppStoreSimulator
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinService
@testable import KakinServer
import KakinKit
import KakinKitSimulator
import Testing

/// KakinKit against a real Kakin in local mode (SQLite, the App Store simulator mounted in-process, HTTP
/// on a loopback port): `kakin app` as separate processes on one device directory, and the coordinator with
/// the simulator adapter in-process for renewals, refunds and restore. One test at a time: each starts a
/// Kakin and several `kakin` processes, and the rest of the suite shares the machine.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct KakinAppTests {
    /// A device's state directory inside the Kakin's own directory: removed when the Kakin stops.
    static func deviceDirectory(_ sk: SimulatedKakin) -> String {
        sk.directory.appendingPathComponent("device-\(UUID().uuidString)").path
    }

    static func app(_ sk: SimulatedKakin, _ device: String, _ command: [String]) async throws -> KakinProcess.Result {
        try await KakinProcess.run(["app", "--server", "http://127.0.0.1:\(sk.runtime.port)", "--customer", "u1", "--state", device] + command)
    }

    /// The customer's balance once every notification Kakin was sent has been applied, and how many
    /// purchase entries its ledger holds.
    static func settledWallet(_ sk: SimulatedKakin, _ customer: String = "u1") async -> (paid: Int64?, free: Int64?, purchases: Int) {
        await sk.app.services.notifications.drain()
        let wallet = await sk.kakin("GET", "/v1/customers/\(customer)/wallet").json
        let ledger = await sk.kakin("GET", "/v1/customers/\(customer)/wallet/ledger").json
        let purchases = ledger["entries"]?.arrayValue?.filter { $0["kind"]?.stringValue == "purchase" }.count ?? -1
        return (wallet["paid"]?.int64Value, wallet["free"]?.int64Value, purchases)
    }

    // MARK: The issue's walkthrough, as a tester runs it

    @Test func aPurchaseWhoseNetworkDroppedIsFinishedAtTheNextLaunchAndCreditedOnce() async throws {
        try await SimulatedKakin.with { sk in
            let device = Self.deviceDirectory(sk)
            let buy = try await Self.app(sk, device, ["buy", "coins.500", "--fail-at", "send"])
            #expect(buy.status == 1, "\(buy)")
            #expect(buy.stdout.contains("KKN-8001"), "\(buy)")
            let waiting = try await Self.app(sk, device, ["unfinished"])
            #expect(waiting.stdout.hasSuffix(" coins.500\n"), "\(waiting)")
            let transactionId = String(waiting.stdout.split(separator: " ")[0])

            let launch = try await Self.app(sk, device, ["launch"])
            #expect(launch.status == 0, "\(launch)")
            #expect(launch.stdout.contains("retry \(transactionId) coins.500 (retry-launch-"), "\(launch)")
            #expect(launch.stdout.contains("still processing: none"), "\(launch)")
            #expect(try await Self.app(sk, device, ["unfinished"]).stdout == "none\n")

            let settled = await Self.settledWallet(sk)
            #expect(settled.paid == 500)
            #expect(settled.free == 50)
            #expect(settled.purchases == 1)
        }
    }

    @Test func aSecondPurchaseWhileTheFirstIsUnfinishedExits3UntilLaunchFinishesIt() async throws {
        try await SimulatedKakin.with { sk in
            let device = Self.deviceDirectory(sk)
            let killed = try await Self.app(sk, device, ["buy", "coins.500", "--fail-at", "finish"])
            #expect(killed.status == 1, "\(killed)")
            #expect(killed.stdout.contains("before finish"), "\(killed)")

            let again = try await Self.app(sk, device, ["buy", "coins.500"])
            #expect(again.status == 3, "\(again)")
            #expect(again.stdout.contains("KKN-8005"), "\(again)")
            // Refused before the App Store: still one charge, still one credit.
            let history = try await Self.accountTransactions(sk)
            #expect(history.count == 1)

            let launch = try await Self.app(sk, device, ["launch"])
            #expect(launch.status == 0, "\(launch)")
            #expect(launch.stdout.contains("already credited (409)"), "\(launch)")
            let unfinished = try await Self.app(sk, device, ["unfinished"])
            #expect(unfinished.stdout == "none\n", "\(unfinished)")
            let settled = await Self.settledWallet(sk)
            #expect(settled.paid == 500)
            #expect(settled.purchases == 1)
        }
    }

    @Test func anAppKilledAfterPaymentIsCreditedAtTheNextLaunchInJSON() async throws {
        try await SimulatedKakin.with { sk in
            let device = Self.deviceDirectory(sk)
            let killed = try await Self.app(sk, device, ["buy", "coins.100", "--fail-at", "payment", "--json"])
            #expect(killed.status == 1)
            let stopped = try JSONParser.parse(Array(killed.stdout.utf8))
            #expect(stopped["result"]?.stringValue == "stopped")
            #expect(stopped["at"]?.stringValue == "payment")

            let launch = try await Self.app(sk, device, ["launch", "--json"])
            #expect(launch.status == 0, "\(launch)")
            let report = try JSONParser.parse(Array(launch.stdout.utf8))
            let retries = report["retries"]?.arrayValue ?? []
            #expect(retries.count == 1)
            #expect(retries.first?["transactionId"] == stopped["transactionId"])
            #expect(["credited", "alreadyCredited"].contains(retries.first?["result"]?.stringValue ?? ""))
            #expect(report["status"]?["wallet"]?["paid"]?.int64Value == 100)
            #expect(report["unfinished"]?.arrayValue?.isEmpty == true)

            let wallet = try await Self.app(sk, device, ["wallet", "--json"])
            #expect(try JSONParser.parse(Array(wallet.stdout.utf8))["total"]?.int64Value == 100)
            let settled = await Self.settledWallet(sk)
            #expect(settled.purchases == 1)
        }
    }

    @Test func statusRestoreAndOffersFromTheCommandLine() async throws {
        try await SimulatedKakin.with { sk in
            let device = Self.deviceDirectory(sk)
            let fresh = try await Self.app(sk, device, ["status"])
            #expect(fresh.status == 0)
            #expect(fresh.stdout.hasPrefix("customer u1: new\n"), "\(fresh)")

            let subscribe = try await Self.app(sk, device, ["buy", "premium.monthly"])
            #expect(subscribe.status == 0, "\(subscribe)")
            let restore = try await Self.app(sk, device, ["restore"])
            #expect(restore.status == 0, "\(restore)")
            #expect(restore.stdout.contains("customer u1: active"), "\(restore)")
            #expect(restore.stdout.contains("subscription premium.monthly (premium): subscribed"), "\(restore)")

            // A promotional offer signed by Kakin (legacy signature) and checked by the simulator: pending for
            // the next renewal. (A Kakin without offers answers 404: KKN-8004, covered in KakinKit's tests.)
            let offer = try await Self.app(sk, device, ["buy", "premium.monthly", "--offer", "promo.1y.free"])
            #expect(offer.status == 0, "\(offer)")
            let status = try await Self.app(sk, device, ["status"])
            #expect(status.stdout.contains("promotional offer promo.1y.free pending for the next renewal"), "\(status)")
        }
    }

    /// Against a Kakin with `auth`: the customer's token from `--token` or `KAKIN_CUSTOMER_TOKEN` is sent as the
    /// bearer; without one, or with another customer's, Kakin refuses and the app says why with the ID.
    @Test func aKakinWithAuthIsReachedWithTheCustomersToken() async throws {
        let auth = Configuration.Auth(apiKeys: [], customerTokenSecret: Authentication.secret)
        try await SimulatedKakin.with(auth: auth) { sk in
            let device = Self.deviceDirectory(sk)
            let base = ["app", "--server", "http://127.0.0.1:\(sk.runtime.port)", "--customer", "u1", "--state", device]
            let anonymous = try await KakinProcess.run(base + ["status"])
            #expect(anonymous.status == 1, "\(anonymous)")
            #expect(anonymous.stdout.contains("KKN-1011"), "\(anonymous)")
            let someoneElse = try await KakinProcess.run(base + ["--token", Authentication.customerToken("u2"), "status"])
            #expect(someoneElse.status == 1, "\(someoneElse)")
            #expect(someoneElse.stdout.contains("KKN-1012"), "\(someoneElse)")

            let token = Authentication.customerToken("u1")
            let status = try await KakinProcess.run(base + ["--token", token, "status"])
            #expect(status.status == 0, "\(status)")
            #expect(status.stdout.hasPrefix("customer u1: new\n"), "\(status)")
            // From the environment (out of the process list), for every command of the session.
            let buy = try await KakinProcess.run(base + ["buy", "coins.100"], environment: ["KAKIN_CUSTOMER_TOKEN": token])
            #expect(buy.status == 0, "\(buy)")
            #expect(buy.stdout.hasPrefix("bought coins.100: transaction "), "\(buy)")
            let wallet = try await KakinProcess.run(base + ["wallet"], environment: ["KAKIN_CUSTOMER_TOKEN": token])
            #expect(wallet.stdout.contains("paid 100"), "\(wallet)")
            // --token wins over the environment.
            let flagWins = try await KakinProcess.run(base + ["--token", token, "status"], environment: ["KAKIN_CUSTOMER_TOKEN": "not-a-token"])
            #expect(flagWins.status == 0, "\(flagWins)")
            #expect(try await KakinProcess.run(base + ["--token", "has space", "status"]).status == 2)
        }
    }

    @Test func usageErrorsExit2() async throws {
        let missing = try await KakinProcess.run(["app", "--customer", "u1", "--state", "/tmp/x", "launch"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("--server"))
        let unknown = try await KakinProcess.run(["app", "--server", "http://127.0.0.1:1", "--customer", "u1", "--state", "/tmp/x", "fly"])
        #expect(unknown.status == 2)
        let badFail = try await KakinProcess.run(["app", "--server", "http://127.0.0.1:1", "--customer", "u1", "--state", "/tmp/x",
                                                  "buy", "coins.100", "--fail-at", "dessert"])
        #expect(badFail.status == 2)
        let help = try await KakinProcess.run(["--help"])
        #expect(help.stdout.contains("kakin app --server URL --customer ID --state DIR"))
    }

    @Test func kakinDownIsAnErrorWithAnID() async throws {
        let device = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-device-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: device) }
        let r = try await KakinProcess.run(["app", "--server", "http://127.0.0.1:1", "--customer", "u1", "--state", device, "status"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("KKN-8001"), "\(r)")
    }

    // MARK: The coordinator with the simulator adapter, in-process

    static func coordinator(_ sk: SimulatedKakin, device: String, customer: String = "u1") async throws -> PurchaseCoordinator {
        let base = URL(string: "http://127.0.0.1:\(sk.runtime.port)")!
        let token = UUID(uuidString: try await sk.token(customer))!
        let store = try SimulatedStore(simulator: base, stateDirectory: URL(fileURLWithPath: device), account: token, pollInterval: .seconds(3600))
        return PurchaseCoordinator(customerID: customer, store: store, backend: URLSessionBackend(baseURL: base),
                                   options: .init(retry: RetryPolicy(attemptsMax: 2, initialDelay: .milliseconds(10))))
    }

    static func accountTransactions(_ sk: SimulatedKakin, after: Int64 = 0, limit: Int = 100) async throws -> [JSONValue] {
        try await simulatorGET(sk, "/simulator/v1/accounts/\(try await sk.token("u1"))/transactions?after=\(after)&limit=\(limit)")["transactions"]?.arrayValue ?? []
    }

    static func simulatorGET(_ sk: SimulatedKakin, _ path: String) async throws -> JSONValue {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(sk.runtime.port)" + path)!)
        return try JSONParser.parse(Array(data))
    }

    @Test func renewalsAndRefundsReachTheDeviceAsUpdatesAndAreFinished() async throws {
        try await SimulatedKakin.with { sk in
            let device = Self.deviceDirectory(sk)
            let app = try await Self.coordinator(sk, device: device)
            _ = await app.launch()
            let coins = await app.purchase("coins.100")
            #expect(coins.completedTransaction != nil)
            #expect(await app.purchase("premium.monthly").completedTransaction != nil)

            // Five weeks: the free week ends and the first paid month renews (new transactions on the account).
            try await sk.advance(days: 35)
            let renewals = await app.enterForeground()
            #expect(!renewals.isEmpty)
            #expect(renewals.allSatisfy { $0.isFinished && $0.transaction.productID == "premium.monthly" })

            // A refund re-signs the coin transaction: the device receives it, Kakin already knows, it is finished.
            try await sk.sim("POST", "/simulator/v1/transactions/\(coins.completedTransaction!.id)/refund")
            let refund = await app.enterForeground()
            await app.stopListening()
            #expect(refund.map(\.transaction.id) == [coins.completedTransaction!.id])
            #expect(refund.first?.isFinished == true)
            #expect(await app.unfinishedTransactions().isEmpty)
            let settled = await Self.settledWallet(sk)
            #expect(settled.paid == 0)
            #expect(settled.purchases == 1)
        }
    }

    /// KakinKit buys a subscription with Kakin's signed introductory-offer eligibility, which the simulator
    /// follows like the App Store: a customer who subscribed before (with an offer code, so the App Store's own
    /// rule would still give the free week) gets none; a new customer, named by the device's app transaction,
    /// gets it.
    @Test func aSubscriptionIsBoughtWithKakinsIntroductoryEligibility() async throws {
        try await SimulatedKakin.with(catalog: OfferCodeAndWinBackFlows.catalog) { sk in
            // u1 and u3 first subscribed with an offer code (no introductory offer used; the app handed the redemption
            // to Kakin), then lapsed.
            for customer in ["u1", "u3"] {
                let redeemed = try await sk.buy(customer, "premium.monthly", offer: ["type": "offerCode", "id": "Free month"])
                #expect(await sk.kakin("POST", "/v1/customers/\(customer)/transactions", ["signedTransaction": redeemed["signedTransaction"]!]).status == 201)
                try await sk.action(try #require(redeemed["originalTransactionId"]?.stringValue), "disableAutoRenew")
            }
            try await sk.advance(days: 40)
            #expect(try await sk.status("u1")["eligibility"]?["introductoryOffer"]?["premium"] == false)

            // Without Kakin's word the App Store would give u3 the free week again.
            try await sk.buy("u3", "premium.monthly")
            #expect(try await sk.subscription("u3")["offer"]?["type"] == "introductory")

            let returning = try await Self.coordinator(sk, device: Self.deviceDirectory(sk), customer: "u1")
            #expect(await returning.purchase("premium.monthly").completedTransaction != nil)
            #expect(try await sk.subscription("u1")["state"] == "subscribed")
            #expect(try await sk.subscription("u1")["offer"] == .null, "Kakin said not eligible: no free week")

            let newcomer = try await Self.coordinator(sk, device: Self.deviceDirectory(sk), customer: "u2")
            #expect(await newcomer.purchase("premium.monthly").completedTransaction != nil)
            #expect(try await sk.subscription("u2")["offer"]?["type"] == "introductory")
            let appTransaction = try await Self.simulatorGET(sk, "/simulator/v1/accounts/\(try await sk.token("u2"))/app-transaction")
            #expect(appTransaction["appTransactionId"]?.stringValue?.isEmpty == false)
        }
    }

    @Test func aNewDeviceStartsAtThePresentAndRestoreAsksKakin() async throws {
        try await SimulatedKakin.with { sk in
            let phone = try await Self.coordinator(sk, device: Self.deviceDirectory(sk))
            #expect(await phone.purchase("noads").completedTransaction != nil)
            #expect(await phone.purchase("coins.500").completedTransaction != nil)

            // A second device on the same account is not handed the finished history as unfinished work.
            let tablet = try await Self.coordinator(sk, device: Self.deviceDirectory(sk))
            let launch = await tablet.launch()
            await tablet.stopListening()
            #expect(launch.retries.isEmpty)
            #expect(launch.stillUnfinished.isEmpty)
            let restored = try await tablet.restore()
            #expect(restored.status.kind == .active)
            #expect(restored.status.nonConsumables.map(\.productId) == ["noads"])
            #expect(restored.status.wallet.paid == 500)
        }
    }

    @Test func theAccountUpdatesEndpointPagesInSigningOrder() async throws {
        try await SimulatedKakin.with { sk in
            for product in ["coins.100", "coins.500", "noads"] { try await sk.buy("u1", product) }
            let all = try await Self.accountTransactions(sk)
            #expect(all.map { $0["productId"]?.stringValue ?? "" } == ["coins.100", "coins.500", "noads"])
            let seqs = all.compactMap { $0["seq"]?.int64Value }
            #expect(seqs == seqs.sorted())
            let page = try await Self.simulatorGET(sk, "/simulator/v1/accounts/\(try await sk.token("u1"))/transactions?after=\(seqs[0])&limit=1")
            #expect(page["transactions"]?.arrayValue?.first?["productId"]?.stringValue == "coins.500")
            #expect(page["hasMore"] == true)
            #expect(page["headSeq"]?.int64Value == seqs[2])
            let refused = try await Self.simulatorGET(sk, "/simulator/v1/accounts/not-a-uuid/transactions")
            #expect(refused["error"]?["id"]?.stringValue == "KKN-1002")
        }
    }

    // MARK: One catalogue of error IDs

    /// `kakin app --store googlePlay`: the same flows on an Android phone of the Play simulator. A hand-over whose network
    /// dropped waits on the device and is sent at the next launch; an app killed after Kakin answered refuses a second
    /// purchase of that product until the launch sends it again (409); a subscription with the free trial; restore.
    @Test func thePlayAppSendsAPurchaseAgainAtLaunchAndCreditsItOnce() async throws {
        try await SimulatedKakin.with { sk in
            let device = Self.deviceDirectory(sk)
            func play(_ command: [String]) async throws -> KakinProcess.Result { try await Self.app(sk, device, ["--store", "googlePlay"] + command) }
            let dropped = try await play(["buy", "coins_500", "--fail-at", "send"])
            #expect(dropped.status == 1 && dropped.stdout.contains("KKN-8001"), "\(dropped)")
            let waiting = try await play(["unfinished"])
            #expect(waiting.stdout.hasPrefix("GPA.") && waiting.stdout.hasSuffix(" coins_500\n"), "\(waiting)")
            // Play's notification reached Kakin meanwhile: the launch's send is answered 409 and the device is done with it.
            let launch = try await play(["launch"])
            #expect(launch.status == 0 && launch.stdout.contains("already credited (409)"), "\(launch)")
            #expect(try await play(["unfinished"]).stdout == "none\n")

            let killed = try await play(["buy", "coins_1200", "--fail-at", "acknowledge"])
            #expect(killed.status == 1 && killed.stdout.contains("before the app was done"), "\(killed)")
            #expect(try await play(["buy", "coins_1200"]).status == 3)
            #expect(try await play(["launch"]).stdout.contains("already credited (409)"))

            let trial = try await play(["buy", "premium:monthly", "--offer", "free-trial"])
            #expect(trial.status == 0, "\(trial)")
            let restore = try await play(["restore"])
            #expect(restore.status == 0 && restore.stdout.contains("customer u1: active"), "\(restore)")
            #expect(try await play(["buy", "coins_500", "--fail-at", "finish"]).status == 2)
            let settled = await Self.settledWallet(sk)
            #expect(settled.paid == 1700 && settled.free == 250 && settled.purchases == 2)
        }
    }

    /// KakinKit's store-neutral call for a Google Play purchase token, over HTTP to local mode: credited once (201 or,
    /// when the RTDN came first, 409) and named by its order; again 409; another customer presenting it is refused.
    @Test func kakinKitHandsAPlayPurchaseTokenToKakinAndItIsCreditedOnce() async throws {
        try await SimulatedKakin.with { sk in
            let backend = URLSessionBackend(baseURL: URL(string: "http://127.0.0.1:\(sk.runtime.port)")!)
            let (token, order) = try await GooglePlayPurchaseTests.buy(sk, "u1", "coins_500")
            let purchase = PlayPurchase(packageName: GooglePlayPurchaseTests.package, productID: "coins_500", purchaseToken: token)
            let first = try await backend.submitPlayPurchase(purchase, customerID: "u1")
            switch first {
            case .credited(let s), .alreadyProcessed(let s):
                #expect(s.transactionID == order)
                #expect(s.customer?.wallet == Wallet(paid: 500, free: 50, total: 550))
            case .revoked(let e):
                Issue.record("revoked: \(e)")
            }
            guard case .alreadyProcessed(let again) = try await backend.submitPlayPurchase(purchase, customerID: "u1") else {
                Issue.record("a second hand-over is not 409")
                return
            }
            #expect(again.httpStatus == 409 && again.transactionID == order)
            do throws(KakinKitError) {
                _ = try await backend.submitPlayPurchase(purchase, customerID: "u2")
                Issue.record("another customer's hand-over was accepted")
            } catch {
                #expect(error.code == "belongs_to_another_customer" && error.httpStatus == 403 && !error.isRetryable, "\(error)")
            }
            let settled = await Self.settledWallet(sk)
            #expect(settled.paid == 500 && settled.free == 50 && settled.purchases == 1)
        }
    }

    @Test func kakinKitsErrorIDsAreTheCataloguesAppErrors() {
        let app = ErrorKind.allCases.filter(\.isRaisedInApp)
        #expect(app.map(\.id) == ClientError.allCases.map(\.id))
        for client in ClientError.allCases {
            let kind = ErrorKind.allCases.first { $0.id == client.id }
            #expect(kind?.code == client.code, "\(client.id)")
            #expect(kind?.defaultMessage == client.message, "\(client.id)")
        }
    }
}

extension PurchaseOutcome {
    var completedTransaction: StoreTransaction? {
        if case .completed(let c) = self { return c.transaction }
        return nil
    }
}
