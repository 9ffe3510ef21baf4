extension Schema {
    /// Migration 11: each stored transaction and renewal info keeps, beside its signed copy, the decoded fields the
    /// status engine reads (`StoredStatusFields`), so a status read parses a few hundred bytes per row and decodes
    /// no JWS. Rows stored before keep NULL and are read from their JWS until a newer copy replaces them.
    static let statusFieldsMigration = SQLMigration(version: 11, name: "decoded status fields beside the signed copies", sql: """
        ALTER TABLE transactions ADD COLUMN status_json TEXT;
        ALTER TABLE renewal_infos ADD COLUMN status_json TEXT;
        """)
}
