import KakinCore

/// A Stripe event (the Event object: `{"id": "evt_…", "object": "event", "type", "created", "livemode",
/// "api_version", "data": {"object": {…}, "previous_attributes"?}}`), read strictly and within bounds. Only the
/// envelope is checked here; `StripeEventFacts` reads the object for the types Kakin handles.
public struct StripeEvent: Sendable, Hashable {
    public var id: String
    public var type: String
    /// Unix seconds: when Stripe created the event (the order of the facts, not the order of arrival).
    public var createdSeconds: Int64
    public var livemode: Bool
    public var apiVersion: String?
    /// `data.object`.
    public var object: JSONValue

    public init(body: [UInt8]) throws(KakinError) {
        guard body.count <= Self.bodyBytesMax else {
            throw KakinError(.stripeEventInvalid, "The event is larger than \(Self.bodyBytesMax) bytes.")
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(body, depthMax: Self.depthMax)
        } catch {
            throw KakinError(.stripeEventInvalid, "The event is not JSON (\(error.reason) at byte \(error.offset)).")
        }
        try self.init(json: json)
    }

    public init(json: JSONValue) throws(KakinError) {
        guard case .object = json, json["object"]?.stringValue == "event" else {
            throw KakinError(.stripeEventInvalid, "The body is not a Stripe event (object must be \"event\").")
        }
        guard let id = json["id"]?.stringValue, StripeObject.isID(id, prefix: "evt_") else {
            throw KakinError(.stripeEventInvalid, "The event's id must be evt_… of at most \(Self.idLengthMax) characters.")
        }
        guard let type = json["type"]?.stringValue, !type.isEmpty, type.utf8.count <= 128 else {
            throw KakinError(.stripeEventInvalid, "The event has no type.")
        }
        guard case .int(let created)? = json["created"], created > 0 else {
            throw KakinError(.stripeEventInvalid, "The event's created must be unix seconds.")
        }
        guard let object = json["data"]?["object"], case .object = object else {
            throw KakinError(.stripeEventInvalid, "The event has no data.object.")
        }
        self.id = id
        self.type = type
        createdSeconds = created
        livemode = json["livemode"]?.boolValue ?? false
        apiVersion = json["api_version"]?.stringValue
        self.object = object
    }
}

/// Typed reads of a Stripe object's fields, each failure naming the field (KKN-3058).
struct StripeObject {
    let json: JSONValue
    let name: String

    init(_ json: JSONValue, name: String, expected: String) throws(KakinError) {
        guard case .object = json, json["object"]?.stringValue == expected else {
            throw KakinError(.stripeEventInvalid, "The event's data.object is not a \(expected).")
        }
        self.json = json
        self.name = name
    }

    static func isID(_ s: String, prefix: String) -> Bool {
        s.hasPrefix(prefix) && s.utf8.count > prefix.utf8.count && s.utf8.count <= StripeEvent.idLengthMax
            && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95 }
    }

    func fail(_ field: String, _ what: String) -> KakinError {
        KakinError(.stripeEventInvalid, "The \(name)'s \(field) \(what).")
    }

    func id(_ field: String = "id", prefix: String) throws(KakinError) -> String {
        guard let s = json[field]?.stringValue, Self.isID(s, prefix: prefix) else { throw fail(field, "must be \(prefix)…") }
        return s
    }

    /// A reference that Stripe sends as an id string, or as the object when expanded; nil when absent or null.
    func reference(_ value: JSONValue?, prefix: String, field: String) throws(KakinError) -> String? {
        guard let value, !value.isNull else { return nil }
        let id = value.stringValue ?? value["id"]?.stringValue
        guard let id, Self.isID(id, prefix: prefix) else { throw fail(field, "must be \(prefix)… or that object") }
        return id
    }

    func reference(_ field: String, prefix: String) throws(KakinError) -> String? {
        try reference(json[field], prefix: prefix, field: field)
    }

    func string(_ field: String) throws(KakinError) -> String? {
        guard let v = json[field], !v.isNull else { return nil }
        guard let s = v.stringValue, s.utf8.count <= 255 else { throw fail(field, "must be a string of at most 255 bytes") }
        return s
    }

    func requiredString(_ field: String) throws(KakinError) -> String {
        guard let s = try string(field), !s.isEmpty else { throw fail(field, "is missing") }
        return s
    }

    func int(_ field: String) throws(KakinError) -> Int64? { try Self.int(json[field], field: field, fail: fail) }

    func requiredInt(_ field: String) throws(KakinError) -> Int64 {
        guard let i = try int(field) else { throw fail(field, "is missing") }
        return i
    }

    static func int(_ v: JSONValue?, field: String, fail: (String, String) -> KakinError) throws(KakinError) -> Int64? {
        guard let v, !v.isNull else { return nil }
        guard case .int(let i) = v, i >= 0 else { throw fail(field, "must be a whole number") }
        return i
    }

    func bool(_ field: String) throws(KakinError) -> Bool? {
        guard let v = json[field], !v.isNull else { return nil }
        guard case .bool(let b) = v else { throw fail(field, "must be true or false") }
        return b
    }

    func currency(_ field: String = "currency") throws(KakinError) -> CurrencyCode {
        guard let s = json[field]?.stringValue, let c = CurrencyCode(s) else { throw fail(field, "must be an ISO 4217 code") }
        return c
    }

    /// A `metadata` hash (string values only, as Stripe stores them).
    static func metadata(_ v: JSONValue?) -> [String: String] {
        guard let o = v?.objectValue else { return [:] }
        var out: [String: String] = [:]
        for (k, value) in o.prefix(50) { if let s = value.stringValue { out[k] = s } }
        return out
    }

    /// `list.data`, at most `max` elements.
    static func listData(_ v: JSONValue?, max: Int = 100) -> [JSONValue] {
        Array((v?["data"]?.arrayValue ?? []).prefix(max))
    }
}
