import KakinCore

/// Reads one JSON object of an admin body field by field, naming the field in every refusal (`Field
/// variants[1].weight must be a positive number.`) with the error kind of the object being read.
struct FieldReader {
    let object: [String: JSONValue]
    let path: String
    let kind: ErrorKind

    init(_ value: JSONValue, path: String, kind: ErrorKind, allowed: Set<String>) throws(KakinError) {
        guard case .object(let o) = value else { throw KakinError(kind, "\(path.isEmpty ? "The body" : "Field \(path)") must be a JSON object.") }
        for key in o.keys.sorted() where !allowed.contains(key) {
            throw KakinError(kind, "Field \(Self.join(path, key)) is not known here (allowed: \(allowed.sorted().joined(separator: ", "))).")
        }
        object = o
        self.path = path
        self.kind = kind
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func fail(_ key: String, _ message: String) -> KakinError { KakinError(kind, "Field \(Self.join(path, key)) \(message).") }

    func present(_ key: String) -> JSONValue? {
        guard let v = object[key], !v.isNull else { return nil }
        return v
    }

    func string(_ key: String, lengthMax: Int) throws(KakinError) -> String? {
        guard let v = present(key) else { return nil }
        guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= lengthMax else { throw fail(key, "must be a string of 1 to \(lengthMax) characters") }
        return s
    }

    func id(_ key: String) throws(KakinError) -> String? {
        guard let s = try string(key, lengthMax: OfferingLimits.idLengthMax) else { return nil }
        guard OfferingIDs.isValid(s) else { throw fail(key, "must be 1 to \(OfferingLimits.idLengthMax) characters of A-Z a-z 0-9 . _ -") }
        return s
    }

    func requiredID(_ key: String) throws(KakinError) -> String {
        guard let s = try id(key) else { throw fail(key, "is required") }
        return s
    }

    func array(_ key: String, max: Int) throws(KakinError) -> [JSONValue]? {
        guard let v = present(key) else { return nil }
        guard let a = v.arrayValue else { throw fail(key, "must be an array") }
        guard a.count <= max else { throw fail(key, "lists more than \(max) items") }
        return a
    }

    func number(_ key: String) throws(KakinError) -> Double? {
        guard let v = present(key) else { return nil }
        switch v {
        case .int(let i): return Double(i)
        case .double(let d) where d.isFinite: return d
        default: throw fail(key, "must be a number")
        }
    }

    func time(_ key: String) throws(KakinError) -> Int64? {
        guard let s = try string(key, lengthMax: 64) else { return nil }
        guard let ms = Timestamp.parseRFC3339(s) else { throw fail(key, "must be an RFC 3339 time such as 2026-12-01T00:00:00Z") }
        return ms
    }
}

/// Ids of offerings, placements, experiments, packages and variants: 1–64 of `[A-Za-z0-9._-]`.
public enum OfferingIDs {
    public static func isValid(_ s: String) -> Bool {
        let u = s.utf8
        guard !u.isEmpty, u.count <= OfferingLimits.idLengthMax else { return false }
        return u.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        }
    }
}

// MARK: Offerings

extension Offering {
    /// The contract's `PUT /v1/admin/offerings/{id}` body: `{"packages": [{"id", "appStore"?, "googlePlay"?, "web"?}], "metadata"?: {…}}`.
    /// Shape only (`offering_invalid`); whether the products exist is `OfferingsConfig.validate`'s.
    public init(id: String, json: JSONValue) throws(KakinError) {
        let r = try FieldReader(json, path: "", kind: .offeringInvalid, allowed: ["packages", "metadata"])
        guard let list = try r.array("packages", max: OfferingLimits.packagesMax), !list.isEmpty else {
            throw r.fail("packages", "must list 1 to \(OfferingLimits.packagesMax) packages")
        }
        var packages: [OfferingPackage] = []
        for (i, item) in list.enumerated() {
            let p = try FieldReader(item, path: "packages[\(i)]", kind: .offeringInvalid, allowed: Set(["id"] + PaywallStore.allCases.map(\.rawValue)))
            let packageId = try p.requiredID("id")
            guard !packages.contains(where: { $0.id == packageId }) else { throw p.fail("id", "repeats package \(packageId)") }
            var products: [PaywallStore: String] = [:]
            for store in PaywallStore.allCases {
                products[store] = try p.string(store.rawValue, lengthMax: OfferingLimits.productIdLengthMax)
            }
            guard !products.isEmpty else { throw KakinError(.offeringInvalid, "Package \(packageId) names no product (appStore, googlePlay or web).") }
            packages.append(OfferingPackage(id: packageId, products: products))
        }
        var metadata: JSONValue?
        if let m = r.present("metadata") {
            guard case .object = m else { throw r.fail("metadata", "must be a JSON object") }
            guard m.serialized().count <= OfferingLimits.metadataBytesMax else { throw r.fail("metadata", "is larger than \(OfferingLimits.metadataBytesMax) bytes") }
            metadata = m
        }
        self.init(id: id, packages: packages, metadata: metadata)
    }

    /// The stored body (the PUT's fields, normalised).
    public var json: JSONValue {
        var o: [String: JSONValue] = ["packages": .array(packages.map { p in
            var item: [String: JSONValue] = ["id": .string(p.id)]
            for (store, product) in p.products { item[store.rawValue] = .string(product) }
            return .object(item)
        })]
        if let metadata { o["metadata"] = metadata }
        return .object(o)
    }
}

// MARK: Placements

extension Placement {
    /// `{"rules": [{"when": {"platform"?, "countries"?, "appVersionMin"?, "appVersionMax"?, "status"?, "attributes"?}, "offering"}],
    /// "default": offeringId}` (`placement_invalid`).
    public init(id: String, json: JSONValue) throws(KakinError) {
        let r = try FieldReader(json, path: "", kind: .placementInvalid, allowed: ["rules", "default"])
        var rules: [PlacementRule] = []
        for (i, item) in (try r.array("rules", max: OfferingLimits.rulesMax) ?? []).enumerated() {
            let rule = try FieldReader(item, path: "rules[\(i)]", kind: .placementInvalid, allowed: ["when", "offering"])
            let when = try RuleConditions(json: rule.present("when") ?? .object([:]), path: "rules[\(i)].when")
            rules.append(PlacementRule(when: when, offering: try rule.requiredID("offering")))
        }
        self.init(id: id, rules: rules, defaultOffering: try r.requiredID("default"))
    }

    public var json: JSONValue {
        ["rules": .array(rules.map { ["when": $0.when.json, "offering": .string($0.offering)] }), "default": .string(defaultOffering)]
    }
}

extension RuleConditions {
    init(json: JSONValue, path: String) throws(KakinError) {
        let r = try FieldReader(json, path: path, kind: .placementInvalid,
                                allowed: ["platform", "countries", "appVersionMin", "appVersionMax", "status", "attributes"])
        self.init()
        if let p = try r.string("platform", lengthMax: 16) {
            guard let platform = Platform(rawValue: p) else { throw r.fail("platform", "must be ios, android or web") }
            self.platform = platform
        }
        if let list = try r.array("countries", max: OfferingLimits.countriesMax) {
            var set: Set<String> = []
            for (i, c) in list.enumerated() {
                guard let code = c.stringValue, CountryCode.isValid(code) else {
                    throw r.fail("countries[\(i)]", "must be an ISO 3166-1 alpha-2 code in upper case, such as JP")
                }
                set.insert(code)
            }
            guard !set.isEmpty else { throw r.fail("countries", "must list at least one country") }
            countries = set
        }
        for key in ["appVersionMin", "appVersionMax"] {
            guard let s = try r.string(key, lengthMax: OfferingLimits.appVersionLengthMax) else { continue }
            guard let v = AppVersion(s) else { throw r.fail(key, "must be a version of dot-separated numbers such as 2.4.0") }
            if key == "appVersionMin" { appVersionMin = v } else { appVersionMax = v }
        }
        if let lo = appVersionMin, let hi = appVersionMax, hi < lo { throw r.fail("appVersionMax", "is below appVersionMin") }
        if let s = try r.string("status", lengthMax: 16) {
            guard let state = CustomerState(rawValue: s) else { throw r.fail("status", "must be new, active or inactive") }
            status = state
        }
        if let a = r.present("attributes") {
            guard let o = a.objectValue, o.count <= OfferingLimits.ruleAttributesMax else {
                throw r.fail("attributes", "must be an object of at most \(OfferingLimits.ruleAttributesMax) string values")
            }
            for (k, v) in o {
                guard CustomerAttributes.isValidKey(k), let value = v.stringValue, CustomerAttributes.isValidValue(value) else {
                    throw r.fail("attributes", "must map keys of 1 to \(OfferingLimits.attributeKeyLengthMax) characters to strings of at most \(OfferingLimits.attributeValueLengthMax)")
                }
                attributes[k] = value
            }
        }
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [:]
        if let platform { o["platform"] = .string(platform.rawValue) }
        if let countries { o["countries"] = .array(countries.sorted().map(JSONValue.string)) }
        if let appVersionMin { o["appVersionMin"] = .string(appVersionMin.description) }
        if let appVersionMax { o["appVersionMax"] = .string(appVersionMax.description) }
        if let status { o["status"] = .string(status.rawValue) }
        if !attributes.isEmpty { o["attributes"] = .object(attributes.mapValues(JSONValue.string)) }
        return .object(o)
    }
}

/// ISO 3166-1 alpha-2 as the app sends its storefront's country (`?country=JP`).
public enum CountryCode {
    public static func isValid(_ s: String) -> Bool {
        s.utf8.count == 2 && s.utf8.allSatisfy { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
    }
}

// MARK: Experiments

extension Experiment {
    /// `{"placement", "variants": [{"id", "offering", "weight"}], "enrollmentPercent", "startsAt", "endsAt"?}` (`experiment_invalid`).
    public init(id: String, json: JSONValue) throws(KakinError) {
        let r = try FieldReader(json, path: "", kind: .experimentInvalid, allowed: ["placement", "variants", "enrollmentPercent", "startsAt", "endsAt"])
        let list = try r.array("variants", max: OfferingLimits.variantsMax) ?? []
        guard list.count >= OfferingLimits.variantsMin else {
            throw r.fail("variants", "must list \(OfferingLimits.variantsMin) to \(OfferingLimits.variantsMax) variants")
        }
        var variants: [ExperimentVariant] = []
        for (i, item) in list.enumerated() {
            let v = try FieldReader(item, path: "variants[\(i)]", kind: .experimentInvalid, allowed: ["id", "offering", "weight"])
            let variantId = try v.requiredID("id")
            guard !variants.contains(where: { $0.id == variantId }) else { throw v.fail("id", "repeats variant \(variantId)") }
            guard let weight = try v.number("weight"), weight > 0, weight <= OfferingLimits.weightMax else {
                throw v.fail("weight", "must be a positive number up to \(Int(OfferingLimits.weightMax))")
            }
            variants.append(ExperimentVariant(id: variantId, offering: try v.requiredID("offering"), weight: weight))
        }
        guard let percent = try r.number("enrollmentPercent"), (0...100).contains(percent) else {
            throw r.fail("enrollmentPercent", "must be a number from 0 to 100")
        }
        guard let starts = try r.time("startsAt") else { throw r.fail("startsAt", "is required") }
        let ends = try r.time("endsAt")
        if let ends, ends <= starts { throw r.fail("endsAt", "must be later than startsAt") }
        self.init(id: id, placement: try r.requiredID("placement"), variants: variants, enrollmentPercent: percent, startsAtMs: starts, endsAtMs: ends)
    }

    public var json: JSONValue {
        func number(_ d: Double) -> JSONValue { d == d.rounded() && abs(d) < 1e15 ? .int(Int64(d)) : .double(d) }
        var o: [String: JSONValue] = [
            "placement": .string(placement),
            "variants": .array(variants.map { ["id": .string($0.id), "offering": .string($0.offering), "weight": number($0.weight)] }),
            "enrollmentPercent": number(enrollmentPercent), "startsAt": .string(Timestamp.rfc3339(startsAtMs)),
        ]
        if let endsAtMs { o["endsAt"] = .string(Timestamp.rfc3339(endsAtMs)) }
        return .object(o)
    }
}

// MARK: Customer attributes

/// What a customer's backend sets with `PUT /v1/customers/{id}/attributes` and rules compare: string values under
/// bounded keys. A PUT merges: a key given a string is set, a key given `null` is removed, others stay.
public enum CustomerAttributes {
    public static func isValidKey(_ k: String) -> Bool {
        !k.isEmpty && k.utf8.count <= OfferingLimits.attributeKeyLengthMax && k.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
    }

    public static func isValidValue(_ v: String) -> Bool { v.utf8.count <= OfferingLimits.attributeValueLengthMax }

    /// The attributes after a PUT's body is merged into `current`; `invalid_attributes` (nothing changed) for a body
    /// that is not an object of strings and nulls, or that would leave more than `customerAttributesMax` keys.
    public static func merging(_ body: JSONValue, into current: [String: String]) throws(KakinError) -> [String: String] {
        guard case .object(let o) = body else { throw KakinError(.invalidAttributes, "The body must be a JSON object of attribute keys to strings (or null to remove one).") }
        var out = current
        for k in o.keys.sorted() {
            guard isValidKey(k) else { throw KakinError(.invalidAttributes, "An attribute key must be 1 to \(OfferingLimits.attributeKeyLengthMax) printable characters.") }
            switch o[k]! {
            case .null: out[k] = nil
            case .string(let v):
                guard isValidValue(v) else { throw KakinError(.invalidAttributes, "Attribute \(k) is longer than \(OfferingLimits.attributeValueLengthMax) bytes.") }
                out[k] = v
            default: throw KakinError(.invalidAttributes, "Attribute \(k) must be a string, or null to remove it.")
            }
        }
        guard out.count <= OfferingLimits.customerAttributesMax else {
            throw KakinError(.invalidAttributes, "A customer has at most \(OfferingLimits.customerAttributesMax) attributes.")
        }
        return out
    }

    public static func json(_ attributes: [String: String]) -> JSONValue { .object(attributes.mapValues(JSONValue.string)) }

    public static func parse(_ stored: String) -> [String: String] {
        guard let o = (try? JSONParser.parse(stored))?.objectValue else { return [:] }
        return o.compactMapValues(\.stringValue)
    }
}
