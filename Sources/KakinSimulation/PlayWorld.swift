import Foundation
import GooglePlaySecurity
import GooglePlaySimulator
import HTTPServer
import KakinCore
import KakinKit
import KakinService
import Synchronization

/// Google Play beside the App Store: the Play simulator in-process on the world's clock, its RTDNs taken by the world
/// and delivered to Kakin with the notification faults (duplicated, reordered), Kakin's Developer API client on an
/// in-process transport with the Play faults (the API failing, acknowledgements that never get through), and Kakin's
/// Play workers (the RTDN inbox, the acknowledgements) stepped by the world like the App Store's inbox.

/// The RTDNs the Play simulator pushed, as Pub/Sub took them (answered 200): the world puts them on their way to Kakin.
final class PlayPushCollector: PlayPushSink {
    let taken = Mutex<[(body: [UInt8], authorization: String)]>([])

    func push(body: [UInt8], authorization: String) async -> Int {
        taken.withLock { $0.append((body, authorization)) }
        return 200
    }

    func take() -> [(body: [UInt8], authorization: String)] { taken.withLock { t in defer { t = [] }; return t } }
}

/// The Play faults on Kakin's side of the Developer API:
/// - `failNext`: the next calls fail with Google's 503 `backendError` (the `playapi` fault);
/// - `unacknowledgeable`: tokens whose acknowledge and consume calls always fail (the `ack` fault).
final class PlayAPIFaults: Sendable {
    struct State {
        var failNext = 0
        var unacknowledgeable: Set<String> = []
    }

    let state = Mutex(State())

    func failNext(_ calls: Int) { state.withLock { $0.failNext = calls } }
    func neverAcknowledge(_ token: String) { state.withLock { _ = $0.unacknowledgeable.insert(token) } }
    func disarm() { state.withLock { $0.failNext = 0 } }

    /// Google's 503 for a Developer API call the faults fail, else nil (the simulator answers).
    func refusal(_ path: String) -> HTTPResponse? {
        guard path.contains("/androidpublisher/") else { return nil }
        let fails = state.withLock { s -> Bool in
            if s.failNext > 0 {
                s.failNext -= 1
                return true
            }
            guard path.hasSuffix(":acknowledge") || path.hasSuffix(":consume"), let r = path.range(of: "/tokens/") else { return false }
            let token = path[r.upperBound...].prefix { $0 != ":" }
            return s.unacknowledgeable.contains(String(token))
        }
        guard fails else { return nil }
        let body = GoogleAPIErrorBody.json(code: 503, status: "UNAVAILABLE", reason: "backendError", message: "The service is unavailable (simulated).")
        return HTTPResponse(status: 503, headers: ["Content-Type": "application/json"], body: body.serialized())
    }
}

/// One RTDN on its way: the Pub/Sub body and its bearer token, due at `dueMs`.
struct PlayPush {
    var dueMs: Int64
    var order: Int
    var body: JSONValue
    var authorization: String
    /// `messageId type token…` for the trace (all seeded).
    var label: String
    var token: String?
}

/// What Google Play sold and voided, as the world saw it.
struct PlayWorldModel {
    struct Purchase {
        var customer: Int
        var productId: String
        var orderId: String
        var quantity: Int
        var purchasedAtMs: Int64
        var subscription: Bool
    }

    /// A subscription chain: its first order (the status's `originalTransactionId`) and its newest token.
    struct Chain {
        var id: String
        var token: String
    }

    /// A purchase on the phone Kakin has not confirmed yet (Play Billing keeps returning it unacknowledged).
    struct Unsent {
        var token: String
        var productId: String
        var sinceMs: Int64
    }

    var purchases: [String: Purchase] = [:]
    /// Each customer's tokens in purchase order.
    var tokensOf: [Int: [String]] = [:]
    var chains: [Int: [Chain]] = [:]
    var unsent: [Int: [Unsent]] = [:]
    var trialUsed: Set<Int> = []
    /// Units voided per order (Int.max: the whole order), from `voidedpurchases.list`; the records already counted.
    var voidedUnits: [String: Int] = [:]
    var voidedSeen: Set<String> = []
    var voidedReadMs: Int64?
    /// Tokens whose 3-day acknowledgement mark is still to be checked, oldest first.
    var acknowledgementChecks: [(dueMs: Int64, token: String)] = []

    func isVoidedWhole(_ orderId: String, quantity: Int) -> Bool { (voidedUnits[orderId] ?? 0) >= quantity }
}

extension World {
    static let playPushAudience = "https://kakin.simulated.invalid/v1/notifications/googleplay"
    static let playAcknowledgementWindowMs: Int64 = 3 * 86_400_000

    /// Kakin's configuration of the demo Play app: the simulator's service account (its `token_uri` the simulator's).
    static func playAppSettings(_ play: GooglePlaySimulator) throws -> GooglePlayAppSettings {
        let root = "http://play.simulated.invalid\(GooglePlaySimulator.mount)/"
        let account = try GoogleServiceAccount(fileBytes: play.serviceAccountFile(tokenURI: root + "token"))
        return GooglePlayAppSettings(packageName: play.configuration.packageName, catalog: PlaySimulatorConfiguration.demoKakinCatalog,
                                     serviceAccount: account, apiRoot: root,
                                     rtdn: .init(audience: playPushAudience, serviceAccountEmail: play.pushSettings.serviceAccountEmail))
    }

    var playPackage: String { play.configuration.packageName }

    // MARK: RTDNs

    /// Takes what Play pushed and puts it on its way, with the duplicate and reorder faults (Pub/Sub loses nothing and
    /// redelivers; a push token lives an hour, so no fault holds one longer than half of that).
    func collectPlayPushes() {
        // Pushes made together complete in any order: sorted by publication and message id, the run stays the same.
        let taken = playPushes.take().compactMap { p -> PlayPush? in
            guard let json = try? JSONParser.parse(p.body), let message = try? PubSubPushMessage(json: json),
                  let n = try? message.developerNotification() else { return nil }
            let label = "\(message.messageId) \(Self.kind(n.kind)) \(n.purchaseToken?.prefix(12) ?? "-")"
            return PlayPush(dueMs: message.publishTimeMs ?? 0, order: 0, body: json, authorization: p.authorization, label: label, token: n.purchaseToken)
        }.sorted { ($0.dueMs, $0.label) < ($1.dueMs, $1.label) }
        let now = clock.nowMs()
        for var p in taken {
            notificationsSeen += 1
            let f = options.faults
            p.dueMs = now
            if !settling, f.contains(.reorder), rng.chance(0.1) {
                p.dueMs = now + Int64(rng.below(600)) * 1000
                faultsInjected += 1
            }
            enqueuePlay(p)
            if !settling, f.contains(.duplicate), rng.chance(0.05) {
                faultsInjected += 1
                p.dueMs += Int64(rng.below(1800)) * 1000
                enqueuePlay(p)
            }
        }
    }

    static func kind(_ k: DeveloperNotification.Kind) -> String {
        switch k {
        case .subscription(let type, _): return "subscription.\(type)"
        case .oneTimeProduct(let type, _, _): return "oneTime.\(type)"
        case .voidedPurchase: return "voided"
        case .test: return "test"
        case .other: return "other"
        }
    }

    func enqueuePlay(_ p: PlayPush) {
        inFlightOrder += 1
        var p = p
        p.order = inFlightOrder
        playInFlight.append(p)
    }

    /// Delivers the RTDNs due now (all of them in the evening), each applied before the next arrives; one Kakin
    /// refused (a full disk, a restart) comes again a minute later, as Pub/Sub redelivers.
    func deliverPlayPushes(all: Bool = false) async throws {
        let now = clock.nowMs()
        let due = playInFlight.filter { all || $0.dueMs <= now }.sorted { ($0.dueMs, $0.order) < ($1.dueMs, $1.order) }
        guard !due.isEmpty else { return }
        playInFlight.removeAll { all || $0.dueMs <= now }
        for p in due {
            await crashMaybe()
            let full = diskFullMaybe()
            var refused = ""
            do {
                try await services.googlePlayNotifications.receive(authorization: p.authorization, body: p.body)
            } catch {
                guard error.kind != .pushTokenInvalid else { throw fail("play-push", "\(p.label) refused: \(error)") }
                refused = " refused \(error.kind.code)"
                var again = p
                again.dueMs = now + 60_000
                enqueuePlay(again)
            }
            database.full.store(false, ordering: .relaxed)
            _ = full
            await stepPlayWorkers()
            if let token = p.token { notePlayTouched(token) }
            trace("play-notification \(p.label)\(refused)")
        }
        try await checkTouched()
    }

    func notePlayTouched(_ token: String) {
        guard let c = playModel.purchases[token]?.customer else { return }
        model.state.withLock { _ = $0.touched.insert(c) }
    }

    /// One pass of Kakin's Play workers: the stored RTDNs, then the acknowledgements due.
    func stepPlayWorkers() async {
        await services.googlePlayNotifications.processDue(owner: "world")
        await services.googlePlay.acknowledgeDue(owner: "world", limit: 50)
    }

    // MARK: Reading Play's truth

    struct PlayAnswer {
        var status: Int
        var json: JSONValue?
    }

    /// A Developer API call of the world's own (Play's truth for the invariants), with its own access token.
    func playAPI(_ path: String, query: [(name: String, value: String)] = []) async -> PlayAnswer {
        let now = clock.nowMs()
        if playBearer.map({ now >= $0.renewAtMs }) ?? true {
            let token = await playControl("GET", "/v1/access-token", .null).json?["accessToken"]?.stringValue ?? ""
            playBearer = (token, now + 1_800_000)
        }
        var headers = HTTPHeaders()
        headers.add("Authorization", "Bearer " + (playBearer?.token ?? ""))
        let answer = await play.handle(HTTPRequest(method: "GET", path: "\(GooglePlaySimulator.mount)/androidpublisher/v3/applications/\(playPackage)/" + path,
                                                   queryItems: query, headers: headers, body: []))
        return PlayAnswer(status: answer.status, json: try? JSONParser.parse(answer.body))
    }

    /// A control call; what it left due at once (a cancelled subscription whose grace had run past its expiry) happens now,
    /// so its RTDN is pushed now with a fresh token, not signed now and taken when the clock next moves.
    func playControl(_ method: String, _ path: String, _ body: JSONValue) async -> ControlAnswer {
        let answer = await play.handle(HTTPRequest(method: method, path: GooglePlaySimulator.mount + path, body: body.serialized()))
        await play.advance(toMs: clock.nowMs())
        return ControlAnswer(status: answer.status, json: try? JSONParser.parse(answer.body))
    }

    /// Reads `voidedpurchases.list` since the last evening: the units voided per order.
    func readPlayVoided() async throws {
        let now = clock.nowMs()
        let start = max(now - 29 * Self.dayMs, (playModel.voidedReadMs ?? startMs) - 3_600_000)
        var page: String?
        repeat {
            var query = [(name: "startTime", value: String(start)), (name: "endTime", value: String(now)), (name: "type", value: "1"),
                         (name: "includeQuantityBasedPartialRefund", value: "true"), (name: "maxResults", value: "1000")]
            if let page { query.append((name: "token", value: page)) }
            let answer = await playAPI("purchases/voidedpurchases", query: query)
            guard answer.status == 200, let json = answer.json, let list = try? VoidedPurchasesPage(json: json) else {
                throw fail("play-voided", "voidedpurchases.list answered \(answer.status)")
            }
            for v in list.voidedPurchases {
                guard let orderId = v.orderId, playModel.voidedSeen.insert("\(orderId)|\(v.voidedTimeMs)|\(v.voidedQuantity ?? 0)").inserted else { continue }
                let quantity = playModel.purchases[v.purchaseToken]?.quantity ?? 1
                playModel.voidedUnits[orderId, default: 0] += v.voidedQuantity ?? quantity
            }
            page = list.nextPageToken
        } while page != nil
        playModel.voidedReadMs = now
    }
}

extension InProcessBackend {
    func submitPlayPurchase(_ purchase: PlayPurchase, customerID: String) async throws(KakinKitError) -> SubmitResult {
        let answer = try await call { (s) throws(KakinError) in
            try await s.googlePlay.present(customerId: customerID, packageName: purchase.packageName, productId: purchase.productID,
                                           purchaseToken: purchase.purchaseToken)
        }
        let customer = try answer.status.map { (e) throws(KakinKitError) in try Self.status(e.json) }
        let id = answer.transaction["orderId"]?.stringValue ?? purchase.purchaseToken
        switch answer.outcome {
        case .applied: return .credited(Submission(transactionID: id, httpStatus: 201, grant: nil, customer: customer))
        case .alreadyProcessed: return .alreadyProcessed(Submission(transactionID: id, httpStatus: 409, grant: nil, customer: customer))
        case .revoked, .notApplied: throw KakinKitError(.invalidServerResponse, message: "Play purchase answered without an applied outcome")
        }
    }
}
