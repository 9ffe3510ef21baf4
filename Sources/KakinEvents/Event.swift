import KakinCore
import KakinStorage

/// An event a change produces, before it has an id and a sequence: what happened (`type`, `data`) and which app and
/// environment the fact came from (nil when the change has none, such as a spend: written as `null`).
public struct EventDraft: Sendable, Hashable {
    public var type: EventType
    /// The event's own fields; `customer` is set by `EventOutbox.append` (the status after the change).
    public var data: [String: JSONValue]
    public var environment: String?
    public var bundleId: String?

    public init(type: EventType, data: [String: JSONValue] = [:], environment: String? = nil, bundleId: String? = nil) {
        precondition(data["customer"] == nil, "data.customer is the status after the change, set by EventOutbox.append")
        self.type = type
        self.data = data
        self.environment = environment
        self.bundleId = bundleId
    }
}

/// An event as the contract fixes it: `{"id": "evt_…", "type", "customerId", "sequence", "createdAt",
/// "environment", "bundleId", "data": {…, "customer": <status after the change>}}`. `payload` is its JSON, the
/// bytes a webhook sends and the feed answers (keys sorted, like every JSON Kakin writes).
public struct Event: Sendable, Hashable {
    public var id: String
    public var type: EventType
    public var customerId: String
    public var sequence: Int64
    public var createdAtMs: Int64
    public var environment: String?
    public var bundleId: String?
    public var data: [String: JSONValue]

    public var payload: String {
        Self.payload(id: id, type: type, customerId: customerId, sequence: sequence, createdAt: Timestamp.rfc3339(createdAtMs),
                     environment: environment, bundleId: bundleId, data: data, customer: nil)
    }

    /// The event's JSON written straight out, byte for byte what `JSONValue` writes for the event as one object (its keys
    /// sorted at every level), without building that object. `customer`, when given, is `data.customer`'s JSON already
    /// written (an append's events share one status), placed among `data`'s keys where it sorts; `data` then has none.
    static func payload(id: String, type: EventType, customerId: String, sequence: Int64, createdAt: String, environment: String?,
                        bundleId: String?, data: [String: JSONValue], customer: [UInt8]?) -> String {
        precondition(customer == nil || data["customer"] == nil, "data.customer is given once")
        var w = JSONBytesWriter(capacity: Self.envelopeBytes + (customer?.count ?? 0) + 32 * data.count)
        w.object { w in
            w.member("bundleId", bundleId)
            w.member("createdAt", createdAt)
            w.member("customerId", customerId)
            w.key("data")
            w.object { w in
                var pendingCustomer = customer
                for member in data.sorted(by: { $0.key < $1.key }) {
                    if let written = pendingCustomer, "customer" < member.key {
                        w.key("customer")
                        w.raw(written)
                        pendingCustomer = nil
                    }
                    w.key(member.key)
                    w.value(member.value)
                }
                if let written = pendingCustomer {
                    w.key("customer")
                    w.raw(written)
                }
            }
            w.member("environment", environment)
            w.member("id", id)
            w.member("sequence", sequence)
            w.member("type", type.rawValue)
        }
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// An event's JSON besides its data: the keys, its ids, the timestamp (reserved at once).
    static let envelopeBytes = 256

    /// Reads a stored event back (the feed and the desk hold the rows); nil when its JSON is not an event of a known type.
    public init?(payload: String) {
        guard let json = try? JSONParser.parse(payload), let id = json["id"]?.stringValue,
              let type = json["type"]?.stringValue.flatMap(EventType.init(rawValue:)), let customerId = json["customerId"]?.stringValue,
              let sequence = json["sequence"]?.int64Value, let createdAt = json["createdAt"]?.stringValue.flatMap(Timestamp.parseRFC3339),
              let data = json["data"]?.objectValue else { return nil }
        self.init(id: id, type: type, customerId: customerId, sequence: sequence, createdAtMs: createdAt,
                  environment: json["environment"]?.stringValue, bundleId: json["bundleId"]?.stringValue, data: data)
    }

    public init(id: String, type: EventType, customerId: String, sequence: Int64, createdAtMs: Int64, environment: String?,
                bundleId: String?, data: [String: JSONValue]) {
        self.id = id
        self.type = type
        self.customerId = customerId
        self.sequence = sequence
        self.createdAtMs = createdAtMs
        self.environment = environment
        self.bundleId = bundleId
        self.data = data
    }
}

/// The outbox's one entry point for whatever changes a customer: called inside the write body that applies the
/// change, so the events commit with it or not at all (none lost, none invented).
public enum EventOutbox {
    /// Appends `drafts` (in order) to `customerId`'s events after `lastSequence`, the customer's last sequence the
    /// caller's write read (`KakinStore.appendEvents` guards it: no gap, no duplicate, whatever runs concurrently): draws
    /// an `evt_…` id for each (a re-run body draws new ones; only the committed run's exist) and adds to `batch` the
    /// writes storing each event's JSON with `data.customer` = `customer`, and `statusView` (what the events told, when
    /// it changed). No drafts: nothing is added, `[]`.
    /// - Parameters:
    ///   - customer: the customer's status after the change as `GET /v1/customers/{id}` then answers it, written
    ///     (`CustomerStatus.answerJSON`), its `version` the customer's last sequence after this append
    ///     (`lastSequence + drafts.count`); written once into every draft's JSON (`Event.payload`).
    ///   - nowMs: `createdAt` (Kakin's clock: the simulator's in local mode).
    /// - Returns: the rows to be stored, in sequence order.
    @discardableResult
    public static func append(to batch: inout WriteBatch, customerId: String, lastSequence: Int64, drafts: [EventDraft],
                              customerStatusJSON customer: [UInt8], statusView: String?, nowMs: Int64,
                              ids: any IDGenerator) -> [OutboxEventRow] {
        if drafts.isEmpty { return [] }
        let first = lastSequence + 1
        let createdAt = Timestamp.rfc3339(nowMs)
        var rows: [OutboxEventRow] = []
        rows.reserveCapacity(drafts.count)
        for (i, draft) in drafts.enumerated() {
            let id = ids.id(prefix: "evt_")
            let sequence = first + Int64(i)
            let payload = Event.payload(id: id, type: draft.type, customerId: customerId, sequence: sequence, createdAt: createdAt,
                                        environment: draft.environment, bundleId: draft.bundleId, data: draft.data, customer: customer)
            rows.append(OutboxEventRow(eventId: id, customerId: customerId, sequence: sequence, type: draft.type.rawValue,
                                       createdAtMs: nowMs, environment: draft.environment, bundleId: draft.bundleId, payload: payload))
        }
        KakinStore.appendEvents(to: &batch, customerId: customerId, lastSequence: lastSequence, rows: rows, statusView: statusView)
        return rows
    }

    /// `append` in a write that has not read the customer's last sequence: reads it, then writes with `customerStatus`
    /// (an object; its `version` set here) and the status view unchanged. Returns the events as stored.
    @discardableResult
    public static func append(_ db: SQLConnection, customerId: String, drafts: [EventDraft], customerStatus: JSONValue,
                              nowMs: Int64, ids: any IDGenerator) throws -> [Event] {
        let lastSequence = try KakinStore.lastEventSequence(db, customerId: customerId)
        var status = customerStatus.objectValue ?? [:]
        status["version"] = .int(lastSequence + Int64(drafts.count))
        var batch = WriteBatch()
        let rows = append(to: &batch, customerId: customerId, lastSequence: lastSequence, drafts: drafts,
                          customerStatusJSON: JSONValue.object(status).serialized(), statusView: nil, nowMs: nowMs, ids: ids)
        try db.write(batch)
        return rows.map { row in
            guard let event = Event(payload: row.payload) else { preconditionFailure("an appended event reads back") }
            return event
        }
    }
}

/// The feed's answers, built from the stored JSON without parsing it again.
public enum EventFeed {
    /// `{"events": [<stored event JSON>…], "nextCursor": "…"}` (`GET /v1/events` and `GET /v1/customers/{id}/events`;
    /// the latter passes the last sequence as `nextCursor`'s place, see `customerPageJSON`).
    public static func pageJSON(_ page: EventFeedPage) -> [UInt8] {
        body(page.events, nextCursor: .string(page.nextCursor.token))
    }

    /// `{"events": […], "nextAfterSequence": N}` for one customer's events: N is the last sequence returned (or the
    /// `afterSequence` asked for when none was), the next page's `afterSequence`.
    public static func customerPageJSON(_ events: [OutboxEventRow], afterSequence: Int64) -> [UInt8] {
        var out = Array(#"{"events":["#.utf8)
        for (i, e) in events.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: e.payload.utf8)
        }
        out.append(contentsOf: #"],"nextAfterSequence":\#(events.last?.sequence ?? afterSequence)}"#.utf8)
        return out
    }

    static func body(_ events: [OutboxEventRow], nextCursor: JSONValue) -> [UInt8] {
        var out = Array(#"{"events":["#.utf8)
        for (i, e) in events.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: e.payload.utf8)
        }
        out.append(contentsOf: #"],"nextCursor":"#.utf8)
        out.append(contentsOf: nextCursor.serialized())
        out.append(UInt8(ascii: "}"))
        return out
    }
}
