import Foundation
import KakinKit

/// A value behind a lock (the fakes are called from many tasks).
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func with<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Where a test "kills the app": the fake that reaches the point suspends forever (the process is gone,
/// it never does anything again) and tells the test. The next launch is a new coordinator on the same
/// device and the same Kakin.
enum KillPoint: Sendable, Equatable {
    /// The store charged and handed over the transaction; Kakin was not called.
    case afterPayment
    /// The request to Kakin never arrived.
    case sendBeforeKakin
    /// Kakin credited it; the answer never came back.
    case sendAfterKakin
    /// Kakin answered; `finish` never ran.
    case beforeFinish
}

final class Killswitch: Sendable {
    private let armed = Locked<KillPoint?>(nil)
    private let dead = Locked<[UnsafeContinuation<Void, Never>]>([])
    /// `.some(point)` when the app was killed there, `nil` when the step ran to its end without being killed.
    let kills: AsyncStream<KillPoint?>
    private let signal: AsyncStream<KillPoint?>.Continuation

    init() {
        (kills, signal) = AsyncStream.makeStream(of: KillPoint?.self)
    }

    func noteFinished() { signal.yield(nil) }

    func arm(_ point: KillPoint) { armed.with { $0 = point } }

    /// Suspends forever when `point` is armed (once).
    func check(_ point: KillPoint) async {
        let hit = armed.with { a -> Bool in
            guard a == point else { return false }
            a = nil
            return true
        }
        guard hit else { return }
        signal.yield(point)
        await withUnsafeContinuation { (c: UnsafeContinuation<Void, Never>) in dead.with { $0.append(c) } }
    }
}

/// Opens once: a fake waits at it so a test can act while a call is in flight.
final class Gate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>], reached: Int)>((false, [], 0))

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.with { s -> Bool in
                s.reached += 1
                if s.open { return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    var reached: Int { state.with { $0.reached } }

    func open() {
        let waiters = state.with { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Waits (yielding) until some call reached the gate.
    func untilReached() async {
        while reached == 0 { await Task.yield() }
    }
}

/// The App Store and the device in one: it charges, keeps unfinished transactions until finished (they
/// survive "kills" because the fake outlives the coordinator), and delivers updates.
final class InMemoryAppStore: Store, @unchecked Sendable {
    enum Next: Sendable { case succeed, pending, cancel, fail }

    struct State {
        var types: [String: ProductType]
        var next: Next = .succeed
        var nextID = 2_000_000_001
        var charges: [StoreTransaction] = []
        var queue: [StoreTransaction] = []
        var finished: [String] = []
        var syncs = 0
        var syncFails = false
        var options: [StorePurchaseOptions] = []
        var subscribers: [AsyncStream<StoreTransaction>.Continuation] = []
        var purchaseGate: Gate?
        var unfinishedGate: Gate?
    }

    let state: Locked<State>
    let kill: Killswitch

    init(kill: Killswitch, products: [String: ProductType] = InMemoryAppStore.demo) {
        state = Locked(State(types: products))
        self.kill = kill
    }

    static let demo: [String: ProductType] = [
        "coins.100": .consumable, "coins.500": .consumable, "noads": .nonConsumable, "premium.monthly": .autoRenewable,
    ]

    var charges: [StoreTransaction] { state.with { $0.charges } }
    var queue: [StoreTransaction] { state.with { $0.queue } }
    var finished: [String] { state.with { $0.finished } }
    var syncs: Int { state.with { $0.syncs } }
    var lastOptions: StorePurchaseOptions? { state.with { $0.options.last } }
    func setNext(_ n: Next) { state.with { $0.next = n } }
    func setSyncFails() { state.with { $0.syncFails = true } }
    func pauseNextPurchase(_ gate: Gate) { state.with { $0.purchaseGate = gate } }
    /// The next `unfinished()` waits at `gate` (the listener may act first, as on a slow device).
    func pauseNextUnfinished(_ gate: Gate) { state.with { $0.unfinishedGate = gate } }

    /// A transaction made elsewhere (renewal, Ask to Buy approval, another device): unfinished and delivered
    /// to every listener.
    @discardableResult
    func deliverFromOutside(_ productID: String) -> StoreTransaction {
        let (t, subs) = state.with { s -> (StoreTransaction, [AsyncStream<StoreTransaction>.Continuation]) in
            let t = Self.make(&s, productID)
            return (t, s.subscribers)
        }
        for c in subs { c.yield(t) }
        return t
    }

    /// Delivers an existing transaction to the listeners again (StoreKit may hand a purchase to both).
    func redeliver(_ t: StoreTransaction) {
        for c in state.with({ $0.subscribers }) { c.yield(t) }
    }

    static func make(_ s: inout State, _ productID: String) -> StoreTransaction {
        let id = String(s.nextID)
        s.nextID += 1
        let type = s.types[productID] ?? .consumable
        let t = StoreTransaction(id: id, originalID: id, productID: productID, productType: type,
                                 expirationDate: type == .autoRenewable ? Date().addingTimeInterval(30 * 86_400) : nil,
                                 jwsRepresentation: "jws.\(id).\(productID)")
        s.charges.append(t)
        s.queue.append(t)
        return t
    }

    func updates() -> AsyncStream<StoreTransaction> {
        let (stream, c) = AsyncStream.makeStream(of: StoreTransaction.self)
        let pending = state.with { s -> [StoreTransaction] in
            s.subscribers.append(c)
            return s.queue
        }
        for t in pending { c.yield(t) }
        return stream
    }

    func unfinished() async -> [StoreTransaction] {
        let gate = state.with { s -> Gate? in
            defer { s.unfinishedGate = nil }
            return s.unfinishedGate
        }
        await gate?.wait()
        return queue
    }

    func currentEntitlements() async -> [StoreTransaction] {
        state.with { s in s.charges.filter { $0.productType != .consumable && $0.revocationDate == nil } }
    }

    func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct] {
        state.with { s in ids.compactMap { id in s.types[id].map { StoreProduct(id: id, type: $0, displayName: id, displayPrice: "¥120") } } }
    }

    func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult {
        let gate = state.with { s -> Gate? in
            defer { s.purchaseGate = nil }
            return s.purchaseGate
        }
        await gate?.wait()
        let result = try state.with { s throws(KakinKitError) -> StorePurchaseResult in
            guard s.types[productID] != nil else { throw KakinKitError(.productUnavailable) }
            s.options.append(options)
            switch s.next {
            case .pending: return .pending
            case .cancel: return .cancelled
            case .fail: throw KakinKitError(.storeFailed)
            case .succeed: return .purchased(Self.make(&s, productID))
            }
        }
        await kill.check(.afterPayment)
        return result
    }

    func finish(_ transaction: StoreTransaction) async {
        await kill.check(.beforeFinish)
        state.with { s in
            s.queue.removeAll { $0.id == transaction.id }
            s.finished.append(transaction.id)
        }
    }

    func sync() async throws(KakinKitError) {
        let fails = state.with { s -> Bool in
            s.syncs += 1
            return s.syncFails
        }
        if fails { throw KakinKitError(.storeFailed, message: "The user dismissed the sign-in.") }
    }

    static let appTransactionID = "7000000000000042"

    func appTransactionID() async -> String? { Self.appTransactionID }
}

/// Kakin in memory: credits a transaction exactly once (201 then 409), counts what it was sent, and fails
/// the way a network or a server does when told to.
final class InMemoryKakin: Backend, @unchecked Sendable {
    enum Fault: Sendable {
        /// The request never arrives.
        case network
        /// Kakin answers 503.
        case unavailable
        /// Kakin answers this error.
        case refuse(KakinKitError)
    }

    struct State {
        var coins: [String: Int64] = ["coins.100": 100, "coins.500": 500]
        /// transactionId → how many times it was credited (must never exceed 1).
        var credits: [String: Int] = [:]
        var paid: Int64 = 0
        var submits: [(transactionID: String, processID: String)] = []
        var faults: [Fault] = []
        var revoked: Set<String> = []
        var offersSupported = false
        /// What the app asked introductory-offer eligibility for: (productID, appTransactionID).
        var eligibilityRequests: [(productID: String, appTransactionID: String?)] = []
        var restores: [String?] = []
        var statusFaults: [Fault] = []
        var gate: Gate?
        var offeringRequests: [(placement: String, appVersion: String?, country: String?)] = []
    }

    let state = Locked(State())
    let kill: Killswitch
    let token = UUID(uuidString: "7E3FB20B-4CDB-47CC-936D-99D65F608138")!

    init(kill: Killswitch) { self.kill = kill }

    var credits: [String: Int] { state.with { $0.credits } }
    var submits: [(transactionID: String, processID: String)] { state.with { $0.submits } }
    var restores: [String?] { state.with { $0.restores } }
    var eligibilityRequests: [(productID: String, appTransactionID: String?)] { state.with { $0.eligibilityRequests } }
    var paidCoins: Int64 { state.with { $0.paid } }
    var offeringRequests: [(placement: String, appVersion: String?, country: String?)] { state.with { $0.offeringRequests } }
    func fail(_ faults: Fault...) { state.with { $0.faults += faults } }
    func failStatus(_ faults: Fault...) { state.with { $0.statusFaults += faults } }
    func revoke(_ id: String) { state.with { _ = $0.revoked.insert(id) } }
    func supportOffers() { state.with { $0.offersSupported = true } }
    func pauseNextSubmit(_ gate: Gate) { state.with { $0.gate = gate } }

    /// Kakin credits a transaction on its own (a notification arrived first).
    func creditFromNotification(_ t: StoreTransaction) { _ = state.with { s in Self.credit(&s, t) } }

    static func credit(_ s: inout State, _ t: StoreTransaction) -> Bool {
        if s.credits[t.id] != nil { return false }
        s.credits[t.id] = 1
        s.paid += s.coins[t.productID] ?? 0
        return true
    }

    static func error(_ f: Fault) -> KakinKitError {
        switch f {
        case .network: return KakinKitError(.networkUnavailable)
        case .unavailable: return KakinKitError(id: "KKN-1009", code: "service_unavailable", message: "retry shortly", requestId: "req_1", httpStatus: 503)
        case .refuse(let e): return e
        }
    }

    func status() -> CustomerStatus {
        let paid = paidCoins
        return CustomerStatus(customerId: "u1", appAccountToken: token.uuidString.lowercased(), status: "new", subscriptions: [],
                              nonConsumables: [], nonRenewing: [], wallet: Wallet(paid: paid, free: 0, total: paid),
                              eligibility: .init(introductoryOffer: ["premium": true]))
    }

    func customer(_ customerID: String) async throws(KakinKitError) -> CustomerStatus {
        if let f = state.with({ s in s.statusFaults.isEmpty ? nil : s.statusFaults.removeFirst() }) { throw Self.error(f) }
        return status()
    }

    func submit(_ transaction: StoreTransaction, customerID: String, processID: String) async throws(KakinKitError) -> SubmitResult {
        let gate = state.with { s -> Gate? in
            defer { s.gate = nil }
            return s.gate
        }
        await gate?.wait()
        await kill.check(.sendBeforeKakin)
        let fault = state.with { s -> Fault? in
            s.submits.append((transaction.id, processID))
            return s.faults.isEmpty ? nil : s.faults.removeFirst()
        }
        if let fault { throw Self.error(fault) }
        if state.with({ $0.revoked.contains(transaction.id) }) {
            return .revoked(KakinKitError(id: "KKN-3003", code: "transaction_revoked", message: "refunded", httpStatus: 422))
        }
        let fresh = state.with { s in Self.credit(&s, transaction) }
        await kill.check(.sendAfterKakin)
        let coins = state.with { $0.coins[transaction.productID] }
        let submission = Submission(transactionID: transaction.id, httpStatus: fresh ? 201 : 409,
                                    grant: coins.map { Grant(coins: .init(paid: $0, free: 0)) }, customer: status())
        return fresh ? .credited(submission) : .alreadyProcessed(submission)
    }

    /// A Play purchase is credited once by its token, like a transaction by its ID.
    func submitPlayPurchase(_ purchase: PlayPurchase, customerID: String) async throws(KakinKitError) -> SubmitResult {
        let t = StoreTransaction(id: purchase.purchaseToken, originalID: purchase.purchaseToken, productID: purchase.productID,
                                 productType: .consumable, jwsRepresentation: "")
        return try await submit(t, customerID: customerID, processID: "play")
    }

    func restore(_ customerID: String, transactionID: String?) async throws(KakinKitError) -> CustomerStatus {
        state.with { $0.restores.append(transactionID) }
        return status()
    }

    func wallet(_ customerID: String) async throws(KakinKitError) -> Wallet { status().wallet }

    func offerSignature(_ customerID: String, productID: String, offerID: String,
                        format: OfferSignatureFormat) async throws(KakinKitError) -> SignedOffer {
        guard state.with({ $0.offersSupported }) else { throw KakinKitError(.offersNotSupported) }
        switch format {
        case .legacy:
            return .legacy(offerID: offerID, keyID: "KEY1", nonce: UUID(), signature: Data([0x30, 0x44]).base64EncodedString(), timestamp: 1_800_000_000_000)
        case .jws:
            return .jws(offerID: offerID, compactJWS: "h.p.s")
        }
    }

    /// Without offers support this Kakin has no eligibility to give (an older Kakin: no route).
    func introductoryOfferEligibility(_ customerID: String, productID: String, appTransactionID: String?) async throws(KakinKitError) -> String? {
        let supported = state.with { s -> Bool in
            s.eligibilityRequests.append((productID, appTransactionID))
            return s.offersSupported
        }
        return supported ? "eligibility.\(productID).jws" : nil
    }

    /// One offering for every placement: a monthly and an annual package, in variant b of `paywall-test`.
    func offering(_ customerID: String, placement: String, appVersion: String?, country: String?) async throws(KakinKitError) -> PaywallOffering {
        let json = #"""
            {"placement": "\#(placement)", "experiment": {"id": "paywall-test", "variant": "b"},
             "offering": {"id": "annual-first", "metadata": {"highlight": "annual", "discount": 40}, "packages": [
               {"id": "annual", "productId": "premium.yearly"}, {"id": "monthly", "productId": "premium.monthly"}]}}
            """#
        state.with { $0.offeringRequests.append((placement, appVersion, country)) }
        do {
            return try JSONDecoder().decode(PaywallOffering.self, from: Data(json.utf8))
        } catch {
            throw KakinKitError(.invalidServerResponse)
        }
    }
}
