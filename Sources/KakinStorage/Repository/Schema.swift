/// Kakin's tables. Idempotency is enforced here, by unique keys written in the same database transaction
/// as the effect they guard:
/// - `applied_transactions.transaction_id`: a transaction is applied (201) once; every later attempt is 409.
/// - `ledger_entries.effect_key`: each coin movement an App Store transaction causes ("purchase:<txid>",
///   "refund:<txid>:<n>", …) exists once.
/// - `idempotency_keys (customer_id, scope, key)`: each spend and grant exists once, and its answer is replayed.
/// Indexes are partial where most rows don't need them: every index is a page written per commit.
/// `wallets` caches each balance; the ledger check proves it equals the sum of the customer's entries.
/// `transactions.status_input` marks the rows a status read needs (`KakinStore+StatusInputs.swift`).
///
/// Migrations are portable SQL (both engines run `sql`). Migration 1 predates PostgreSQL support and has a
/// PostgreSQL form: `BIGINT` for `INTEGER`, identity columns for `AUTOINCREMENT`, `BYTEA` for `BLOB`, and
/// `COLLATE "C"` on its text columns so text compares byte by byte as in SQLite (a JWS tie-break or an
/// `ORDER BY customer_id` gives the same answer on both engines, whatever the database's locale).
/// Migration 5 adds who claimed a notification (several processes share the inbox) and named leases
/// (one process at a time runs a periodic job such as the Notification History recovery). Migration 9 keeps a
/// notification's signed body apart from its state (`Schema+NotificationBodies.swift`).
enum Schema {
    static let migrations: [SQLMigration] = [
        SQLMigration(version: 1, name: "customers, transactions, ledger", sql: """
            CREATE TABLE customers (
                customer_id TEXT PRIMARY KEY,
                app_account_token TEXT NOT NULL UNIQUE,
                created_at_ms INTEGER NOT NULL
            );
            CREATE TABLE wallets (
                customer_id TEXT PRIMARY KEY REFERENCES customers(customer_id),
                paid INTEGER NOT NULL,
                free INTEGER NOT NULL,
                updated_at_ms INTEGER NOT NULL
            );
            CREATE TABLE ledger_entries (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                entry_id TEXT NOT NULL UNIQUE,
                customer_id TEXT NOT NULL REFERENCES customers(customer_id),
                at_ms INTEGER NOT NULL,
                kind TEXT NOT NULL,
                paid_delta INTEGER NOT NULL,
                free_delta INTEGER NOT NULL,
                paid_after INTEGER NOT NULL,
                free_after INTEGER NOT NULL,
                reference TEXT NOT NULL,
                effect_key TEXT,
                item TEXT,
                recipient TEXT,
                price_milli INTEGER,
                currency TEXT,
                detail TEXT
            );
            CREATE INDEX ledger_by_customer ON ledger_entries(customer_id, seq);
            CREATE UNIQUE INDEX ledger_by_effect ON ledger_entries(effect_key) WHERE effect_key IS NOT NULL;
            CREATE INDEX ledger_by_recipient ON ledger_entries(recipient, customer_id) WHERE recipient IS NOT NULL;
            CREATE INDEX ledger_by_transaction ON ledger_entries(reference, customer_id) WHERE kind IN ('purchase', 'refund', 'refundReversed');
            CREATE TABLE transactions (
                transaction_id TEXT PRIMARY KEY,
                original_transaction_id TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                product_id TEXT NOT NULL,
                product_type TEXT NOT NULL,
                environment TEXT NOT NULL,
                purchase_date_ms INTEGER NOT NULL,
                expires_date_ms INTEGER,
                revocation_date_ms INTEGER,
                signed_date_ms INTEGER NOT NULL,
                app_account_token TEXT,
                jws TEXT NOT NULL,
                customer_id TEXT,
                first_seen_ms INTEGER NOT NULL,
                updated_ms INTEGER NOT NULL
            );
            CREATE INDEX transactions_by_original ON transactions(original_transaction_id);
            CREATE INDEX transactions_by_customer ON transactions(customer_id, product_type);
            CREATE TABLE original_links (
                original_transaction_id TEXT PRIMARY KEY,
                customer_id TEXT NOT NULL REFERENCES customers(customer_id),
                linked_at_ms INTEGER NOT NULL
            );
            CREATE TABLE applied_transactions (
                transaction_id TEXT PRIMARY KEY,
                customer_id TEXT NOT NULL REFERENCES customers(customer_id),
                applied_at_ms INTEGER NOT NULL,
                via TEXT NOT NULL,
                purchase_process_id TEXT,
                grant_json TEXT NOT NULL
            );
            CREATE TABLE idempotency_keys (
                customer_id TEXT NOT NULL,
                scope TEXT NOT NULL,
                key TEXT NOT NULL,
                request TEXT NOT NULL,
                status INTEGER NOT NULL,
                response BLOB NOT NULL,
                created_at_ms INTEGER NOT NULL,
                PRIMARY KEY (customer_id, scope, key)
            ) WITHOUT ROWID;
            CREATE TABLE events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                customer_id TEXT,
                at_ms INTEGER NOT NULL,
                kind TEXT NOT NULL,
                reference TEXT,
                detail TEXT NOT NULL
            );
            CREATE INDEX events_by_customer ON events(customer_id, seq);
            CREATE TABLE renewal_infos (
                original_transaction_id TEXT PRIMARY KEY,
                signed_date_ms INTEGER NOT NULL,
                environment TEXT NOT NULL,
                jws TEXT NOT NULL,
                updated_ms INTEGER NOT NULL
            );
            CREATE TABLE notifications (
                notification_uuid TEXT PRIMARY KEY,
                notification_type TEXT NOT NULL,
                subtype TEXT,
                signed_date_ms INTEGER NOT NULL,
                environment TEXT,
                bundle_id TEXT,
                received_at_ms INTEGER NOT NULL,
                source TEXT NOT NULL,
                jws TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                next_attempt_ms INTEGER NOT NULL,
                last_error TEXT,
                applied_at_ms INTEGER,
                original_transaction_id TEXT,
                customer_id TEXT
            );
            CREATE INDEX notifications_due ON notifications(state, next_attempt_ms);
            CREATE INDEX notifications_by_customer ON notifications(customer_id, signed_date_ms);
            CREATE TABLE sync_state (
                name TEXT PRIMARY KEY,
                value TEXT NOT NULL,
                updated_ms INTEGER NOT NULL
            );
            """, postgresql: """
            CREATE TABLE customers (
                customer_id TEXT COLLATE "C" PRIMARY KEY,
                app_account_token TEXT COLLATE "C" NOT NULL UNIQUE,
                created_at_ms BIGINT NOT NULL
            );
            CREATE TABLE wallets (
                customer_id TEXT COLLATE "C" PRIMARY KEY REFERENCES customers(customer_id),
                paid BIGINT NOT NULL,
                free BIGINT NOT NULL,
                updated_at_ms BIGINT NOT NULL
            );
            CREATE TABLE ledger_entries (
                seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                entry_id TEXT COLLATE "C" NOT NULL UNIQUE,
                customer_id TEXT COLLATE "C" NOT NULL REFERENCES customers(customer_id),
                at_ms BIGINT NOT NULL,
                kind TEXT COLLATE "C" NOT NULL,
                paid_delta BIGINT NOT NULL,
                free_delta BIGINT NOT NULL,
                paid_after BIGINT NOT NULL,
                free_after BIGINT NOT NULL,
                reference TEXT COLLATE "C" NOT NULL,
                effect_key TEXT COLLATE "C",
                item TEXT COLLATE "C",
                recipient TEXT COLLATE "C",
                price_milli BIGINT,
                currency TEXT COLLATE "C",
                detail TEXT COLLATE "C"
            );
            CREATE INDEX ledger_by_customer ON ledger_entries(customer_id, seq);
            CREATE UNIQUE INDEX ledger_by_effect ON ledger_entries(effect_key) WHERE effect_key IS NOT NULL;
            CREATE INDEX ledger_by_recipient ON ledger_entries(recipient, customer_id) WHERE recipient IS NOT NULL;
            CREATE INDEX ledger_by_transaction ON ledger_entries(reference, customer_id) WHERE kind IN ('purchase', 'refund', 'refundReversed');
            CREATE TABLE transactions (
                transaction_id TEXT COLLATE "C" PRIMARY KEY,
                original_transaction_id TEXT COLLATE "C" NOT NULL,
                bundle_id TEXT COLLATE "C" NOT NULL,
                product_id TEXT COLLATE "C" NOT NULL,
                product_type TEXT COLLATE "C" NOT NULL,
                environment TEXT COLLATE "C" NOT NULL,
                purchase_date_ms BIGINT NOT NULL,
                expires_date_ms BIGINT,
                revocation_date_ms BIGINT,
                signed_date_ms BIGINT NOT NULL,
                app_account_token TEXT COLLATE "C",
                jws TEXT COLLATE "C" NOT NULL,
                customer_id TEXT COLLATE "C",
                first_seen_ms BIGINT NOT NULL,
                updated_ms BIGINT NOT NULL
            );
            CREATE INDEX transactions_by_original ON transactions(original_transaction_id);
            CREATE INDEX transactions_by_customer ON transactions(customer_id, product_type);
            CREATE TABLE original_links (
                original_transaction_id TEXT COLLATE "C" PRIMARY KEY,
                customer_id TEXT COLLATE "C" NOT NULL REFERENCES customers(customer_id),
                linked_at_ms BIGINT NOT NULL
            );
            CREATE TABLE applied_transactions (
                transaction_id TEXT COLLATE "C" PRIMARY KEY,
                customer_id TEXT COLLATE "C" NOT NULL REFERENCES customers(customer_id),
                applied_at_ms BIGINT NOT NULL,
                via TEXT COLLATE "C" NOT NULL,
                purchase_process_id TEXT COLLATE "C",
                grant_json TEXT COLLATE "C" NOT NULL
            );
            CREATE TABLE idempotency_keys (
                customer_id TEXT COLLATE "C" NOT NULL,
                scope TEXT COLLATE "C" NOT NULL,
                key TEXT COLLATE "C" NOT NULL,
                request TEXT COLLATE "C" NOT NULL,
                status BIGINT NOT NULL,
                response BYTEA NOT NULL,
                created_at_ms BIGINT NOT NULL,
                PRIMARY KEY (customer_id, scope, key)
            );
            CREATE TABLE events (
                seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                customer_id TEXT COLLATE "C",
                at_ms BIGINT NOT NULL,
                kind TEXT COLLATE "C" NOT NULL,
                reference TEXT COLLATE "C",
                detail TEXT COLLATE "C" NOT NULL
            );
            CREATE INDEX events_by_customer ON events(customer_id, seq);
            CREATE TABLE renewal_infos (
                original_transaction_id TEXT COLLATE "C" PRIMARY KEY,
                signed_date_ms BIGINT NOT NULL,
                environment TEXT COLLATE "C" NOT NULL,
                jws TEXT COLLATE "C" NOT NULL,
                updated_ms BIGINT NOT NULL
            );
            CREATE TABLE notifications (
                notification_uuid TEXT COLLATE "C" PRIMARY KEY,
                notification_type TEXT COLLATE "C" NOT NULL,
                subtype TEXT COLLATE "C",
                signed_date_ms BIGINT NOT NULL,
                environment TEXT COLLATE "C",
                bundle_id TEXT COLLATE "C",
                received_at_ms BIGINT NOT NULL,
                source TEXT COLLATE "C" NOT NULL,
                jws TEXT COLLATE "C" NOT NULL,
                state TEXT COLLATE "C" NOT NULL,
                attempts BIGINT NOT NULL,
                next_attempt_ms BIGINT NOT NULL,
                last_error TEXT COLLATE "C",
                applied_at_ms BIGINT,
                original_transaction_id TEXT COLLATE "C",
                customer_id TEXT COLLATE "C"
            );
            CREATE INDEX notifications_due ON notifications(state, next_attempt_ms);
            CREATE INDEX notifications_by_customer ON notifications(customer_id, signed_date_ms);
            CREATE TABLE sync_state (
                name TEXT COLLATE "C" PRIMARY KEY,
                value TEXT COLLATE "C" NOT NULL,
                updated_ms BIGINT NOT NULL
            );
            """),
        // The support desk: admin sign-in sessions (shared by every Kakin process), the recent errors that
        // support looks up by request ID, and indexes for the searches and the notification inbox's lists.
        SQLMigration(version: 3, name: "support desk", sql: """
            CREATE TABLE admin_sessions (
                token_sha256 TEXT PRIMARY KEY,
                csrf_token TEXT NOT NULL,
                actor TEXT NOT NULL,
                created_at_ms BIGINT NOT NULL,
                expires_at_ms BIGINT NOT NULL
            );
            CREATE INDEX admin_sessions_by_expiry ON admin_sessions(expires_at_ms);
            CREATE TABLE recent_errors (
                error_key TEXT PRIMARY KEY,
                request_id TEXT NOT NULL,
                at_ms BIGINT NOT NULL,
                error_id TEXT NOT NULL,
                code TEXT NOT NULL,
                http_status BIGINT NOT NULL,
                message TEXT NOT NULL,
                method TEXT NOT NULL,
                path TEXT NOT NULL,
                customer_id TEXT,
                purchase_process_id TEXT,
                transaction_id TEXT,
                detail TEXT
            );
            CREATE INDEX recent_errors_by_request ON recent_errors(request_id);
            CREATE INDEX recent_errors_by_time ON recent_errors(at_ms);
            CREATE INDEX recent_errors_by_error_id ON recent_errors(error_id, at_ms);
            CREATE INDEX recent_errors_by_customer ON recent_errors(customer_id, at_ms) WHERE customer_id IS NOT NULL;
            CREATE INDEX recent_errors_by_process ON recent_errors(purchase_process_id) WHERE purchase_process_id IS NOT NULL;
            CREATE INDEX recent_errors_by_transaction ON recent_errors(transaction_id) WHERE transaction_id IS NOT NULL;
            CREATE INDEX applied_by_process ON applied_transactions(purchase_process_id) WHERE purchase_process_id IS NOT NULL;
            CREATE INDEX notifications_by_state_received ON notifications(state, received_at_ms);
            CREATE INDEX notifications_by_original ON notifications(original_transaction_id) WHERE original_transaction_id IS NOT NULL;
            """),
        SQLMigration(version: 4, name: "status inputs, links by customer", sql: """
            ALTER TABLE transactions ADD COLUMN status_input BIGINT NOT NULL DEFAULT 1;
            CREATE INDEX transactions_status_inputs ON transactions(customer_id) WHERE status_input = 1;
            CREATE INDEX original_links_by_customer ON original_links(customer_id);
            """),
        SQLMigration(version: 5, name: "claims and leases for several processes", sql: """
            ALTER TABLE notifications ADD COLUMN claimed_by TEXT;
            CREATE TABLE leases (
                name TEXT PRIMARY KEY,
                owner TEXT NOT NULL,
                until_ms BIGINT NOT NULL
            );
            """),
        consumptionRequestsMigration,
        appAccountTokenRequestsMigration,
        notificationBodiesMigration,
        walletFillFactorMigration,
        statusFieldsMigration,
        eventsMigration,
        statusViewsMigration,
        externalMigration,
        apple2026Migration,
        metricsMigration,
        consumableInputsMigration,
        metricSourcesMigration,
        offeringsMigration,
        importsMigration,
        googlePlayMigration,
        webhookDeliveryClaimsMigration,
        googlePlayChainsMigration,
        googlePlayChargesMigration,
        ledgerPurchaseKindsMigration,
    ]
}
