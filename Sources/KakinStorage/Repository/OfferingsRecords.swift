import KakinCore

/// Offerings, placements, experiments, their audit, customer attributes and experiment enrollments (migration 23,
/// `Schema+Offerings.swift`): the SQL of `KakinService`'s `Offerings`, inside one `KakinStore.transaction` or
/// `snapshot` (`r.offerings`). What is valid and who gets what is `KakinOfferings`'; this only reads and writes rows.
public struct OfferingsRecords {
    let db: SQLConnection
    let nowMs: Int64

    /// One stored offering, placement or experiment (`kind` is `KakinOfferings.OfferingObjectKind`'s raw value).
    public struct StoredObject: Sendable, Hashable {
        public var kind: String
        public var id: String
        public var version: Int64
        /// The body as the admin API answers it (JSON text).
        public var body: String
        public var updatedAtMs: Int64
        public var updatedBy: String

        public init(kind: String, id: String, version: Int64, body: String, updatedAtMs: Int64, updatedBy: String) {
            self.kind = kind
            self.id = id
            self.version = version
            self.body = body
            self.updatedAtMs = updatedAtMs
            self.updatedBy = updatedBy
        }
    }

    public struct AuditEntry: Sendable, Hashable {
        public var seq: Int64
        public var atMs: Int64
        public var actor: String
        public var kind: String
        public var id: String
        public var version: Int64
        /// JSON text: what changed.
        public var change: String
    }

    public struct Enrollment: Sendable, Hashable {
        public var customerId: String
        public var variantId: String
        public var enrolledAtMs: Int64
    }

    static let revisionName = "config"

    // MARK: Objects

    /// How many changes were ever made (0 before the first).
    public func revision() throws -> Int64 {
        try db.queryOne("SELECT revision FROM offering_revision WHERE name = ?", [.text(Self.revisionName)])?.int("revision") ?? 0
    }

    /// Every stored object.
    public func objects() throws -> [StoredObject] {
        try db.query("""
            SELECT kind, object_id, version, body, updated_at_ms, updated_by FROM offering_objects ORDER BY kind, object_id LIMIT ?
            """, [.integer(Int64(Self.objectsReadMax))]).map(Self.object)
    }

    public func object(kind: String, id: String) throws -> StoredObject? {
        try db.queryOne("""
            SELECT kind, object_id, version, body, updated_at_ms, updated_by FROM offering_objects WHERE kind = ? AND object_id = ?
            """, [.text(kind), .text(id)]).map(Self.object)
    }

    static func object(_ r: SQLRow) -> StoredObject {
        StoredObject(kind: r.string("kind") ?? "", id: r.string("object_id") ?? "", version: r.int("version") ?? 0, body: r.string("body") ?? "{}",
                     updatedAtMs: r.int("updated_at_ms") ?? 0, updatedBy: r.string("updated_by") ?? "")
    }

    /// Writes the object's next version (1 for a new one) with its audit entry, and bumps the revision every process
    /// compares with; answers the version written.
    public func put(kind: String, id: String, body: String, actor: String, change: String) throws -> Int64 {
        let version = (try object(kind: kind, id: id)?.version ?? 0) + 1
        try db.execute("""
            INSERT INTO offering_objects (kind, object_id, version, body, updated_at_ms, updated_by) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (kind, object_id) DO UPDATE SET version = excluded.version, body = excluded.body,
                updated_at_ms = excluded.updated_at_ms, updated_by = excluded.updated_by
            """, [.text(kind), .text(id), .integer(version), .text(body), .integer(nowMs), .text(actor)])
        try db.execute("INSERT INTO offering_audit (at_ms, actor, kind, object_id, version, change, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [.integer(nowMs), .text(actor), .text(kind), .text(id), .integer(version), .text(change), .text(body)])
        try db.execute("""
            INSERT INTO offering_revision (name, revision) VALUES (?, 1)
            ON CONFLICT (name) DO UPDATE SET revision = offering_revision.revision + 1
            """, [.text(Self.revisionName)])
        return version
    }

    /// Audit entries, newest first, before `beforeSeq` (the previous page's last), optionally of one object.
    public func audit(beforeSeq: Int64?, kind: String?, id: String?, limit: Int) throws -> [AuditEntry] {
        var sql = "SELECT seq, at_ms, actor, kind, object_id, version, change FROM offering_audit WHERE seq < ?"
        var parameters: [SQLValue] = [.integer(beforeSeq ?? .max)]
        if let kind {
            sql += " AND kind = ?"
            parameters.append(.text(kind))
        }
        if let id {
            sql += " AND object_id = ?"
            parameters.append(.text(id))
        }
        parameters.append(.integer(Int64(limit)))
        return try db.query(sql + " ORDER BY seq DESC LIMIT ?", parameters).map { r in
            AuditEntry(seq: r.int("seq") ?? 0, atMs: r.int("at_ms") ?? 0, actor: r.string("actor") ?? "", kind: r.string("kind") ?? "",
                       id: r.string("object_id") ?? "", version: r.int("version") ?? 0, change: r.string("change") ?? "{}")
        }
    }

    // MARK: Customer attributes

    /// The customer's attributes as stored (a JSON object's text), nil when none were ever set.
    public func attributes(_ customerId: String) throws -> String? {
        try db.queryOne("SELECT attributes FROM customer_attributes WHERE customer_id = ?", [.text(customerId)])?.string("attributes")
    }

    public func setAttributes(_ customerId: String, _ json: String) throws {
        try db.execute("""
            INSERT INTO customer_attributes (customer_id, attributes, updated_at_ms) VALUES (?, ?, ?)
            ON CONFLICT (customer_id) DO UPDATE SET attributes = excluded.attributes, updated_at_ms = excluded.updated_at_ms
            """, [.text(customerId), .text(json), .integer(nowMs)])
    }

    // MARK: Enrollments

    /// The variant the customer was enrolled in, if it was.
    public func enrolledVariant(experimentId: String, customerId: String) throws -> String? {
        try db.queryOne("SELECT variant_id FROM experiment_enrollments WHERE experiment_id = ? AND customer_id = ?",
                        [.text(experimentId), .text(customerId)])?.string("variant_id")
    }

    /// The revision and the variant the customer was enrolled in (if it was), in one statement: the offerings read's
    /// only statement when the configuration this process holds is current.
    public func revision(andVariantOf customerId: String, in experimentId: String) throws -> (revision: Int64, variant: String?) {
        let row = try db.queryOne("""
            SELECT (SELECT revision FROM offering_revision WHERE name = ?) AS revision,
                   (SELECT variant_id FROM experiment_enrollments WHERE experiment_id = ? AND customer_id = ?) AS variant_id
            """, [.text(Self.revisionName), .text(experimentId), .text(customerId)])
        return (row?.int("revision") ?? 0, row?.string("variant_id"))
    }

    /// Records the enrollment once: true when this write recorded it, false when it existed (another request's).
    public func enroll(experimentId: String, customerId: String, variantId: String, placementId: String) throws -> Bool {
        try db.execute("""
            INSERT INTO experiment_enrollments (experiment_id, customer_id, variant_id, placement_id, enrolled_at_ms) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (experiment_id, customer_id) DO NOTHING
            """, [.text(experimentId), .text(customerId), .text(variantId), .text(placementId), .integer(nowMs)]) == 1
    }

    /// An experiment's enrollments (one variant's, or all) after `afterCustomerId`, in customer id order.
    public func enrollments(experimentId: String, variantId: String?, afterCustomerId: String?, limit: Int) throws -> [Enrollment] {
        var sql = "SELECT customer_id, variant_id, enrolled_at_ms FROM experiment_enrollments WHERE experiment_id = ? AND customer_id > ?"
        var parameters: [SQLValue] = [.text(experimentId), .text(afterCustomerId ?? "")]
        if let variantId {
            sql = "SELECT customer_id, variant_id, enrolled_at_ms FROM experiment_enrollments WHERE experiment_id = ? AND variant_id = ? AND customer_id > ?"
            parameters.insert(.text(variantId), at: 1)
        }
        parameters.append(.integer(Int64(limit)))
        return try db.query(sql + " ORDER BY customer_id LIMIT ?", parameters).map { r in
            Enrollment(customerId: r.string("customer_id") ?? "", variantId: r.string("variant_id") ?? "", enrolledAtMs: r.int("enrolled_at_ms") ?? 0)
        }
    }
}

extension Records {
    /// Offerings, placements, experiments, attributes and enrollments, in this transaction.
    public var offerings: OfferingsRecords { OfferingsRecords(db: db, nowMs: nowMs) }
}
