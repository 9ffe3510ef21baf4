// StoreKit 2 as KakinKit's `Store`. Deliberately thin: it only translates, every decision is in
// `PurchaseCoordinator`, which the Linux tests cover. On Apple platforms it compiles against StoreKit; on
// Linux against `StoreKitStandIn` (StoreKit's signatures over a scriptable fake), so CI type-checks and
// tests this exact file.
#if canImport(StoreKit)
import StoreKit
#elseif canImport(StoreKitStandIn)
import StoreKitStandIn
#endif

#if canImport(StoreKit) || canImport(StoreKitStandIn)
import Foundation
import KakinKit

/// The App Store through StoreKit 2. Transactions are handed to Kakin whether or not StoreKit's own device
/// check verified them: Kakin verifies the signed copy by Apple's rules and is the one that grants.
public struct StoreKitStore: Store {
    public init() {}

    public func updates() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                for await result in Transaction.updates {
                    continuation.yield(Self.transaction(result))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    public func unfinished() async -> [StoreTransaction] {
        var out: [StoreTransaction] = []
        for await result in Transaction.unfinished { out.append(Self.transaction(result)) }
        return out
    }

    public func currentEntitlements() async -> [StoreTransaction] {
        var out: [StoreTransaction] = []
        for await result in Transaction.currentEntitlements { out.append(Self.transaction(result)) }
        return out
    }

    public func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct] {
        do {
            return try await Product.products(for: ids).map {
                StoreProduct(id: $0.id, type: Self.productType($0.type), displayName: $0.displayName, displayPrice: $0.displayPrice)
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    public func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult {
        let found: Product?
        do {
            found = try await Product.products(for: [productID]).first
        } catch {
            throw Self.storeError(error)
        }
        guard let product = found else { throw KakinKitError(.productUnavailable) }
        var set: Set<Product.PurchaseOption> = [.appAccountToken(options.appAccountToken)]
        if options.quantity > 1 { set.insert(.quantity(options.quantity)) }
        switch options.offer {
        case .legacy(let offerID, let keyID, let nonce, let signature, let timestamp):
            guard let der = Data(base64Encoded: signature) else {
                throw KakinKitError(.invalidServerResponse, message: "Kakin's offer signature is not base64.")
            }
            set.insert(.promotionalOffer(offerID: offerID, keyID: keyID, nonce: nonce, signature: der, timestamp: Int(timestamp)))
        case .jws(let offerID, let compactJWS):
            #if compiler(>=6.2)
            set.formUnion(Product.PurchaseOption.promotionalOffer(offerID, compactJWS: compactJWS))
            #else
            _ = (offerID, compactJWS)
            throw KakinKitError(.storeFailed, message: "This StoreKit SDK has no JWS promotional offers; use OfferSignatureFormat.legacy.")
            #endif
        case nil:
            break
        }
        if let eligibility = options.introductoryOfferEligibility {
            #if compiler(>=6.1)
            if #available(iOS 18.4, macOS 15.4, *) { set.insert(.introductoryOfferEligibility(compactJWS: eligibility)) }
            #else
            _ = eligibility   // an SDK without it: the App Store's own eligibility applies
            #endif
        }
        let result: Product.PurchaseResult
        do {
            result = try await product.purchase(options: set)
        } catch {
            throw Self.storeError(error)
        }
        // `if case` rather than `switch`: PurchaseResult is a non-frozen enum in StoreKit.
        if case .success(let verification) = result { return .purchased(Self.transaction(verification)) }
        if case .pending = result { return .pending }
        if case .userCancelled = result { return .cancelled }
        throw KakinKitError(.storeFailed, message: "StoreKit answered the purchase with a result this KakinKit does not know.")
    }

    /// StoreKit finishes a `Transaction` value: the one with this id among the unfinished ones.
    public func finish(_ transaction: StoreTransaction) async {
        for await result in Transaction.unfinished where String(result.unsafePayloadValue.id) == transaction.id {
            await result.unsafePayloadValue.finish()
            return
        }
    }

    public func appTransactionID() async -> String? {
        #if compiler(>=6.1)
        if #available(iOS 18.4, macOS 15.4, *), let shared = try? await AppTransaction.shared {
            return shared.unsafePayloadValue.appTransactionID
        }
        #endif
        return nil
    }

    public func sync() async throws(KakinKitError) {
        do {
            try await AppStore.sync()
        } catch {
            throw Self.storeError(error)
        }
    }

    // MARK: Translation

    static func transaction(_ result: VerificationResult<Transaction>) -> StoreTransaction {
        let t = result.unsafePayloadValue
        return StoreTransaction(id: String(t.id), originalID: String(t.originalID), productID: t.productID, productType: productType(t.productType),
                                expirationDate: t.expirationDate, revocationDate: t.revocationDate,
                                jwsRepresentation: result.jwsRepresentation)
    }

    static func productType(_ t: Product.ProductType) -> ProductType {
        if t == .nonConsumable { return .nonConsumable }
        if t == .nonRenewable { return .nonRenewable }
        if t == .autoRenewable { return .autoRenewable }
        return .consumable
    }

    /// StoreKit's errors carry no secrets, but their descriptions are not stable: the ID says "store", the
    /// message names the error's type for support.
    static func storeError(_ error: any Error) -> KakinKitError {
        KakinKitError(.storeFailed, message: ClientError.storeFailed.message + " (\(String(describing: type(of: error))))")
    }
}
#endif
