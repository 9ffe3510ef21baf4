import KakinCore

/// The JSON parser: any bytes either fail cleanly or parse to a value whose serialisation parses back
/// to the same serialisation.
struct JSONTarget: FuzzTarget {
    func run(_ input: [UInt8]) {
        guard let value = try? JSONParser.parse(input) else { return }
        let text = value.serialized()
        guard let again = try? JSONParser.parse(text) else { finding("serialised JSON does not parse: \(text.count) bytes") }
        guard again.serialized() == text else { finding("serialisation is not stable") }
        _ = value.serialized(pretty: true)
    }
}

/// The ISO 8601 period parser and date arithmetic on what it accepts.
struct PeriodTarget: FuzzTarget {
    static let instantsMs: [Int64] = [0, 1_767_225_600_000, 951_782_400_000, -62_135_596_800_000, 253_402_300_799_000]

    func run(_ input: [UInt8]) {
        guard let text = String(validating: input, as: UTF8.self), let period = ISOPeriod(text) else { return }
        guard ISOPeriod(period.description) == period else { finding("\(text) -> \(period.description) does not parse back") }
        for ms in Self.instantsMs {
            let later = period.added(to: ms)
            if later < ms { finding("\(text) added to \(ms) went backwards") }
        }
        for n in [1, 12, 120] {
            _ = period.multiplied(by: n).added(to: Self.instantsMs[1])
        }
        _ = period.approximateDays
    }
}

/// The `.storekit` reader, and what the catalog it builds is used for.
struct StoreKitTarget: FuzzTarget {
    func run(_ input: [UInt8]) {
        guard let file = try? StoreKitConfiguration(bytes: input) else { return }
        for product in file.catalog.sortedProducts {
            if let period = product.period { _ = period.added(to: 1_767_225_600_000) }
            for offer in [product.introductoryOffer].compactMap({ $0 }) + product.promotionalOffers {
                _ = offer.totalPeriod.added(to: 1_767_225_600_000)
            }
        }
        var merged = Catalog()
        for p in file.catalog.sortedProducts { merged.upsert(p) }
    }
}
