// Linux only. StoreKit 2's declarations that `KakinKitStoreKit` uses, with Apple's exact signatures, so the
// adapter type-checks (and is tested) in CI where StoreKit does not exist. Behind them sits a small
// in-memory App Store that tests script through `StandInAppStore`.
//
// Never on Apple platforms: everything is inside `#if os(Linux)` (the module is empty there), and the module
// is named `StoreKitStandIn`, not `StoreKit`, so it cannot shadow the real framework.
#if os(Linux)
import Foundation
import Synchronization

// MARK: - StoreKit's surface (signatures as in Apple's StoreKit)

public struct Product: Sendable, Identifiable {
    public let id: String
    public let type: Product.ProductType
    public let displayName: String
    public let displayPrice: String

    public struct ProductType: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let consumable = ProductType(rawValue: "Consumable")
        public static let nonConsumable = ProductType(rawValue: "Non-Consumable")
        public static let nonRenewable = ProductType(rawValue: "Non-Renewing Subscription")
        public static let autoRenewable = ProductType(rawValue: "Auto-Renewable Subscription")
    }

    public struct PurchaseOption: Hashable, Sendable {
        let kind: StandInAppStore.Option

        public static func appAccountToken(_ token: UUID) -> Product.PurchaseOption { .init(kind: .appAccountToken(token)) }
        public static func quantity(_ quantity: Int) -> Product.PurchaseOption { .init(kind: .quantity(quantity)) }
        public static func promotionalOffer(offerID: String, keyID: String, nonce: UUID, signature: Data, timestamp: Int) -> Product.PurchaseOption {
            .init(kind: .promotionalOffer(offerID: offerID, keyID: keyID, nonce: nonce, signature: signature, timestamp: timestamp))
        }
        public static func promotionalOffer(_ offerID: String, compactJWS: String) -> [Product.PurchaseOption] {
            [.init(kind: .promotionalOfferJWS(offerID: offerID, compactJWS: compactJWS))]
        }
        public static func introductoryOfferEligibility(compactJWS: String) -> Product.PurchaseOption {
            .init(kind: .introductoryOfferEligibility(compactJWS: compactJWS))
        }
    }

    public enum PurchaseResult: Sendable {
        case success(VerificationResult<Transaction>)
        case userCancelled
        case pending
    }

    public static func products<Identifiers>(for identifiers: Identifiers) async throws -> [Product]
    where Identifiers: Collection, Identifiers.Element == String {
        try StandInAppStore.products(Array(identifiers))
    }

    public func purchase(options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult {
        try StandInAppStore.purchase(self, options: options.map(\.kind))
    }
}

public struct Transaction: Sendable, Identifiable {
    public let id: UInt64
    public let originalID: UInt64
    public let productID: String
    public let productType: Product.ProductType
    public let expirationDate: Date?
    public let revocationDate: Date?
    public let appAccountToken: UUID?
    let jws: String

    public func finish() async {
        StandInAppStore.finish(id)
    }

    public static var updates: Transaction.Transactions { StandInAppStore.subscribe() }
    public static var unfinished: Transaction.Transactions { .init(StandInAppStore.unfinishedResults()) }
    public static var currentEntitlements: Transaction.Transactions { .init(StandInAppStore.entitlementResults()) }

    public struct Transactions: AsyncSequence, Sendable {
        public typealias Element = VerificationResult<Transaction>
        let stream: AsyncStream<Element>

        init(stream: AsyncStream<Element>) { self.stream = stream }

        init(_ finite: [Element]) {
            stream = AsyncStream { c in
                for e in finite { c.yield(e) }
                c.finish()
            }
        }

        public func makeAsyncIterator() -> AsyncStream<Element>.Iterator { stream.makeAsyncIterator() }
    }
}

public enum VerificationResult<SignedType: Sendable>: Sendable {
    case unverified(SignedType, VerificationResult<SignedType>.VerificationError)
    case verified(SignedType)

    public enum VerificationError: Error, Sendable {
        case revokedCertificate, invalidCertificateChain, invalidDeviceVerification, invalidEncoding, invalidSignature, missingRequiredProperties
    }

    public var unsafePayloadValue: SignedType {
        switch self {
        case .unverified(let v, _), .verified(let v): return v
        }
    }

    public var jwsRepresentation: String { (unsafePayloadValue as? Transaction)?.jws ?? "" }
}

public struct AppTransaction: Sendable {
    public let appTransactionID: String

    public static var shared: VerificationResult<AppTransaction> {
        get async throws { .verified(AppTransaction(appTransactionID: StandInAppStore.appTransactionID)) }
    }
}

public enum AppStore {
    public static func sync() async throws {
        try StandInAppStore.sync()
    }
}

public enum StoreKitError: Error, Sendable {
    case unknown, userCancelled, notAvailableInStorefront, notEntitled
}

// MARK: - The in-memory App Store behind it (Linux tests only)

/// Scripts the stand-in: which products exist, what the next purchase answers, which updates arrive; and
/// records what the adapter did (finishes, syncs, options). One App Store per process: tests that use it
/// call `reset()` first and must not run in parallel with each other (`.serialized`).
public enum StandInAppStore {
    public enum Option: Hashable, Sendable {
        case appAccountToken(UUID)
        case quantity(Int)
        case promotionalOffer(offerID: String, keyID: String, nonce: UUID, signature: Data, timestamp: Int)
        case promotionalOfferJWS(offerID: String, compactJWS: String)
        case introductoryOfferEligibility(compactJWS: String)
    }

    /// The device's app transaction (`AppTransaction.shared.appTransactionID`).
    public static let appTransactionID = "7000000000000001"

    /// What the next `purchase(options:)` does.
    public enum Next: Sendable {
        case succeed
        case pending
        case cancel
        case fail
    }

    struct State {
        var products: [String: Product] = [:]
        var next: Next = .succeed
        var nextId: UInt64 = 2_000_000_000_000_001
        var transactions: [Transaction] = []
        var unfinished: Set<UInt64> = []
        var finished: [UInt64] = []
        var syncs = 0
        var syncFails = false
        var lastOptions: [Option] = []
        var subscribers: [AsyncStream<VerificationResult<Transaction>>.Continuation] = []
    }

    static let state = Mutex(State())

    public static func reset(products: [(id: String, type: Product.ProductType)]) {
        state.withLock { s in
            for c in s.subscribers { c.finish() }
            s = State()
            for p in products { s.products[p.id] = Product(id: p.id, type: p.type, displayName: p.id, displayPrice: "¥100") }
        }
    }

    public static func setNext(_ next: Next) { state.withLock { $0.next = next } }
    public static func setSyncFails(_ fails: Bool) { state.withLock { $0.syncFails = fails } }
    public static var finishedIDs: [UInt64] { state.withLock { $0.finished } }
    public static var syncCount: Int { state.withLock { $0.syncs } }
    public static var lastOptions: [Option] { state.withLock { $0.lastOptions } }
    /// Every transaction the App Store charged for, finished or not.
    public static var charged: [Transaction] { state.withLock { $0.transactions } }

    /// A transaction made outside the app (another device, Ask to Buy approved, a renewal): unfinished, and
    /// delivered to every `Transaction.updates` listener.
    @discardableResult
    public static func deliverFromOutside(productID: String, appAccountToken: UUID?) -> Transaction {
        let (t, subscribers) = state.withLock { s -> (Transaction, [AsyncStream<VerificationResult<Transaction>>.Continuation]) in
            let t = make(&s, productID: productID, token: appAccountToken)
            return (t, s.subscribers)
        }
        for c in subscribers { c.yield(.verified(t)) }
        return t
    }

    static func make(_ s: inout State, productID: String, token: UUID?) -> Transaction {
        let id = s.nextId
        s.nextId += 1
        let type = s.products[productID]?.type ?? .consumable
        let t = Transaction(id: id, originalID: id, productID: productID, productType: type,
                            expirationDate: type == .autoRenewable ? Date().addingTimeInterval(30 * 86_400) : nil,
                            revocationDate: nil, appAccountToken: token, jws: "standin.\(id).\(productID)")
        s.transactions.append(t)
        s.unfinished.insert(id)
        return t
    }

    static func products(_ ids: [String]) throws -> [Product] {
        state.withLock { s in ids.compactMap { s.products[$0] } }
    }

    static func purchase(_ product: Product, options: [Option]) throws -> Product.PurchaseResult {
        try state.withLock { s throws -> Product.PurchaseResult in
            s.lastOptions = options
            switch s.next {
            case .pending: return .pending
            case .cancel: return .userCancelled
            case .fail: throw StoreKitError.notAvailableInStorefront
            case .succeed:
                var token: UUID?
                for case .appAccountToken(let t) in options { token = t }
                return .success(.verified(make(&s, productID: product.id, token: token)))
            }
        }
    }

    static func finish(_ id: UInt64) {
        state.withLock { s in
            if s.unfinished.remove(id) != nil { s.finished.append(id) }
        }
    }

    static func unfinishedResults() -> [VerificationResult<Transaction>] {
        state.withLock { s in s.transactions.filter { s.unfinished.contains($0.id) }.map { .verified($0) } }
    }

    static func entitlementResults() -> [VerificationResult<Transaction>] {
        state.withLock { s in s.transactions.filter { $0.productType != .consumable && $0.revocationDate == nil }.map { .verified($0) } }
    }

    /// StoreKit delivers every unfinished transaction once to a new listener, then what happens next.
    static func subscribe() -> Transaction.Transactions {
        let (stream, continuation) = AsyncStream.makeStream(of: VerificationResult<Transaction>.self)
        let pending = state.withLock { s -> [VerificationResult<Transaction>] in
            s.subscribers.append(continuation)
            return s.transactions.filter { s.unfinished.contains($0.id) }.map { .verified($0) }
        }
        for p in pending { continuation.yield(p) }
        return Transaction.Transactions(stream: stream)
    }

    static func sync() throws {
        let fails = state.withLock { s in
            s.syncs += 1
            return s.syncFails
        }
        if fails { throw StoreKitError.userCancelled }
    }
}
#endif
