import KakinCore

/// A support person's signed-in session on `/admin/`. Only the SHA-256 of the cookie's token is stored, so
/// reading the database never yields a usable session. In the database so every Kakin process honours it.
public struct AdminSession: Sendable, Hashable {
    /// Lowercase hex SHA-256 of the session token the browser holds.
    public var tokenSHA256: String
    /// Every form POST must carry it.
    public var csrfToken: String
    /// Who acts: recorded with every action in the customer's timeline.
    public var actor: String
    public var createdAtMs: Int64
    public var expiresAtMs: Int64

    public init(tokenSHA256: String, csrfToken: String, actor: String, createdAtMs: Int64, expiresAtMs: Int64) {
        self.tokenSHA256 = tokenSHA256
        self.csrfToken = csrfToken
        self.actor = actor
        self.createdAtMs = createdAtMs
        self.expiresAtMs = expiresAtMs
    }
}

extension KakinStore {
    /// Stores a new session and drops expired ones.
    public func createAdminSession(_ session: AdminSession) async throws(KakinError) {
        try await write { db in
            try db.execute("DELETE FROM admin_sessions WHERE expires_at_ms <= ?", [.integer(session.createdAtMs)])
            try db.execute("""
                INSERT INTO admin_sessions (token_sha256, csrf_token, actor, created_at_ms, expires_at_ms) VALUES (?, ?, ?, ?, ?)
                """, [.text(session.tokenSHA256), .text(session.csrfToken), .text(session.actor), .integer(session.createdAtMs),
                      .integer(session.expiresAtMs)])
        }
    }

    /// The session, if it exists and has not expired at `nowMs`.
    public func adminSession(tokenSHA256: String, nowMs: Int64) async throws(KakinError) -> AdminSession? {
        try await read { db in
            guard let r = try db.queryOne("""
                SELECT token_sha256, csrf_token, actor, created_at_ms, expires_at_ms FROM admin_sessions
                WHERE token_sha256 = ? AND expires_at_ms > ?
                """, [.text(tokenSHA256), .integer(nowMs)]) else { return nil }
            return AdminSession(tokenSHA256: r.string("token_sha256") ?? "", csrfToken: r.string("csrf_token") ?? "",
                                actor: r.string("actor") ?? "", createdAtMs: r.int("created_at_ms") ?? 0,
                                expiresAtMs: r.int("expires_at_ms") ?? 0)
        }
    }

    public func deleteAdminSession(tokenSHA256: String) async throws(KakinError) {
        try await write { db in try db.execute("DELETE FROM admin_sessions WHERE token_sha256 = ?", [.text(tokenSHA256)]) }
    }
}
