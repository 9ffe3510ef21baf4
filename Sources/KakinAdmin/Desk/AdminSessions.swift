import HTTPServer
import KakinCore
import KakinCrypto
import KakinStorage

/// Signing in to `/admin/`: an `admin`-scope API key (checked by its SHA-256, like the API does) is exchanged
/// for a session cookie — `HttpOnly`, `SameSite=Strict`, `Secure` unless Kakin listens on loopback without a
/// TLS proxy in front, expiring after `sessionLifetimeMs`. Sessions live in the database (only their
/// token's hash), so every Kakin process honours them. Every form carries the session's CSRF token.
extension SupportDesk {
    static let sessionCookie = "kakin_admin"
    /// Double-submit token of the sign-in form (there is no session yet to hold one).
    static let signInCookie = "kakin_admin_signin"

    public var isOpen: Bool { settings.adminKeyHashes == nil }

    /// The signed-in session of a request, or local mode's implicit one; nil when signing in is needed.
    public func session(for request: HTTPRequest) async -> AdminSession? {
        if isOpen {
            return AdminSession(tokenSHA256: "", csrfToken: localFormToken, actor: "local", createdAtMs: 0, expiresAtMs: .max)
        }
        guard let token = Cookies.value(Self.sessionCookie, in: request), !token.isEmpty, token.utf8.count <= 128 else { return nil }
        return try? await store.adminSession(tokenSHA256: Tokens.sha256Hex(token), nowMs: clock.nowMs())
    }

    /// Checks the key and the name, and creates a session. Returns the cookie's token.
    func signIn(name: String, key: String) async throws(KakinError) -> (token: String, session: AdminSession) {
        let name = name.trimmingSpaces()
        guard !name.isEmpty, name.count <= Self.actorNameLengthMax else {
            throw KakinError(.invalidField, "Your name must be 1 to \(Self.actorNameLengthMax) characters: it is recorded with every action.")
        }
        let keyHash = SHA256Hash.digest(Array(key.utf8))
        guard let admins = settings.adminKeyHashes, key.utf8.count <= Self.keyLengthMax, admins.contains(keyHash) else {
            throw KakinError(.adminKeyRefused)
        }
        let now = clock.nowMs()
        let token = Tokens.random()
        let session = AdminSession(tokenSHA256: Tokens.sha256Hex(token), csrfToken: Tokens.random(),
                                   actor: "\(name) (key \(Hex.encode(Array(keyHash.prefix(4)))))", createdAtMs: now,
                                   expiresAtMs: now + settings.sessionLifetimeMs)
        try await services.supportRecords.startSession(session)
        return (token, session)
    }

    func endSession(_ request: HTTPRequest) async {
        guard let token = Cookies.value(Self.sessionCookie, in: request), !token.isEmpty, token.utf8.count <= 128 else { return }
        try? await services.supportRecords.endSession(tokenSHA256: Tokens.sha256Hex(token))
    }

    /// Whether cookies set in answer to this request must be `Secure`.
    func secureCookies(_ request: HTTPRequest) -> Bool {
        !settings.listensOnLoopback || request.headers["X-Forwarded-Proto"]?.lowercased() == "https"
    }

    func cookie(_ name: String, _ value: String, maxAgeSeconds: Int64, request: HTTPRequest) -> String {
        "\(name)=\(value); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(maxAgeSeconds)" + (secureCookies(request) ? "; Secure" : "")
    }
}

enum Tokens {
    /// 32 random bytes, base64url (43 characters).
    static func random() -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for _ in 0..<4 {
            var word: UInt64 = rng.next()
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return Base64.urlEncode(bytes)
    }

    static func sha256Hex(_ s: String) -> String { Hex.encode(SHA256Hash.digest(Array(s.utf8))) }

    static func equal(_ a: String, _ b: String) -> Bool { HMACSHA256.constantTimeEqual(Array(a.utf8), Array(b.utf8)) }
}

enum Cookies {
    /// The value of a cookie in the request's `Cookie` header(s).
    static func value(_ name: String, in request: HTTPRequest) -> String? {
        for header in request.headers.values("Cookie") {
            for pair in header.split(separator: ";") {
                let p = pair.drop(while: { $0 == " " })
                if let eq = p.firstIndex(of: "="), p[..<eq] == name { return String(p[p.index(after: eq)...]) }
            }
        }
        return nil
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
