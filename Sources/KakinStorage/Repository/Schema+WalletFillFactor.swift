extension Schema {
    /// Migration 10, PostgreSQL only: wallet pages keep half their room free, so a balance change writes its
    /// new row version on the same page (a heap-only update) and adds nothing to `wallets_pkey`. A wallet
    /// update that found its page full would insert into that small index — a page of it covers hundreds of
    /// customers, and every concurrent SERIALIZABLE writer holds a read lock on it from its own wallet
    /// lookups — so each one failed concurrent transactions of other customers as serialization conflicts.
    /// SQLite updates rows in place; it has nothing to run.
    static let walletFillFactorMigration = SQLMigration(
        version: 10, name: "wallet pages half free (PostgreSQL)", sql: "",
        postgresql: "ALTER TABLE wallets SET (fillfactor = 50);")
}
