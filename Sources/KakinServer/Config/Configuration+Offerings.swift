import KakinCore
import KakinOfferings

/// Offerings and experiments seeded from the config file (an addition): `"paywalls": {"offerings": {"<id>": <PUT body>},
/// "placements": {…}, "experiments": {…}}`, each body exactly what `PUT /v1/admin/{offerings|placements|experiments}/{id}`
/// takes. At start, an object the database does not hold yet is written (as `config`, with its audit entry); one it
/// holds is left as it is: after the first start the database is where edits live (the admin API, the desk).
extension Configuration {
    static let offeringsTopKeys: Set<String> = ["paywalls"]

    /// One object to seed.
    public struct PaywallSeed: Sendable, Hashable {
        public var kind: OfferingObjectKind
        public var id: String
        public var body: JSONValue
    }

    /// Shapes are checked here (a bad one is a config error naming the key); references and catalogs when seeded.
    static func parsePaywalls(_ o: StrictObject) throws(ConfigurationError) -> [PaywallSeed] {
        guard let p = try o.object("paywalls") else { return [] }
        try p.check(allowedKeys: Set(OfferingObjectKind.allCases.map(\.pathSegment)))
        var seeds: [PaywallSeed] = []
        for kind in OfferingObjectKind.allCases {  // offerings first: placements and experiments name them
            guard let objects = try p.object(kind.pathSegment) else { continue }
            for id in objects.object.keys.sorted() {
                let path = objects.sub(id)
                guard OfferingIDs.isValid(id) else { throw ConfigurationError(path, "is not an id (1 to \(OfferingLimits.idLengthMax) of A-Z a-z 0-9 . _ -)") }
                let body = objects.object[id]!
                do {
                    _ = try OfferingsChange(kind: kind, id: id, json: body)
                } catch {
                    throw ConfigurationError(path, error.message)
                }
                seeds.append(PaywallSeed(kind: kind, id: id, body: body))
            }
        }
        return seeds
    }
}
