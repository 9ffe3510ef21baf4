#if os(Linux)
import Foundation
import KakinKit
import KakinKitStoreKit
import StoreKitStandIn
import Testing

/// The StoreKit 2 adapter, compiled against the Linux stand-in (StoreKit's signatures over a scriptable
/// App Store), driven by the real coordinator. One stand-in per process: these run one at a time.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct StoreKitAdapterTests {
    static func fresh() -> (PurchaseCoordinator, InMemoryKakin) {
        StandInAppStore.reset(products: [("coins.100", .consumable), ("noads", .nonConsumable), ("premium.monthly", .autoRenewable)])
        let kakin = InMemoryKakin(kill: Killswitch())
        return (PurchaseCoordinator(customerID: "u1", store: StoreKitStore(), backend: kakin,
                                    options: .init(sleep: { _ in })), kakin)
    }

    @Test func aPurchasePassesTheTokenSendsTheJWSAndFinishesAfterKakin() async {
        let (app, kakin) = Self.fresh()
        let outcome = await app.purchase("coins.100")
        let completed = outcome.completed
        #expect(completed?.submission.httpStatus == 201)
        #expect(completed?.transaction.productType == .consumable)
        #expect(completed?.transaction.jwsRepresentation.hasPrefix("standin.") == true)
        #expect(StandInAppStore.lastOptions == [.appAccountToken(kakin.token)])
        #expect(StandInAppStore.finishedIDs.map(String.init) == [completed?.transaction.id ?? ""])
        #expect(await StoreKitStore().unfinished().isEmpty)
    }

    @Test func pendingCancelledAndFailuresMapToOutcomes() async {
        let (app, _) = Self.fresh()
        StandInAppStore.setNext(.pending)
        #expect(await app.purchase("premium.monthly") == .pending)
        StandInAppStore.setNext(.cancel)
        #expect(await app.purchase("premium.monthly") == .cancelled)
        StandInAppStore.setNext(.fail)
        guard case .failed(let e) = await app.purchase("premium.monthly") else {
            Issue.record("expected .failed")
            return
        }
        #expect(e.id == "KKN-8003")
        #expect(await app.purchase("not.in.store") == .failed(KakinKitError(.productUnavailable)))
        #expect(StandInAppStore.charged.isEmpty)
    }

    @Test func offerSignaturesBecomeStoreKitPurchaseOptions() async {
        let (legacyApp, kakin) = Self.fresh()
        kakin.supportOffers()
        #expect(await legacyApp.purchase("premium.monthly", offerID: "promo.1y.free").completed != nil)
        let legacy = StandInAppStore.lastOptions.first { if case .promotionalOffer = $0 { return true } else { return false } }
        guard case .promotionalOffer(let offerID, let keyID, _, let signature, let timestamp)? = legacy else {
            Issue.record("no legacy offer option: \(StandInAppStore.lastOptions)")
            return
        }
        #expect(offerID == "promo.1y.free")
        #expect(keyID == "KEY1")
        #expect(signature == Data([0x30, 0x44]))
        #expect(timestamp == 1_800_000_000_000)

        let (_, kakin2) = Self.fresh()
        kakin2.supportOffers()
        let jwsApp = PurchaseCoordinator(customerID: "u1", store: StoreKitStore(), backend: kakin2, options: .init(offerFormat: .jws))
        #expect(await jwsApp.purchase("premium.monthly", offerID: "promo.1y.free").completed != nil)
        #expect(StandInAppStore.lastOptions.contains(.promotionalOfferJWS(offerID: "promo.1y.free", compactJWS: "h.p.s")))
    }

    @Test func kakinsEligibilityBecomesStoreKitsIntroductoryOfferEligibilityOption() async {
        let (app, kakin) = Self.fresh()
        kakin.supportOffers()
        #expect(await app.purchase("premium.monthly").completed != nil)
        #expect(Set(StandInAppStore.lastOptions) == [.appAccountToken(kakin.token),
                                                     .introductoryOfferEligibility(compactJWS: "eligibility.premium.monthly.jws")])
        // The device's AppTransaction names the customer for Kakin.
        #expect(kakin.eligibilityRequests.first?.appTransactionID == StandInAppStore.appTransactionID)
    }

    @Test func unfinishedTransactionsAreRetriedAtLaunchAndUpdatesAreCredited() async {
        let (_, kakin) = Self.fresh()
        let earlier = StandInAppStore.deliverFromOutside(productID: "coins.100", appAccountToken: kakin.token)
        let app = PurchaseCoordinator(customerID: "u1", store: StoreKitStore(), backend: kakin, options: .init(sleep: { _ in }))
        let report = await app.launch()
        #expect(report.retries.map(\.transaction.id) == [String(earlier.id)])
        #expect(report.retries.first?.result.name == "credited")
        // A renewal while the app runs arrives through Transaction.updates.
        let renewal = StandInAppStore.deliverFromOutside(productID: "premium.monthly", appAccountToken: kakin.token)
        for await event in app.events {
            if case .retryFinished(let o) = event, o.transaction.id == String(renewal.id) {
                #expect(o.trigger == .update)
                break
            }
        }
        await app.stopListening()
        #expect(Set(StandInAppStore.finishedIDs) == [earlier.id, renewal.id])
        #expect(kakin.credits.count == 2)
    }

    @Test func restoreCallsAppStoreSyncAndSendsAnEntitlement() async throws {
        let (app, kakin) = Self.fresh()
        #expect(await app.purchase("noads").completed != nil)
        let report = try await app.restore()
        #expect(StandInAppStore.syncCount == 1)
        #expect(report.syncError == nil)
        #expect(kakin.restores == [String(StandInAppStore.charged[0].id)])
        StandInAppStore.setSyncFails(true)
        #expect(try await app.restore().syncError?.id == "KKN-8003")
    }

    @Test func productsComeFromTheStore() async throws {
        let (app, _) = Self.fresh()
        let products = try await app.products(["noads", "missing"])
        #expect(products == [StoreProduct(id: "noads", type: .nonConsumable, displayName: "noads", displayPrice: "¥100")])
    }
}
#endif
