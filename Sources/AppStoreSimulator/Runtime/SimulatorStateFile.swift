import Foundation
import KakinCore

/// The state file (`GET|PUT /simulator/v1/state`, `--state FILE`): configuration and catalog, clock, signing
/// CA and API keys, and the whole engine. Loading it gives the same answers, ids and signed bytes as before
/// saving, so a scenario can be replayed. It holds private keys: treat it as a secret.
struct SimulatorStateFile: Codable, Sendable {
    static let currentFormat = "kakin-simulator-state-1"

    var format: String
    var configuration: ConfigurationRecord
    var clockMs: Int64
    var timeRate: Double
    /// The signing CA's export (`SigningCertificateAuthority.exported()`), as JSON text.
    var signingAuthority: String
    var apiKey: APIKeyRecord
    var registeredKeys: [RegisteredKeyRecord]
    var engine: SimulatorStore

    func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? Array(encoder.encode(self))) ?? []
    }

    static func decode(_ bytes: [UInt8]) throws(KakinError) -> SimulatorStateFile {
        guard bytes.count <= bytesMax else { throw KakinError(.bodyTooLarge, "The state file is larger than 256 MB.") }
        let file: SimulatorStateFile
        do {
            file = try JSONDecoder().decode(SimulatorStateFile.self, from: Data(bytes))
        } catch {
            throw KakinError(.invalidField, "This is not a simulator state file (saved by GET /simulator/v1/state).", detail: "\(error)")
        }
        guard file.format == currentFormat else {
            throw KakinError(.invalidField, "Unknown state file format \(file.format); expected \(currentFormat).")
        }
        return file
    }
}

struct APIKeyRecord: Codable, Sendable, Equatable {
    var issuerId: String
    var keyId: String
    var privateKeyPEM: String
}

struct RegisteredKeyRecord: Codable, Sendable, Equatable {
    var keyId: String
    var publicKeyPEM: String
    var issuerId: String?
}

struct OfferRecord: Codable, Sendable, Equatable {
    var id: String?
    var type: Int
    var mode: String
    var period: String
    var numberOfPeriods: Int
    var priceMilli: Int64
    /// Offer codes: who may redeem (nil = everyone, and in files saved before offer codes existed).
    var codeEligibility: [String]?
    /// Win-back offers: false when switched off.
    var isEligible: Bool?

    init(_ o: SubscriptionOffer) {
        id = o.id
        type = o.type.rawValue
        mode = o.mode.rawValue
        period = o.period.description
        numberOfPeriods = o.numberOfPeriods
        priceMilli = o.priceMilli
        if o.codeEligibility.count < OfferCodeEligibility.allCases.count {
            codeEligibility = OfferCodeEligibility.allCases.filter(o.codeEligibility.contains).map(\.rawValue)
        }
        if !o.isEligible { isEligible = false }
    }

    func offer() throws(KakinError) -> SubscriptionOffer {
        guard let mode = OfferPaymentMode(rawValue: mode), let period = ISOPeriod(period) else {
            throw KakinError(.invalidField, "The state file has an offer with an unknown mode or period.")
        }
        return SubscriptionOffer(id: id, type: AppleOfferType(rawValue: type), mode: mode, period: period, numberOfPeriods: numberOfPeriods,
                                 priceMilli: priceMilli,
                                 codeEligibility: codeEligibility.map { Set($0.compactMap(OfferCodeEligibility.init(rawValue:))) }
                                     ?? Set(OfferCodeEligibility.allCases),
                                 isEligible: isEligible ?? true)
    }
}

struct ProductRecord: Codable, Sendable, Equatable {
    var productId: String
    var kind: String
    var displayName: String?
    var coins: Int
    var bonusCoins: Int
    var priceMilli: Int64?
    var currency: String?
    var durationDays: Int?
    var groupId: String?
    var period: String?
    var level: Int
    var familyShareable: Bool
    var introductoryOffer: OfferRecord?
    var promotionalOffers: [OfferRecord]
    /// nil in state files saved before offer codes and win-back offers were simulated.
    var offerCodes: [OfferRecord]?
    var winBackOffers: [OfferRecord]?

    init(_ p: Product) {
        productId = p.productId
        kind = p.kind.rawValue
        displayName = p.displayName
        coins = p.coins
        bonusCoins = p.bonusCoins
        priceMilli = p.priceMilli
        currency = p.currency
        durationDays = p.durationDays
        groupId = p.groupId
        period = p.period?.description
        level = p.level
        familyShareable = p.familyShareable
        introductoryOffer = p.introductoryOffer.map(OfferRecord.init)
        promotionalOffers = p.promotionalOffers.map(OfferRecord.init)
        offerCodes = p.offerCodes.isEmpty ? nil : p.offerCodes.map(OfferRecord.init)
        winBackOffers = p.winBackOffers.isEmpty ? nil : p.winBackOffers.map(OfferRecord.init)
    }

    func product() throws(KakinError) -> Product {
        guard let kind = ProductKind(rawValue: kind) else { throw KakinError(.invalidField, "The state file has a product of unknown type.") }
        var parsedPeriod: ISOPeriod?
        if let period {
            guard let p = ISOPeriod(period) else { throw KakinError(.invalidField, "The state file has a product with a bad period.") }
            parsedPeriod = p
        }
        func offers(_ records: [OfferRecord]?) throws(KakinError) -> [SubscriptionOffer] {
            var out: [SubscriptionOffer] = []
            for o in records ?? [] { out.append(try o.offer()) }
            return out
        }
        return Product(productId: productId, kind: kind, displayName: displayName, coins: coins, bonusCoins: bonusCoins, priceMilli: priceMilli,
                       currency: currency, durationDays: durationDays, groupId: groupId, period: parsedPeriod, level: level,
                       familyShareable: familyShareable, introductoryOffer: try introductoryOffer?.offer(),
                       promotionalOffers: try offers(promotionalOffers), offerCodes: try offers(offerCodes), winBackOffers: try offers(winBackOffers))
    }
}

struct ConfigurationRecord: Codable, Sendable, Equatable {
    var bundleId: String
    var appAppleId: Int64
    var bundleVersion: String
    var environment: String
    var storefront: String
    var currency: String
    var gracePeriodDays: Int?
    var billingRetryDays: Int
    /// A string: seeds use all 64 bits, more than a JSON number keeps exactly in most readers.
    var seed: String
    var products: [ProductRecord]

    init(_ c: SimulatorConfiguration) {
        bundleId = c.bundleId
        appAppleId = c.appAppleId
        bundleVersion = c.bundleVersion
        environment = c.environment.rawValue
        storefront = c.storefront
        currency = c.currency
        gracePeriodDays = c.gracePeriodDays
        billingRetryDays = c.billingRetryDays
        seed = String(c.seed)
        products = c.catalog.sortedProducts.map(ProductRecord.init)
    }

    func configuration() throws(KakinError) -> SimulatorConfiguration {
        var products: [Product] = []
        for p in self.products { products.append(try p.product()) }
        guard let seed = UInt64(seed) else { throw KakinError(.invalidField, "The state file's seed is not a 64-bit number.") }
        let c = SimulatorConfiguration(catalog: Catalog(products), bundleId: bundleId, appAppleId: appAppleId, bundleVersion: bundleVersion,
                                       environment: AppStoreEnvironment(rawValue: environment), storefront: storefront, currency: currency,
                                       gracePeriodDays: gracePeriodDays, billingRetryDays: billingRetryDays, seed: seed)
        do {
            try c.validate()
        } catch {
            throw KakinError(.invalidField, "The state file's configuration is invalid: \(error.description).")
        }
        return c
    }
}
