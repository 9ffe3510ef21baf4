import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinKit
import KakinService
import Synchronization

/// One phone: StoreKit's role against the in-process simulator. It keeps the account's unfinished transactions (as
/// StoreKit does on the device) and can be "killed" at the world's request:
/// - `killAfterCharge`: the App Store charges, the transaction lands on the device, and the app dies before it
///   could send it to Kakin (the purchase call fails; the transaction stays unfinished);
/// - `killBeforeFinish`: Kakin answered, the app dies before `finish` (the transaction stays unfinished).
/// Both are one-shot. A new device (a restore on a new phone) starts with no unfinished transactions.
actor DeviceStore: Store {
    let simulator: AppStoreSimulator
    let catalog: Catalog
    /// What the App Store knows this account owns (the world's record), for `currentEntitlements`.
    let entitlements: @Sendable (String) -> [StoreTransaction]
    /// Told of every charge (the world's ledger of what the App Store charged).
    let charged: @Sendable (StoreTransaction, String, Int) -> Void
    var account: String?
    var queue: [StoreTransaction] = []
    /// When each unfinished transaction was charged (simulated ms), for the retry-window invariant.
    var since: [String: Int64] = [:]
    var killAfterCharge = false
    var killBeforeFinish = false
    /// The double tap: the next purchase waits at the "payment sheet" until the world lets it go.
    var holdNext = false
    var held = false
    var heldWaiter: CheckedContinuation<Void, Never>?
    var release: CheckedContinuation<Void, Never>?

    init(simulator: AppStoreSimulator, catalog: Catalog, entitlements: @escaping @Sendable (String) -> [StoreTransaction],
         charged: @escaping @Sendable (StoreTransaction, String, Int) -> Void) {
        self.simulator = simulator
        self.catalog = catalog
        self.entitlements = entitlements
        self.charged = charged
    }

    func arm(killAfterCharge: Bool = false, killBeforeFinish: Bool = false) {
        self.killAfterCharge = killAfterCharge
        self.killBeforeFinish = killBeforeFinish
    }

    func holdNextPurchase() { holdNext = true }

    /// Returns once the held purchase is at the payment sheet.
    func waitUntilHeld() async {
        if held { return }
        await withCheckedContinuation { heldWaiter = $0 }
    }

    func releaseHeld() {
        held = false
        release?.resume()
        release = nil
    }

    func disarm() {
        killAfterCharge = false
        killBeforeFinish = false
    }

    func oldestUnfinished() -> (id: String, sinceMs: Int64)? {
        queue.compactMap { t in since[t.id].map { (t.id, $0) } }.min { $0.sinceMs < $1.sinceMs }
    }

    var unfinishedCount: Int { queue.count }

    nonisolated func updates() -> AsyncStream<StoreTransaction> { AsyncStream { $0.finish() } }

    func unfinished() async -> [StoreTransaction] { queue }

    func currentEntitlements() async -> [StoreTransaction] { account.map(entitlements) ?? [] }

    func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct] {
        ids.compactMap { id in catalog[id].map { StoreProduct(id: id, type: Self.type($0.kind), displayName: $0.displayName ?? id, displayPrice: "") } }
    }

    func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult {
        let token = options.appAccountToken.uuidString.lowercased()
        account = token
        if holdNext {
            holdNext = false
            held = true
            heldWaiter?.resume()
            heldWaiter = nil
            await withCheckedContinuation { release = $0 }
        }
        var body: [String: JSONValue] = ["productId": .string(productID), "appAccountToken": .string(token)]
        if options.quantity > 1 { body["quantity"] = .int(Int64(options.quantity)) }
        switch options.offer {
        case .jws(let offerID, let jws): body["offer"] = ["type": "promotional", "id": .string(offerID), "jws": .string(jws)]
        case .legacy(let offerID, _, _, _, _): body["offer"] = ["type": "promotional", "id": .string(offerID)]
        case nil: break
        }
        if let e = options.introductoryOfferEligibility { body["introductoryOfferEligibility"] = .string(e) }
        let answer = await simulator.handle(HTTPRequest(method: "POST", path: "/simulator/v1/purchases", body: JSONValue.object(body).serialized()))
        guard answer.status == 201, let json = try? JSONParser.parse(answer.body), let tid = json["transactionId"]?.stringValue,
              let jws = json["signedTransaction"]?.stringValue, let product = catalog[productID] else {
            throw KakinKitError(.storeFailed, message: String(decoding: answer.body.prefix(300), as: UTF8.self))
        }
        let t = StoreTransaction(id: tid, originalID: json["originalTransactionId"]?.stringValue ?? tid, productID: productID,
                                 productType: Self.type(product.kind), jwsRepresentation: jws)
        queue.append(t)
        since[t.id] = simulator.clock.nowMs()
        charged(t, token, options.quantity)
        if killAfterCharge {
            killAfterCharge = false
            throw KakinKitError(.storeFailed, message: "the app was killed after the charge (simulated)")
        }
        return .purchased(t)
    }

    /// `Transaction.updates` on this phone: a transaction made elsewhere (a family member's purchase shared to this
    /// account) arrives unfinished; the app sends it to Kakin at its next launch or foreground.
    func receiveUpdate(_ t: StoreTransaction) {
        guard !queue.contains(where: { $0.id == t.id }) else { return }
        queue.append(t)
        since[t.id] = simulator.clock.nowMs()
    }

    func finish(_ transaction: StoreTransaction) async {
        if killBeforeFinish {
            killBeforeFinish = false
            return
        }
        queue.removeAll { $0.id == transaction.id }
        since[transaction.id] = nil
    }

    func sync() async throws(KakinKitError) {}

    func appTransactionID() async -> String? { nil }

    static func type(_ kind: ProductKind) -> ProductType {
        switch kind {
        case .consumable: return .consumable
        case .nonConsumable: return .nonConsumable
        case .nonRenewing: return .nonRenewable
        case .autoRenewable: return .autoRenewable
        }
    }
}

/// Which Kakin process answers now: the world swaps it when Kakin crashes and restarts.
final class KakinHandle: Sendable {
    let current: Mutex<KakinServices>
    init(_ services: KakinServices) { current = Mutex(services) }
    var services: KakinServices { current.withLock { $0 } }
    func replace(_ services: KakinServices) { current.withLock { $0 = services } }
}

/// The network between the app and Kakin, with faults the world arms for one call:
/// - `down`: the request never reaches Kakin;
/// - `answerLost`: Kakin applies it, the answer never reaches the app.
final class NetworkSwitch: Sendable {
    enum Fault: Sendable { case none, down, answerLost }
    let fault = Mutex<Fault>(.none)
    func arm(_ f: Fault) { fault.withLock { $0 = f } }
    func take() -> Fault { fault.withLock { f in defer { f = .none }; return f } }
}

/// KakinKit's `Backend` calling Kakin's use cases in-process: the same calls the HTTP adapters make (no sockets).
struct InProcessBackend: Backend {
    let kakin: KakinHandle
    let network: NetworkSwitch

    static func clientError(_ e: KakinError) -> KakinKitError {
        KakinKitError(id: e.kind.id, code: e.kind.code, message: e.message, httpStatus: e.httpStatus)
    }

    static let unreachable = KakinKitError(.networkUnavailable, message: "network down (simulated)")

    func call<T>(_ body: (KakinServices) async throws(KakinError) -> T) async throws(KakinKitError) -> T {
        let fault = network.take()
        if fault == .down { throw Self.unreachable }
        let value: T
        do {
            value = try await body(kakin.services)
        } catch {
            throw Self.clientError(error)
        }
        if fault == .answerLost { throw Self.unreachable }
        return value
    }

    static func status(_ json: JSONValue) throws(KakinKitError) -> KakinKit.CustomerStatus {
        do {
            return try JSONDecoder().decode(KakinKit.CustomerStatus.self, from: Data(json.serialized()))
        } catch {
            throw KakinKitError(.invalidServerResponse, message: "status not decodable: \(error)")
        }
    }

    func customer(_ customerID: String) async throws(KakinKitError) -> KakinKit.CustomerStatus {
        try Self.status(try await call { (s) throws(KakinError) in try await s.statusReads.status(customerID).json })
    }

    func submit(_ transaction: StoreTransaction, customerID: String, processID: String) async throws(KakinKitError) -> SubmitResult {
        let (outcome, json) = try await call { (s) throws(KakinError) -> (IngestOutcome, JSONValue?) in
            let verified = try s.ingest.verifyTransaction(transaction.jwsRepresentation)
            let result = try await s.ingest.apply(transaction: verified, path: .app, presenter: customerID, purchaseProcessId: processID, withStatus: true)
            let status: JSONValue? = result.status?.json
            return (result.outcome!, status)
        }
        let customer = try json.map { (j) throws(KakinKitError) in try Self.status(j) }
        switch outcome {
        case .applied:
            return .credited(Submission(transactionID: transaction.id, httpStatus: 201, grant: nil, customer: customer))
        case .alreadyProcessed:
            return .alreadyProcessed(Submission(transactionID: transaction.id, httpStatus: 409, grant: nil, customer: customer))
        case .revoked:
            return .revoked(Self.clientError(KakinError(.transactionRevoked)))
        case .notApplied(let reason):
            throw KakinKitError(.invalidServerResponse, message: "not applied: \(reason)")
        }
    }

    func restore(_ customerID: String, transactionID: String?) async throws(KakinKitError) -> KakinKit.CustomerStatus {
        try Self.status(try await call { (s) throws(KakinError) in
            try await s.appStoreSync.restore(customerId: customerID, transactionId: transactionID)
            return try await s.statusReads.status(customerID).json
        })
    }

    func wallet(_ customerID: String) async throws(KakinKitError) -> KakinKit.Wallet {
        let b = try await call { (s) throws(KakinError) in try await s.wallets.balance(customerID) }
        return KakinKit.Wallet(paid: b.paid, free: b.free, total: b.total)
    }

    func offerSignature(_ customerID: String, productID: String, offerID: String, format: OfferSignatureFormat) async throws(KakinKitError) -> SignedOffer {
        let answer = try await call { (s) throws(KakinError) in
            try await s.offers.sign(OfferSignatureRequest(customerId: customerID, productId: productID, offerId: offerID, format: .jws, appTransactionId: nil))
        }
        guard let jws = answer["jws"]?.stringValue else { throw KakinKitError(.invalidServerResponse) }
        return .jws(offerID: offerID, compactJWS: jws)
    }

    func introductoryOfferEligibility(_ customerID: String, productID: String, appTransactionID: String?) async throws(KakinKitError) -> String? {
        do {
            return try await call { (s) throws(KakinError) in
                try await s.offers.introductoryEligibility(customerId: customerID, productId: productID, appTransactionId: appTransactionID)
            }
        } catch {
            // No purchase yet to name the customer by, or nothing to sign with: the App Store's own eligibility applies.
            if error.isRetryable { throw error }
            return nil
        }
    }
}
