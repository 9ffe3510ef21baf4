@testable import AppStoreSimulator
import KakinCore
import Testing

/// Stands in for the certificate authority in engine tests: an unsigned compact JWS whose payload the tests
/// read back. (Signature checks are the interop and HTTP tests' business.)
struct UnsignedSigner: PayloadSigner {
    func sign(_ payload: JSONValue) -> String {
        Base64.urlEncode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64.urlEncode(payload.serialized()) + "."
    }
}

/// The payload of a compact JWS, unverified.
func decodeJWS(_ jws: String) -> JSONValue {
    let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let bytes = Base64.decode(String(parts[1])), let json = try? JSONParser.parse(bytes) else {
        Issue.record("not a compact JWS: \(jws.prefix(40))")
        return .null
    }
    return json
}

extension Int64 {
    static let day: Int64 = 86_400_000
    static let hour: Int64 = 3_600_000
}

/// 2026-01-15T09:00:00Z: a plain mid-month start so month arithmetic is easy to read in expectations.
let startMs: Int64 = Timestamp.parseRFC3339("2026-01-15T09:00:00Z")!

func plus(_ period: String, _ ms: Int64) -> Int64 { ISOPeriod(period)!.added(to: ms) }

let tokenA = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
let tokenB = "0b8a8a35-2d6b-4d7e-9b53-3f1cd02a6a11"

/// The seed-003 catalog: group "g" with two same-level monthly products (A, B), a same-level 3-monthly
/// one (Q) and yearly one (Y), a higher tier (P, level 0 is not allowed so levels are 2 and 1), and
/// promotional offers of 1 year, 6 months and 12 months free.
func offersCatalog() -> Catalog {
    let month = ISOPeriod(months: 1)
    func free(_ id: String, _ period: String) -> SubscriptionOffer {
        SubscriptionOffer(id: id, type: .promotional, mode: .freeTrial, period: ISOPeriod(period)!)
    }
    let promos = [free("1y", "P1Y"), free("6m", "P6M"), free("12m", "P12M")]
    return Catalog([
        Product(productId: "A", kind: .autoRenewable, priceMilli: 4_990, currency: "USD", groupId: "g", period: month, level: 2,
                familyShareable: true, introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .freeTrial, period: month),
                promotionalOffers: promos + [SubscriptionOffer(id: "half", type: .promotional, mode: .payAsYouGo, period: month, numberOfPeriods: 3, priceMilli: 2_490)]),
        Product(productId: "B", kind: .autoRenewable, priceMilli: 4_990, currency: "USD", groupId: "g", period: month, level: 2,
                promotionalOffers: promos),
        Product(productId: "Q", kind: .autoRenewable, priceMilli: 12_990, currency: "USD", groupId: "g", period: ISOPeriod(months: 3), level: 2,
                introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .freeTrial, period: ISOPeriod(days: 7)),
                promotionalOffers: promos),
        Product(productId: "Y", kind: .autoRenewable, priceMilli: 49_990, currency: "USD", groupId: "g", period: ISOPeriod(years: 1), level: 2),
        Product(productId: "P", kind: .autoRenewable, priceMilli: 9_990, currency: "USD", groupId: "g", period: month, level: 1,
                promotionalOffers: promos),
        Product(productId: "L", kind: .autoRenewable, priceMilli: 2_990, currency: "USD", groupId: "g", period: month, level: 3,
                promotionalOffers: promos),
        Product(productId: "coins", kind: .consumable, coins: 100, priceMilli: 990, currency: "USD"),
        Product(productId: "lifetime", kind: .nonConsumable, priceMilli: 19_990, currency: "USD", familyShareable: true),
        Product(productId: "pass", kind: .nonRenewing, priceMilli: 2_990, currency: "USD", durationDays: 90),
    ])
}

/// A fresh engine at `startMs` with unsigned payloads.
func makeState(catalog: Catalog = offersCatalog(), graceDays: Int? = nil, environment: AppStoreEnvironment = .sandbox) -> SimulatorState {
    SimulatorState(config: SimulatorConfiguration(catalog: catalog, bundleId: "com.example.app", appAppleId: 1234,
                                                  environment: environment, gracePeriodDays: graceDays, seed: 42),
                   signer: UnsignedSigner(), startMs: startMs)
}

/// Reading helpers for assertions.
extension SimulatorState {
    func tx(_ id: String?) -> JSONValue { decodeJWS(store.transactions[id!]!.jws) }

    func latestTx(_ otid: String) -> JSONValue { decodeJWS(latest(store.subscriptions[otid]!).jws) }

    func renewal(_ otid: String) -> JSONValue { decodeJWS(store.subscriptions[otid]!.renewalJWS) }

    /// The decoded payloads of notifications, oldest first.
    func notes(_ uuids: [String]) -> [JSONValue] {
        uuids.map { u in
            guard let n = store.notifications.first(where: { $0.notificationUUID == u }) else {
                Issue.record("unknown notification \(u)")
                return .null
            }
            return decodeJWS(n.jws)
        }
    }

    /// "TYPE" or "TYPE/SUBTYPE" of each notification, oldest first.
    func kinds(_ uuids: [String]) -> [String] {
        notes(uuids).map { n in [n["notificationType"]?.stringValue, n["subtype"]?.stringValue].compactMap { $0 }.joined(separator: "/") }
    }

    var allKinds: [String] { kinds(store.notifications.map(\.notificationUUID)) }

    /// Transactions of an instance, oldest first, decoded.
    func chain(_ otid: String) -> [JSONValue] {
        store.transactions.values.filter { $0.originalTransactionId == otid }.sorted { $0.transactionId < $1.transactionId }.map { decodeJWS($0.jws) }
    }

    /// Buys as StoreKit would; a promotional offer comes with a fresh valid signature unless one is given.
    mutating func buy(_ productId: String, token: String? = tokenA, offer: OfferChoice? = nil, family: Bool = false, quantity: Int = 1,
                      signature: OfferSignatureClaims? = nil) throws(KakinError) -> ActionOutcome {
        var request = PurchaseRequest(productId: productId, appAccountToken: token, quantity: quantity, offer: offer, familyShared: family)
        if case .promotional(let id)? = offer { request.offerSignature = signature ?? signed(productId, id, token: token) }
        return try purchase(request)
    }

    /// A legacy promotional offer signature as the runtime hands it to the engine once its cryptography
    /// checked out: signed now, with a nonce this state has not used.
    func signed(_ productId: String, _ offerId: String, token: String? = tokenA, atMs: Int64? = nil, nonce: String? = nil) -> OfferSignatureClaims {
        let n = String(store.transactions.count * 1_000 + (store.offerNonces?.count ?? 0))
        return OfferSignatureClaims(format: .legacy, keyId: "KEY", productId: productId, offerId: offerId,
                                    nonce: nonce ?? "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - n.count) + n,
                                    timestampMs: atMs ?? nowMs, appAccountToken: token ?? "", transactionId: nil)
    }

    mutating func advance(by ms: Int64) -> [String] { advance(toMs: nowMs + ms) }
}

func ms(_ v: JSONValue?) -> Int64? { v?.int64Value }
