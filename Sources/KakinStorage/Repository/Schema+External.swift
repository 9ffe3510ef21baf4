extension Schema {
    /// Migration 14: purchases outside the App Store (`Records+External.swift`).
    ///
    /// - `ledger_entries.source`: NULL for the App Store, else the provider (`stripe`, `web`, …) that sold the coins.
    /// - `external_purchases`: one row per purchase a provider reported, unique by `(provider, external_id)`: the 201/409
    ///   fact of the generic source and of Stripe (a Checkout payment, one paid invoice of a subscription). A row whose
    ///   customer or product is not known yet (`applied` 0: an invoice that arrived before its subscription named the
    ///   customer) is applied when they are.
    /// - `external_webhook_events`: each provider event applied once, unique by `(provider, event_id)`, written in the
    ///   same transaction as its effects (a duplicate delivery changes nothing).
    /// - `external_subscription_observations` / `external_subscriptions`: every observation of a subscription's state
    ///   (one per event) and the state merged from all of them (`ExternalSubscriptionState`, order-free).
    /// - `external_entitlements`: what the status engine reads beside the App Store's transactions, one row per
    ///   (source, entitlement), kept by the writes that change it (`ExternalEntitlement` JSON). `customers.has_external`
    ///   says a customer has any, so a status read of an App Store-only customer (nearly all) costs no extra query.
    /// - `external_purchase_tokens`: Apple's external purchase tokens the app received, with their customer, when a
    ///   report is due (`report_due_ms`, NULL when nothing is owed) and what Apple accepted so far.
    /// - `external_purchase_reports`: each report on its way to Apple (`ExternalPurchaseReportJob`), by its
    ///   `requestIdentifier`.
    static let externalMigration = SQLMigration(version: 14, name: "purchases outside the App Store",
                                                sql: externalSQL(dialect: .sqlite), postgresql: externalSQL(dialect: .postgresql))

    private static func externalSQL(dialect: SQLDialect) -> String {
        let text = dialect == .postgresql ? "TEXT COLLATE \"C\"" : "TEXT"
        return """
            ALTER TABLE ledger_entries ADD COLUMN source \(text);
            ALTER TABLE customers ADD COLUMN has_external BIGINT NOT NULL DEFAULT 0;
            CREATE TABLE external_purchases (
                provider \(text) NOT NULL,
                external_id \(text) NOT NULL,
                customer_id \(text),
                bundle_id \(text) NOT NULL,
                product_id \(text),
                product_kind \(text),
                price BIGINT NOT NULL,
                currency \(text) NOT NULL,
                purchased_at_ms BIGINT NOT NULL,
                expires_at_ms BIGINT,
                period_start_ms BIGINT,
                subscription_id \(text),
                external_purchase_id \(text),
                payment_ref \(text),
                refunded_total BIGINT NOT NULL,
                refunds \(text) NOT NULL,
                grant_json \(text) NOT NULL,
                applied BIGINT NOT NULL,
                created_at_ms BIGINT NOT NULL,
                PRIMARY KEY (provider, external_id)
            );
            CREATE INDEX external_purchases_by_customer ON external_purchases(customer_id, purchased_at_ms);
            CREATE INDEX external_purchases_by_subscription ON external_purchases(provider, subscription_id) WHERE subscription_id IS NOT NULL;
            CREATE INDEX external_purchases_by_token ON external_purchases(external_purchase_id) WHERE external_purchase_id IS NOT NULL;
            CREATE INDEX external_purchases_by_payment ON external_purchases(provider, payment_ref) WHERE payment_ref IS NOT NULL;
            CREATE TABLE external_webhook_events (
                provider \(text) NOT NULL,
                event_id \(text) NOT NULL,
                bundle_id \(text) NOT NULL,
                event_type \(text) NOT NULL,
                received_at_ms BIGINT NOT NULL,
                outcome \(text) NOT NULL,
                PRIMARY KEY (provider, event_id)
            );
            CREATE TABLE external_subscription_observations (
                provider \(text) NOT NULL,
                subscription_id \(text) NOT NULL,
                event_id \(text) NOT NULL,
                observation \(text) NOT NULL,
                PRIMARY KEY (provider, subscription_id, event_id)
            );
            CREATE TABLE external_subscriptions (
                provider \(text) NOT NULL,
                subscription_id \(text) NOT NULL,
                bundle_id \(text) NOT NULL,
                customer_id \(text),
                product_id \(text),
                state \(text) NOT NULL,
                updated_at_ms BIGINT NOT NULL,
                PRIMARY KEY (provider, subscription_id)
            );
            CREATE TABLE external_entitlements (
                source \(text) NOT NULL,
                entitlement_id \(text) NOT NULL,
                customer_id \(text) NOT NULL,
                entitlement \(text) NOT NULL,
                updated_at_ms BIGINT NOT NULL,
                PRIMARY KEY (source, entitlement_id)
            );
            CREATE INDEX external_entitlements_by_customer ON external_entitlements(customer_id);
            CREATE TABLE external_purchase_tokens (
                external_purchase_id \(text) PRIMARY KEY,
                bundle_id \(text) NOT NULL,
                customer_id \(text),
                token \(text) NOT NULL,
                token_type \(text),
                token_created_at_ms BIGINT NOT NULL,
                recorded_at_ms BIGINT NOT NULL,
                report_due_ms BIGINT,
                accepted \(text) NOT NULL,
                unreported_at_ms BIGINT
            );
            CREATE INDEX external_purchase_tokens_due ON external_purchase_tokens(report_due_ms) WHERE report_due_ms IS NOT NULL;
            CREATE INDEX external_purchase_tokens_by_customer ON external_purchase_tokens(customer_id, recorded_at_ms);
            CREATE TABLE external_purchase_reports (
                request_identifier \(text) PRIMARY KEY,
                external_purchase_id \(text) NOT NULL,
                bundle_id \(text) NOT NULL,
                state \(text) NOT NULL,
                job \(text) NOT NULL,
                next_attempt_ms BIGINT,
                created_at_ms BIGINT NOT NULL,
                updated_at_ms BIGINT NOT NULL
            );
            CREATE INDEX external_purchase_reports_due ON external_purchase_reports(next_attempt_ms) WHERE next_attempt_ms IS NOT NULL;
            CREATE INDEX external_purchase_reports_by_token ON external_purchase_reports(external_purchase_id, created_at_ms);
            CREATE INDEX external_purchase_reports_by_state ON external_purchase_reports(state, created_at_ms);
            """
    }
}
