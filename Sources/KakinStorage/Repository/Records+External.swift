import KakinCore

/// A purchase a provider reported (`external_purchases`): the 201/409 fact of the generic source and of Stripe.
public struct ExternalPurchaseRow: Sendable, Hashable {
    public var provider: String
    public var externalId: String
    /// nil until known (a Stripe invoice that arrived before its subscription named the customer).
    public var customerId: String?
    public var bundleId: String
    public var productId: String?
    /// The catalog's kind of `productId` (`ProductKind` raw value), once known.
    public var productKind: String?
    /// Minor units of `currency`, tax included.
    public var price: Int64
    public var currency: String
    public var purchasedAtMs: Int64
    public var expiresAtMs: Int64?
    public var periodStartMs: Int64?
    /// The provider's subscription (`sub_…`) a period belongs to.
    public var subscriptionId: String?
    /// Apple's external purchase token the purchase followed (its `externalPurchaseId`).
    public var externalPurchaseId: String?
    /// The provider's payment behind the purchase when it is not `externalId` (a Stripe invoice's PaymentIntent).
    public var paymentRef: String? = nil
    /// Minor units refunded so far, and each refund `{"key", "amount", "atMs"}` in order.
    public var refundedTotal: Int64
    public var refunds: JSONValue
    /// What was granted (the answer's `grant`).
    public var grant: JSONValue
    /// Whether its effects (coins, entitlement) were applied to `customerId`.
    public var applied: Bool
    public var createdAtMs: Int64

    public init(provider: String, externalId: String, customerId: String?, bundleId: String, productId: String?, productKind: String?,
                price: Int64, currency: String, purchasedAtMs: Int64, expiresAtMs: Int64?, periodStartMs: Int64?, subscriptionId: String?,
                externalPurchaseId: String?, refundedTotal: Int64 = 0, refunds: JSONValue = [], grant: JSONValue = .null,
                applied: Bool, createdAtMs: Int64) {
        self.provider = provider
        self.externalId = externalId
        self.customerId = customerId
        self.bundleId = bundleId
        self.productId = productId
        self.productKind = productKind
        self.price = price
        self.currency = currency
        self.purchasedAtMs = purchasedAtMs
        self.expiresAtMs = expiresAtMs
        self.periodStartMs = periodStartMs
        self.subscriptionId = subscriptionId
        self.externalPurchaseId = externalPurchaseId
        self.refundedTotal = refundedTotal
        self.refunds = refunds
        self.grant = grant
        self.applied = applied
        self.createdAtMs = createdAtMs
    }
}

/// A provider's subscription: its merged state and who and what it is for (`external_subscriptions`).
public struct ExternalSubscriptionRow: Sendable, Hashable {
    public var provider: String
    public var subscriptionId: String
    public var bundleId: String
    public var customerId: String?
    public var productId: String?
    /// `ExternalSubscriptionState.json`.
    public var state: JSONValue

    public init(provider: String, subscriptionId: String, bundleId: String, customerId: String?, productId: String?, state: JSONValue) {
        self.provider = provider
        self.subscriptionId = subscriptionId
        self.bundleId = bundleId
        self.customerId = customerId
        self.productId = productId
        self.state = state
    }
}

/// An Apple external purchase token Kakin recorded (`external_purchase_tokens`).
public struct ExternalTokenRow: Sendable, Hashable {
    public var externalPurchaseId: String
    public var bundleId: String
    public var customerId: String?
    /// The decoded token's JSON (`ExternalPurchaseToken.json`).
    public var token: JSONValue
    public var tokenType: String?
    public var tokenCreatedAtMs: Int64
    public var recordedAtMs: Int64
    /// When a report is owed; nil when Apple has everything.
    public var reportDueMs: Int64?
    /// What Apple accepted: `{"lineItemIds": [...], "statusOnly": bool}`.
    public var accepted: JSONValue
    /// When Apple's UNREPORTED notification about it arrived, if it did.
    public var unreportedAtMs: Int64?

    public init(externalPurchaseId: String, bundleId: String, customerId: String?, token: JSONValue, tokenType: String?, tokenCreatedAtMs: Int64,
                recordedAtMs: Int64, reportDueMs: Int64?, accepted: JSONValue = [:], unreportedAtMs: Int64? = nil) {
        self.externalPurchaseId = externalPurchaseId
        self.bundleId = bundleId
        self.customerId = customerId
        self.token = token
        self.tokenType = tokenType
        self.tokenCreatedAtMs = tokenCreatedAtMs
        self.recordedAtMs = recordedAtMs
        self.reportDueMs = reportDueMs
        self.accepted = accepted
        self.unreportedAtMs = unreportedAtMs
    }
}

/// One report on its way to Apple (`external_purchase_reports`).
public struct ExternalReportRow: Sendable, Hashable {
    public var requestIdentifier: String
    public var externalPurchaseId: String
    public var bundleId: String
    /// `pending`, `sent`, `failed`, `corrected` (`ExternalPurchaseReportJob.State`).
    public var state: String
    /// The job's stored form (`ExternalPurchaseReportJob.storedJSON`).
    public var job: JSONValue
    public var nextAttemptMs: Int64?
    public var createdAtMs: Int64

    public init(requestIdentifier: String, externalPurchaseId: String, bundleId: String, state: String, job: JSONValue, nextAttemptMs: Int64?,
                createdAtMs: Int64) {
        self.requestIdentifier = requestIdentifier
        self.externalPurchaseId = externalPurchaseId
        self.bundleId = bundleId
        self.state = state
        self.job = job
        self.nextAttemptMs = nextAttemptMs
        self.createdAtMs = createdAtMs
    }
}

extension Records {
    // MARK: Purchases

    static let purchaseColumns = """
        provider, external_id, customer_id, bundle_id, product_id, product_kind, price, currency, purchased_at_ms, expires_at_ms,
        period_start_ms, subscription_id, external_purchase_id, payment_ref, refunded_total, refunds, grant_json, applied, created_at_ms
        """

    static func purchaseRow(_ r: SQLRow) -> ExternalPurchaseRow {
        var row = ExternalPurchaseRow(
            provider: r.string("provider") ?? "", externalId: r.string("external_id") ?? "", customerId: r.string("customer_id"),
            bundleId: r.string("bundle_id") ?? "", productId: r.string("product_id"), productKind: r.string("product_kind"),
            price: r.int("price") ?? 0, currency: r.string("currency") ?? "", purchasedAtMs: r.int("purchased_at_ms") ?? 0,
            expiresAtMs: r.int("expires_at_ms"), periodStartMs: r.int("period_start_ms"), subscriptionId: r.string("subscription_id"),
            externalPurchaseId: r.string("external_purchase_id"), refundedTotal: r.int("refunded_total") ?? 0,
            refunds: (try? JSONParser.parse(r.string("refunds") ?? "[]")) ?? [], grant: (try? JSONParser.parse(r.string("grant_json") ?? "null")) ?? .null,
            applied: (r.int("applied") ?? 0) != 0, createdAtMs: r.int("created_at_ms") ?? 0)
        row.paymentRef = r.string("payment_ref")
        return row
    }

    public func externalPurchase(provider: String, externalId: String) throws -> ExternalPurchaseRow? {
        try db.queryOne("SELECT \(Self.purchaseColumns) FROM external_purchases WHERE provider = ? AND external_id = ?",
                        [.text(provider), .text(externalId)]).map(Self.purchaseRow)
    }

    /// The purchase whose provider payment is `paymentRef` (a Stripe invoice found by its PaymentIntent).
    public func externalPurchase(provider: String, paymentRef: String) throws -> ExternalPurchaseRow? {
        try db.queryOne("SELECT \(Self.purchaseColumns) FROM external_purchases WHERE provider = ? AND payment_ref = ? LIMIT 1",
                        [.text(provider), .text(paymentRef)]).map(Self.purchaseRow)
    }

    /// Inserts the purchase unless `(provider, externalId)` exists: false means it was reported before (409), and
    /// nothing was written.
    public func insertExternalPurchase(_ p: ExternalPurchaseRow) throws -> Bool {
        try db.execute("""
            INSERT INTO external_purchases (\(Self.purchaseColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (provider, external_id) DO NOTHING
            """, Self.purchaseValues(p)) > 0
    }

    /// Rewrites a stored purchase's changing fields (its customer and product once known, refunds, grant, applied).
    public func updateExternalPurchase(_ p: ExternalPurchaseRow) throws {
        let changed = try db.execute("""
            UPDATE external_purchases SET customer_id = ?, product_id = ?, product_kind = ?, refunded_total = ?, refunds = ?, grant_json = ?,
                applied = ?, external_purchase_id = ? WHERE provider = ? AND external_id = ?
            """, [SQLValue(p.customerId), SQLValue(p.productId), SQLValue(p.productKind), .integer(p.refundedTotal), .text(p.refunds.jsonString),
                  .text(p.grant.jsonString), .integer(p.applied ? 1 : 0), SQLValue(p.externalPurchaseId), .text(p.provider), .text(p.externalId)])
        precondition(changed == 1, "an external purchase is updated after it was stored")
    }

    static func purchaseValues(_ p: ExternalPurchaseRow) -> [SQLValue] {
        [.text(p.provider), .text(p.externalId), SQLValue(p.customerId), .text(p.bundleId), SQLValue(p.productId), SQLValue(p.productKind),
         .integer(p.price), .text(p.currency), .integer(p.purchasedAtMs), SQLValue(p.expiresAtMs), SQLValue(p.periodStartMs),
         SQLValue(p.subscriptionId), SQLValue(p.externalPurchaseId), SQLValue(p.paymentRef), .integer(p.refundedTotal), .text(p.refunds.jsonString),
         .text(p.grant.jsonString), .integer(p.applied ? 1 : 0), .integer(p.createdAtMs)]
    }

    /// The periods of a provider's subscription.
    public func externalPurchases(provider: String, subscriptionId: String) throws -> [ExternalPurchaseRow] {
        try db.query("""
            SELECT \(Self.purchaseColumns) FROM external_purchases WHERE provider = ? AND subscription_id = ? ORDER BY purchased_at_ms, external_id LIMIT ?
            """, [.text(provider), .text(subscriptionId), .integer(Int64(Self.externalRowsMax))]).map(Self.purchaseRow)
    }

    /// The purchases reported under an Apple external purchase token.
    public func externalPurchases(externalPurchaseId: String) throws -> [ExternalPurchaseRow] {
        try db.query("""
            SELECT \(Self.purchaseColumns) FROM external_purchases WHERE external_purchase_id = ? ORDER BY purchased_at_ms, external_id LIMIT ?
            """, [.text(externalPurchaseId), .integer(Int64(Self.externalRowsMax))]).map(Self.purchaseRow)
    }

    /// A customer's external purchases, newest first.
    public func externalPurchases(customerId: String, limit: Int) throws -> [ExternalPurchaseRow] {
        try db.query("""
            SELECT \(Self.purchaseColumns) FROM external_purchases WHERE customer_id = ? ORDER BY purchased_at_ms DESC, external_id LIMIT ?
            """, [.text(customerId), .integer(Int64(min(limit, Self.externalRowsMax)))]).map(Self.purchaseRow)
    }

    // MARK: Provider events

    /// Claims a provider's event id: false means it was applied before (a duplicate delivery), and nothing is written.
    public func claimExternalEvent(provider: String, eventId: String, bundleId: String, eventType: String, outcome: String) throws -> Bool {
        try db.execute("""
            INSERT INTO external_webhook_events (provider, event_id, bundle_id, event_type, received_at_ms, outcome) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (provider, event_id) DO NOTHING
            """, [.text(provider), .text(eventId), .text(bundleId), .text(eventType), .integer(nowMs), .text(outcome)]) > 0
    }

    // MARK: Subscriptions

    /// Keeps one observation of a subscription (one per event; a duplicate is ignored).
    public func addSubscriptionObservation(provider: String, subscriptionId: String, eventId: String, observation: JSONValue) throws {
        try db.execute("""
            INSERT INTO external_subscription_observations (provider, subscription_id, event_id, observation) VALUES (?, ?, ?, ?)
            ON CONFLICT (provider, subscription_id, event_id) DO NOTHING
            """, [.text(provider), .text(subscriptionId), .text(eventId), .text(observation.jsonString)])
    }

    public func subscriptionObservations(provider: String, subscriptionId: String) throws -> [JSONValue] {
        try db.query("""
            SELECT observation FROM external_subscription_observations WHERE provider = ? AND subscription_id = ? LIMIT ?
            """, [.text(provider), .text(subscriptionId), .integer(Int64(Self.externalRowsMax))])
            .compactMap { $0.string("observation").flatMap { try? JSONParser.parse($0) } }
    }

    public func externalSubscription(provider: String, subscriptionId: String) throws -> ExternalSubscriptionRow? {
        try db.queryOne("""
            SELECT bundle_id, customer_id, product_id, state FROM external_subscriptions WHERE provider = ? AND subscription_id = ?
            """, [.text(provider), .text(subscriptionId)]).map { r in
            ExternalSubscriptionRow(provider: provider, subscriptionId: subscriptionId, bundleId: r.string("bundle_id") ?? "",
                                    customerId: r.string("customer_id"), productId: r.string("product_id"),
                                    state: (try? JSONParser.parse(r.string("state") ?? "null")) ?? .null)
        }
    }

    public func storeExternalSubscription(_ s: ExternalSubscriptionRow) throws {
        try db.execute("""
            INSERT INTO external_subscriptions (provider, subscription_id, bundle_id, customer_id, product_id, state, updated_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (provider, subscription_id) DO UPDATE SET customer_id = excluded.customer_id, product_id = excluded.product_id,
                state = excluded.state, updated_at_ms = excluded.updated_at_ms
            """, [.text(s.provider), .text(s.subscriptionId), .text(s.bundleId), SQLValue(s.customerId), SQLValue(s.productId),
                  .text(s.state.jsonString), .integer(nowMs)])
    }

    // MARK: Entitlements the status reads

    /// Sets what the status engine reads of one external entitlement (`ExternalEntitlement.json`).
    public func setExternalEntitlement(source: String, id: String, customerId: String, entitlement: JSONValue) throws {
        try db.execute("UPDATE customers SET has_external = 1 WHERE customer_id = ? AND has_external = 0", [.text(customerId)])
        try db.execute("""
            INSERT INTO external_entitlements (source, entitlement_id, customer_id, entitlement, updated_at_ms) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (source, entitlement_id) DO UPDATE SET customer_id = excluded.customer_id, entitlement = excluded.entitlement,
                updated_at_ms = excluded.updated_at_ms
            """, [.text(source), .text(id), .text(customerId), .text(entitlement.jsonString), .integer(nowMs)])
    }

    /// The customer's external entitlements (read with its status inputs).
    public func externalEntitlements(_ customerId: String) throws -> [ExternalEntitlement] {
        try KakinStore.externalEntitlements(db, customerId)
    }

    // MARK: Apple external purchase tokens

    static let tokenColumns = """
        external_purchase_id, bundle_id, customer_id, token, token_type, token_created_at_ms, recorded_at_ms, report_due_ms, accepted, unreported_at_ms
        """

    static func tokenRow(_ r: SQLRow) -> ExternalTokenRow {
        ExternalTokenRow(
            externalPurchaseId: r.string("external_purchase_id") ?? "", bundleId: r.string("bundle_id") ?? "", customerId: r.string("customer_id"),
            token: (try? JSONParser.parse(r.string("token") ?? "null")) ?? .null, tokenType: r.string("token_type"),
            tokenCreatedAtMs: r.int("token_created_at_ms") ?? 0, recordedAtMs: r.int("recorded_at_ms") ?? 0, reportDueMs: r.int("report_due_ms"),
            accepted: (try? JSONParser.parse(r.string("accepted") ?? "{}")) ?? [:], unreportedAtMs: r.int("unreported_at_ms"))
    }

    public func externalToken(_ externalPurchaseId: String) throws -> ExternalTokenRow? {
        try db.queryOne("SELECT \(Self.tokenColumns) FROM external_purchase_tokens WHERE external_purchase_id = ?",
                        [.text(externalPurchaseId)]).map(Self.tokenRow)
    }

    /// Records a token unless known: false means it was recorded before (nothing written).
    public func insertExternalToken(_ t: ExternalTokenRow) throws -> Bool {
        try db.execute("""
            INSERT INTO external_purchase_tokens (\(Self.tokenColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (external_purchase_id) DO NOTHING
            """, [.text(t.externalPurchaseId), .text(t.bundleId), SQLValue(t.customerId), .text(t.token.jsonString), SQLValue(t.tokenType),
                  .integer(t.tokenCreatedAtMs), .integer(t.recordedAtMs), SQLValue(t.reportDueMs), .text(t.accepted.jsonString),
                  SQLValue(t.unreportedAtMs)]) > 0
    }

    /// Rewrites a token's changing fields: its customer, when a report is due, what Apple accepted, UNREPORTED.
    public func updateExternalToken(_ t: ExternalTokenRow) throws {
        try db.execute("""
            UPDATE external_purchase_tokens SET customer_id = ?, report_due_ms = ?, accepted = ?, unreported_at_ms = ? WHERE external_purchase_id = ?
            """, [SQLValue(t.customerId), SQLValue(t.reportDueMs), .text(t.accepted.jsonString), SQLValue(t.unreportedAtMs), .text(t.externalPurchaseId)])
    }

    /// A customer's tokens in the order they were recorded (the newest `externalRowsMax`).
    public func externalTokens(customerId: String) throws -> [ExternalTokenRow] {
        try db.query("""
            SELECT \(Self.tokenColumns) FROM external_purchase_tokens WHERE customer_id = ? ORDER BY recorded_at_ms, external_purchase_id LIMIT ?
            """, [.text(customerId), .integer(Int64(Self.externalRowsMax))]).map(Self.tokenRow)
    }

    /// Tokens whose report is due at `atMs`.
    public func externalTokensDue(atMs: Int64, limit: Int) throws -> [ExternalTokenRow] {
        try db.query("""
            SELECT \(Self.tokenColumns) FROM external_purchase_tokens WHERE report_due_ms IS NOT NULL AND report_due_ms <= ?
            ORDER BY report_due_ms LIMIT ?
            """, [.integer(atMs), .integer(Int64(limit))]).map(Self.tokenRow)
    }

    /// The earliest moment a token's report falls due (nil: none owed).
    public func nextExternalTokenDueMs() throws -> Int64? {
        try db.queryOne("SELECT MIN(report_due_ms) AS due FROM external_purchase_tokens WHERE report_due_ms IS NOT NULL", [])?.int("due")
    }

    // MARK: Reports

    static let reportColumns = "request_identifier, external_purchase_id, bundle_id, state, job, next_attempt_ms, created_at_ms"

    static func reportRow(_ r: SQLRow) -> ExternalReportRow {
        ExternalReportRow(requestIdentifier: r.string("request_identifier") ?? "", externalPurchaseId: r.string("external_purchase_id") ?? "",
                          bundleId: r.string("bundle_id") ?? "", state: r.string("state") ?? "",
                          job: (try? JSONParser.parse(r.string("job") ?? "null")) ?? .null, nextAttemptMs: r.int("next_attempt_ms"),
                          createdAtMs: r.int("created_at_ms") ?? 0)
    }

    /// Inserts or rewrites a report.
    public func storeExternalReport(_ report: ExternalReportRow) throws {
        try db.execute("""
            INSERT INTO external_purchase_reports (request_identifier, external_purchase_id, bundle_id, state, job, next_attempt_ms, created_at_ms, updated_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (request_identifier) DO UPDATE SET state = excluded.state, job = excluded.job, next_attempt_ms = excluded.next_attempt_ms,
                updated_at_ms = excluded.updated_at_ms
            """, [.text(report.requestIdentifier), .text(report.externalPurchaseId), .text(report.bundleId), .text(report.state),
                  .text(report.job.jsonString), SQLValue(report.nextAttemptMs), .integer(report.createdAtMs), .integer(nowMs)])
    }

    public func externalReport(_ requestIdentifier: String) throws -> ExternalReportRow? {
        try db.queryOne("SELECT \(Self.reportColumns) FROM external_purchase_reports WHERE request_identifier = ?",
                        [.text(requestIdentifier)]).map(Self.reportRow)
    }

    /// A token's reports, oldest first.
    public func externalReports(externalPurchaseId: String) throws -> [ExternalReportRow] {
        try db.query("""
            SELECT \(Self.reportColumns) FROM external_purchase_reports WHERE external_purchase_id = ? ORDER BY created_at_ms, request_identifier LIMIT ?
            """, [.text(externalPurchaseId), .integer(Int64(Self.externalRowsMax))]).map(Self.reportRow)
    }

    /// Reports to send at `atMs` (pending or corrected, their attempt due).
    public func externalReportsDue(atMs: Int64, limit: Int) throws -> [ExternalReportRow] {
        try db.query("""
            SELECT \(Self.reportColumns) FROM external_purchase_reports WHERE next_attempt_ms IS NOT NULL AND next_attempt_ms <= ?
            ORDER BY next_attempt_ms LIMIT ?
            """, [.integer(atMs), .integer(Int64(limit))]).map(Self.reportRow)
    }

    /// Reports in a state (`pending` lists corrected ones too), newest first.
    public func externalReports(states: [String], limit: Int) throws -> [ExternalReportRow] {
        guard !states.isEmpty else { return [] }
        let marks = states.map { _ in "?" }.joined(separator: ", ")
        return try db.query("""
            SELECT \(Self.reportColumns) FROM external_purchase_reports WHERE state IN (\(marks)) ORDER BY created_at_ms DESC, request_identifier LIMIT ?
            """, states.map { SQLValue.text($0) } + [.integer(Int64(limit))]).map(Self.reportRow)
    }

    /// The earliest moment a report's next attempt falls due (nil: none waiting).
    public func nextExternalReportAttemptMs() throws -> Int64? {
        try db.queryOne("SELECT MIN(next_attempt_ms) AS due FROM external_purchase_reports WHERE next_attempt_ms IS NOT NULL", [])?.int("due")
    }
}

extension KakinStore {
    static func externalEntitlements(_ db: SQLConnection, _ customerId: String) throws -> [ExternalEntitlement] {
        try db.query("SELECT entitlement FROM external_entitlements WHERE customer_id = ? LIMIT ?",
                     [.text(customerId), .integer(Int64(Records.externalRowsMax))])
            .compactMap { $0.string("entitlement").flatMap { try? JSONParser.parse($0) }.flatMap(ExternalEntitlement.init(json:)) }
    }
}
