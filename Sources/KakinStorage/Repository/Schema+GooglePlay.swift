extension Schema {
    /// Migration 25: Google Play.
    /// - `play_tokens`: every purchase token Kakin read from the Developer API, with the chain it belongs to (its own first
    ///   order, or the chain of its `linkedPurchaseToken`), its newest read (`resource`, `read_at_ms`) and its customer.
    /// - `play_orders`: the newest read of each order (a period of a chain: `GPA.…`, renewals `..0`, `..1`), the copy
    ///   the one apply keeps (`NewestCopy` by `read_at_ms`), with the revocation Play says (`revocation`, JSON).
    /// - `play_acknowledgements`: acknowledge (and consume) calls Kakin owes Play after a commit, as durable jobs
    ///   (`DurableJobTable`), retried until `deadline_ms` (Play's 3 days). States: `pending`, `done`, `expired`, `failed`.
    /// - `play_notifications`: the RTDN inbox, one row per Pub/Sub `messageId` (the dedupe key), stored before the push
    ///   is answered; a worker re-reads the purchase and applies it (`DurableJobTable`: `pending` until `applied`,
    ///   `ignored` or `dead`).
    static let googlePlayMigration = SQLMigration(version: 25, name: "google play tokens, orders, acknowledgements", sql: """
        CREATE TABLE play_tokens (
            purchase_token TEXT PRIMARY KEY,
            package_name TEXT NOT NULL,
            product_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            chain_id TEXT NOT NULL,
            linked_purchase_token TEXT,
            customer_id TEXT,
            resource TEXT NOT NULL,
            read_at_ms BIGINT NOT NULL
        );
        CREATE INDEX play_tokens_by_chain ON play_tokens(chain_id);
        CREATE INDEX play_tokens_by_linked ON play_tokens(linked_purchase_token) WHERE linked_purchase_token IS NOT NULL;
        CREATE TABLE play_orders (
            order_id TEXT PRIMARY KEY,
            purchase_token TEXT NOT NULL,
            chain_id TEXT NOT NULL,
            customer_id TEXT,
            read_at_ms BIGINT NOT NULL,
            resource TEXT NOT NULL,
            revocation TEXT
        );
        CREATE TABLE play_acknowledgements (
            purchase_token TEXT PRIMARY KEY,
            package_name TEXT NOT NULL,
            product_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            consume BIGINT NOT NULL,
            customer_id TEXT,
            deadline_ms BIGINT NOT NULL,
            state TEXT NOT NULL,
            attempts BIGINT NOT NULL,
            next_attempt_ms BIGINT NOT NULL,
            lease_owner TEXT,
            lease_until_ms BIGINT,
            last_error TEXT,
            finished_at_ms BIGINT,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX play_acknowledgements_due ON play_acknowledgements(next_attempt_ms) WHERE state = 'pending';
        CREATE TABLE play_notifications (
            message_id TEXT PRIMARY KEY,
            package_name TEXT NOT NULL,
            purchase_token TEXT,
            body TEXT NOT NULL,
            published_at_ms BIGINT,
            received_at_ms BIGINT NOT NULL,
            customer_id TEXT,
            state TEXT NOT NULL,
            attempts BIGINT NOT NULL,
            next_attempt_ms BIGINT NOT NULL,
            lease_owner TEXT,
            lease_until_ms BIGINT,
            last_error TEXT,
            finished_at_ms BIGINT
        );
        CREATE INDEX play_notifications_due ON play_notifications(next_attempt_ms) WHERE state = 'pending';
        CREATE INDEX play_notifications_by_token ON play_notifications(purchase_token);
        """)

    /// Migration 27: a Play chain's orders by chain, a customer's tokens by customer (the desk's order lookup and customer
    /// page list a chain's history).
    static let googlePlayChainsMigration = SQLMigration(version: 27, name: "google play orders by chain, tokens by customer", sql: """
        CREATE INDEX play_orders_by_chain ON play_orders(chain_id);
        CREATE INDEX play_tokens_by_customer ON play_tokens(customer_id) WHERE customer_id IS NOT NULL;
        """)

    /// Migration 28: what each Play order charged, from the Orders API (`orders.get`, read after the apply's commit):
    /// `charge` the `Order` resource, read at `charge_read_ms`, its `total` in `charge_total_milli` / `charge_currency` (what
    /// the unused-balance report values Play's coins at); while it is unread, `charge_attempts` and `charge_next_ms` pace
    /// the reads (an order stored before this migration is due at once).
    static let googlePlayChargesMigration = SQLMigration(version: 28, name: "google play order charges", sql: """
        ALTER TABLE play_orders ADD COLUMN charge TEXT;
        ALTER TABLE play_orders ADD COLUMN charge_read_ms BIGINT;
        ALTER TABLE play_orders ADD COLUMN charge_total_milli BIGINT;
        ALTER TABLE play_orders ADD COLUMN charge_currency TEXT;
        ALTER TABLE play_orders ADD COLUMN charge_attempts BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE play_orders ADD COLUMN charge_next_ms BIGINT NOT NULL DEFAULT 0;
        CREATE INDEX play_orders_charge_due ON play_orders(charge_next_ms) WHERE charge IS NULL;
        """)
}
