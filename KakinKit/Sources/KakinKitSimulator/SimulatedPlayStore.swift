import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinKit

/// Play Billing's role played against Kakin's Google Play simulator (`/play-simulator/v1/…` in local mode), for
/// `kakin app --store googlePlay` and tests. A Play purchase is a `StoreTransaction` whose `id` is the order and whose
/// `jwsRepresentation` is the purchase token; `PlayPurchaseBackend` hands it to Kakin with `submitPlayPurchase`, so the
/// coordinator's rules (send before done, retry at launch, no second purchase while one is unconfirmed) apply as they are:
/// - purchases go to `POST /play-simulator/v1/purchases` with the customer's `appAccountToken` as `obfuscatedAccountId`
///   (as an Android app passes it to `BillingFlowParams.setObfuscatedAccountId`); `PRODUCT:BASEPLAN` names a
///   subscription's base plan (`premium:yearly`), an offer ID its offer (`free-trial`);
/// - the device keeps each purchase until Kakin confirmed it (201 or 409), in `<stateDirectory>/device.json`, as Play
///   Billing's `queryPurchasesAsync` keeps returning a purchase nobody acknowledged;
/// - no updates to pull: Play tells Kakin itself (real-time developer notifications), and Kakin acknowledges.
public actor SimulatedPlayStore: Store {
    let http: SimulatorHTTP
    let file: DeviceStateFile
    var state: DeviceState

    /// - Parameters:
    ///   - simulator: Kakin's root in local mode (`http://127.0.0.1:8080`: `/play-simulator/v1/…` below it).
    ///   - account: the customer's `appAccountToken`, the purchases' `obfuscatedAccountId`; remembered by the device.
    public init(simulator: URL, stateDirectory: URL, account: UUID? = nil, session: URLSession? = nil) throws(KakinKitError) {
        http = SimulatorHTTP(root: simulator, session: session ?? URLSession(configuration: .ephemeral), name: "Google Play")
        file = DeviceStateFile(directory: stateDirectory)
        var loaded = try file.load()
        if let account { loaded.account = account.uuidString.lowercased() }
        state = loaded
    }

    /// The account whose purchases this device makes, if it knows one.
    public var account: UUID? { state.account.flatMap(UUID.init(uuidString:)) }

    public nonisolated func updates() -> AsyncStream<StoreTransaction> { AsyncStream { $0.finish() } }

    public func unfinished() async -> [StoreTransaction] { state.unfinished }

    /// Restore asks Kakin for the status; the device's own unconfirmed purchases are sent before it.
    public func currentEntitlements() async -> [StoreTransaction] { [] }

    public func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct] {
        struct Catalog: Decodable {
            struct Item: Decodable {
                var productId: String
                var type: String
            }
            var products: [Item]
        }
        let (status, data) = try await http.call("GET", "/play-simulator/v1/products")
        guard status == 200, let catalog = try? JSONDecoder().decode(Catalog.self, from: data) else {
            throw SimulatorHTTP.refusal(status, data, name: http.name)
        }
        return ids.compactMap { id in
            catalog.products.first { $0.productId == Self.productID(id) }.map { p in
                let type: ProductType = p.type == "subscription" ? .autoRenewable : p.type == "nonConsumable" ? .nonConsumable : .consumable
                return StoreProduct(id: id, type: type, displayName: p.productId, displayPrice: "")
            }
        }
    }

    public func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult {
        state.account = options.appAccountToken.uuidString.lowercased()
        guard state.unfinished.count < DeviceState.unfinishedMax else {
            throw KakinKitError(.storeFailed, message: "This device holds \(DeviceState.unfinishedMax) unconfirmed purchases; send them first.")
        }
        guard let product = try await products(for: [productID]).first else {
            throw KakinKitError(.storeFailed, message: "The Play simulator sells no \(productID).")
        }
        var body: [String: Any] = ["productId": Self.productID(productID), "obfuscatedAccountId": state.account ?? ""]
        if let plan = productID.split(separator: ":", maxSplits: 1).dropFirst().first { body["basePlanId"] = String(plan) }
        if options.quantity > 1 { body["quantity"] = options.quantity }
        switch options.offer {
        case .jws(let offerID, _), .legacy(let offerID, _, _, _, _): body["offerId"] = offerID
        case nil: break
        }
        struct Purchased: Decodable {
            var purchaseToken: String
            var orderId: String
        }
        let json: Data
        do {
            json = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        } catch {
            throw KakinKitError(.storeFailed)
        }
        let (status, data) = try await http.call("POST", "/play-simulator/v1/purchases", body: json)
        guard status == 201, let purchased = try? JSONDecoder().decode(Purchased.self, from: data) else {
            throw SimulatorHTTP.refusal(status, data, name: http.name)
        }
        // Paid: from here the purchase survives the app being killed, as Play Billing's does.
        let t = StoreTransaction(id: purchased.orderId, originalID: purchased.orderId, productID: productID, productType: product.type,
                                 jwsRepresentation: purchased.purchaseToken)
        state.enqueue(t)
        try file.save(state)
        return .purchased(t)
    }

    public func finish(_ transaction: StoreTransaction) async {
        state.unfinished.removeAll { $0.id == transaction.id }
        try? file.save(state)
    }

    public func sync() async throws(KakinKitError) {}

    public func appTransactionID() async -> String? { nil }

    /// `premium:yearly` → `premium`.
    static func productID(_ id: String) -> String { String(id.prefix { $0 != ":" }) }
}

/// Kakin as `PurchaseCoordinator` meets it for Google Play: a transaction is a Play purchase (`SimulatedPlayStore`),
/// handed over with `submitPlayPurchase`; Play checks its own offers (no signature to ask for); restore is Kakin's
/// status (Kakin reads nothing back from an account's Play history: the device sent what it holds first).
public struct PlayPurchaseBackend: Backend {
    public let inner: any Backend
    public let packageName: String

    public init(inner: any Backend, packageName: String) {
        self.inner = inner
        self.packageName = packageName
    }

    public func submit(_ transaction: StoreTransaction, customerID: String, processID: String) async throws(KakinKitError) -> SubmitResult {
        try await inner.submitPlayPurchase(PlayPurchase(packageName: packageName, productID: SimulatedPlayStore.productID(transaction.productID),
                                                        purchaseToken: transaction.jwsRepresentation), customerID: customerID)
    }

    public func submitPlayPurchase(_ purchase: PlayPurchase, customerID: String) async throws(KakinKitError) -> SubmitResult {
        try await inner.submitPlayPurchase(purchase, customerID: customerID)
    }

    public func customer(_ customerID: String) async throws(KakinKitError) -> CustomerStatus { try await inner.customer(customerID) }

    public func restore(_ customerID: String, transactionID: String?) async throws(KakinKitError) -> CustomerStatus {
        try await inner.customer(customerID)
    }

    public func wallet(_ customerID: String) async throws(KakinKitError) -> Wallet { try await inner.wallet(customerID) }

    public func offerSignature(_ customerID: String, productID: String, offerID: String,
                               format: OfferSignatureFormat) async throws(KakinKitError) -> SignedOffer {
        .jws(offerID: offerID, compactJWS: "")
    }

    public func introductoryOfferEligibility(_ customerID: String, productID: String, appTransactionID: String?) async throws(KakinKitError) -> String? {
        nil
    }

    public func offering(_ customerID: String, placement: String, appVersion: String?, country: String?) async throws(KakinKitError) -> PaywallOffering {
        try await inner.offering(customerID, placement: placement, appVersion: appVersion, country: country)
    }
}
