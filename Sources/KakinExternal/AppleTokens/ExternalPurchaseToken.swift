import KakinCore

/// `tokenType` of a custom link token (`ExternalPurchaseCustomLink.token(for:)`). EU apps get ACQUISITION and
/// SERVICES tokens; Japan's and Brazil's IN_APP (an alternative payment provider inside the app) and LINK_OUT
/// (a purchase on the web). Tokens from `ExternalPurchase` (the notice sheet) and `ExternalPurchaseLink` have none.
public struct ExternalPurchaseTokenType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let acquisition = Self(rawValue: "ACQUISITION")
    public static let services = Self(rawValue: "SERVICES")
    public static let inApp = Self(rawValue: "IN_APP")
    public static let linkOut = Self(rawValue: "LINK_OUT")
    public static let known: [Self] = [.acquisition, .services, .inApp, .linkOut]

    /// The EU custom link types: one active token per period, refreshed tokens share its dates, DUPLICATE_TOKEN
    /// applies.
    public var isPeriodToken: Bool { self == .acquisition || self == .services }
}

/// An external purchase token as the app (or the website, from its URL) received it: Base64URL-encoded JSON with
/// `appAppleId`, `bundleId`, `tokenCreationDate`, `externalPurchaseId` and, for custom link tokens, `tokenType`
/// and `tokenExpirationDate` ("Receiving and decoding external purchase tokens"). The token is not signed: what
/// makes it Apple's is that Apple knows its `externalPurchaseId` when Kakin reports it.
public struct ExternalPurchaseToken: Sendable, Hashable {
    /// Apple notifies EXTERNAL_PURCHASE_TOKEN/UNREPORTED this long after creating a token without an expiration
    /// date ("Reporting unrecognized and transactionless tokens": 10 days).
    public static let unreportedAfterMs: Int64 = 10 * 86_400_000

    public var externalPurchaseId: String
    public var appAppleId: Int64
    public var bundleId: String
    public var tokenCreationDateMs: Int64
    public var tokenType: ExternalPurchaseTokenType?
    public var tokenExpirationDateMs: Int64?
    /// The decoded JSON, unknown fields included.
    public var raw: JSONValue

    public init(externalPurchaseId: String, appAppleId: Int64, bundleId: String, tokenCreationDateMs: Int64,
                tokenType: ExternalPurchaseTokenType? = nil, tokenExpirationDateMs: Int64? = nil) {
        self.externalPurchaseId = externalPurchaseId
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.tokenCreationDateMs = tokenCreationDateMs
        self.tokenType = tokenType
        self.tokenExpirationDateMs = tokenExpirationDateMs
        var o: [String: JSONValue] = [
            "externalPurchaseId": .string(externalPurchaseId), "appAppleId": .int(appAppleId), "bundleId": .string(bundleId),
            "tokenCreationDate": .int(tokenCreationDateMs),
        ]
        if let tokenType { o["tokenType"] = .string(tokenType.rawValue) }
        if let tokenExpirationDateMs { o["tokenExpirationDate"] = .int(tokenExpirationDateMs) }
        raw = .object(o)
    }

    /// Decodes the token string (Base64URL or Base64, padded or not, surrounding white space ignored).
    /// - Throws: KKN-3070 for anything that is not a token's JSON.
    public init(token: String) throws(KakinError) {
        var bytes = Array(token.utf8)
        while let last = bytes.last, last == 0x20 || last == 0x0A || last == 0x0D || last == 0x09 { bytes.removeLast() }
        while let first = bytes.first, first == 0x20 || first == 0x0A || first == 0x0D || first == 0x09 { bytes.removeFirst() }
        guard !bytes.isEmpty, bytes.count <= Self.tokenLengthMax else {
            throw Self.invalid("The token must be 1 to \(Self.tokenLengthMax) characters of Base64URL.")
        }
        guard let decoded = Base64.decode(bytes) else { throw Self.invalid("The token is not Base64URL.") }
        let json: JSONValue
        do {
            json = try JSONParser.parse(decoded, depthMax: 4)
        } catch {
            throw Self.invalid("The token does not decode to JSON.")
        }
        try self.init(fields: json)
    }

    /// The `externalPurchaseToken` section of an EXTERNAL_PURCHASE_TOKEN notification (same fields).
    public init(notificationSection json: JSONValue) throws(KakinError) {
        try self.init(fields: json)
    }

    init(fields json: JSONValue) throws(KakinError) {
        guard case .object = json else { throw Self.invalid("The token's JSON must be an object.") }
        guard let id = json["externalPurchaseId"]?.stringValue, !id.isEmpty, id.utf8.count <= Self.externalPurchaseIdLengthMax,
              id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Self.invalid("The token's externalPurchaseId must be 1 to \(Self.externalPurchaseIdLengthMax) printable characters.")
        }
        guard case .int(let appAppleId)? = json["appAppleId"], appAppleId > 0 else {
            throw Self.invalid("The token's appAppleId must be a positive integer.")
        }
        guard let bundleId = json["bundleId"]?.stringValue, !bundleId.isEmpty, bundleId.utf8.count <= Self.bundleIdLengthMax else {
            throw Self.invalid("The token's bundleId must be a string of 1 to \(Self.bundleIdLengthMax) bytes.")
        }
        guard let created = json["tokenCreationDate"]?.int64Value, created > 0 else {
            throw Self.invalid("The token's tokenCreationDate must be UNIX milliseconds.")
        }
        var type: ExternalPurchaseTokenType?
        if let v = json["tokenType"], !v.isNull {
            guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= 32, s.utf8.allSatisfy({ ($0 >= 65 && $0 <= 90) || $0 == 95 }) else {
                throw KakinError(.externalPurchaseTokenTypeNotAccepted, "The token's tokenType must be an upper-case name such as SERVICES.")
            }
            type = ExternalPurchaseTokenType(rawValue: s)
        }
        var expires: Int64?
        if let v = json["tokenExpirationDate"], !v.isNull {
            guard let ms = v.int64Value, ms > created else {
                throw Self.invalid("The token's tokenExpirationDate must be UNIX milliseconds after its tokenCreationDate.")
            }
            expires = ms
        }
        externalPurchaseId = id
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        tokenCreationDateMs = created
        tokenType = type
        tokenExpirationDateMs = expires
        raw = json
    }

    /// Sandbox tokens' `externalPurchaseId` begins with `SANDBOX` (Apple: "always").
    public var environment: AppStoreEnvironment { externalPurchaseId.hasPrefix("SANDBOX") ? .sandbox : .production }

    /// Checks the token against the app: bundle ID, app Apple ID (when the app has one and the token is a
    /// production one, as Apple checks signed data), environment, token type.
    /// - Parameter acceptedTypes: nil accepts every type and tokens without one; otherwise a typed token's type
    ///   must be listed (tokens without a type always pass).
    public func check(bundleId: String, appAppleId: Int64?, environments: Set<AppStoreEnvironment>,
                      acceptedTypes: Set<ExternalPurchaseTokenType>? = nil) throws(KakinError) {
        guard self.bundleId == bundleId else { throw KakinError(.externalPurchaseTokenWrongBundleID) }
        guard environments.contains(environment) else {
            throw KakinError(.externalPurchaseTokenWrongEnvironment,
                             "The token is a \(environment.rawValue) token; this app accepts \(environments.map(\.rawValue).sorted().joined(separator: ", ")).")
        }
        if environment == .production, let appAppleId, appAppleId != self.appAppleId {
            throw KakinError(.externalPurchaseTokenWrongAppAppleID)
        }
        if let acceptedTypes, let tokenType, !acceptedTypes.contains(tokenType) {
            throw KakinError(.externalPurchaseTokenTypeNotAccepted,
                             "The token's type \(tokenType.rawValue) is not one this app accepts (\(acceptedTypes.map(\.rawValue).sorted().joined(separator: ", "))).")
        }
    }

    /// Whether a purchase at `ms` may be reported under this token: custom link tokens only while active
    /// (creation to expiration); other tokens from their creation on.
    public func isActive(atMs ms: Int64) -> Bool {
        if let tokenExpirationDateMs, ms >= tokenExpirationDateMs { return false }
        return true
    }

    /// Refuses a purchase made after a custom link token expired (KKN-3074).
    public func checkActive(atMs ms: Int64) throws(KakinError) {
        guard isActive(atMs: ms) else { throw KakinError(.externalPurchaseTokenExpired) }
    }

    /// When Apple sends EXTERNAL_PURCHASE_TOKEN/UNREPORTED for this token if it is still unreported: 10 days after
    /// creation, or (custom link tokens) soon after expiration — here, at expiration.
    public var unreportedNotificationMs: Int64 {
        tokenExpirationDateMs ?? tokenCreationDateMs + Self.unreportedAfterMs
    }

    /// The token as it travels: Base64URL (unpadded) of its JSON.
    public var tokenString: String { Base64.urlEncode(raw.serialized()) }

    /// The fields for answers and logs.
    public var json: JSONValue { raw }

    static func invalid(_ message: String) -> KakinError { KakinError(.externalPurchaseTokenInvalid, message) }
}

/// `POST /v1/customers/{id}/external-purchase-tokens {"token"}`: the body, strictly.
public struct ExternalPurchaseTokenInput: Sendable, Hashable {
    public var token: ExternalPurchaseToken

    public init(json: JSONValue) throws(KakinError) {
        guard case .object(let o) = json, o.keys.allSatisfy({ $0 == "token" }), let text = o["token"]?.stringValue else {
            throw KakinError(.externalPurchaseTokenInvalid, "The body must be {\"token\": \"<the token string the app received>\"}.")
        }
        token = try ExternalPurchaseToken(token: text)
    }
}
