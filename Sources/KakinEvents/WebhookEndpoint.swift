import Foundation
import KakinStorage

/// One configured webhook endpoint (config `events.webhooks[]`: `{"id", "url", "secretEnv", "types"}`).
public struct WebhookEndpoint: Sendable, Hashable {
    public static let secretBytesRange = 16...1024

    public var id: String
    public var url: String
    /// Each signs every delivery (`Kakin-Signature` carries one `v1=` per secret, the first first), so a receiver
    /// that knows either accepts it while the secret is rotated.
    public var secrets: [[UInt8]]
    public var types: EventTypeFilter

    public init(id: String, url: String, secrets: [[UInt8]], types: EventTypeFilter = .all) {
        precondition(Self.idProblem(id) == nil, "endpoint id: \(Self.idProblem(id) ?? "")")
        precondition((1...Self.secretsMax).contains(secrets.count), "an endpoint has 1...\(Self.secretsMax) secrets")
        self.id = id
        self.url = url
        self.secrets = secrets
        self.types = types
    }

    /// What storage routes to this endpoint.
    public var route: WebhookRoute { WebhookRoute(endpointId: id, types: types.admittedNames) }

    /// Why `id` cannot name an endpoint (1…64 of `[A-Za-z0-9._-]`), or nil.
    public static func idProblem(_ id: String) -> String? {
        guard !id.isEmpty, id.utf8.count <= idLengthMax,
              id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D })
        else { return "must be 1 to \(idLengthMax) characters of A-Z a-z 0-9 . _ -" }
        return nil
    }

    /// Why `url` cannot receive webhooks, or nil: an absolute `http`/`https` URL with a host, no user or password (a
    /// secret does not belong in a URL that is logged and shown), no fragment; `https` unless `localMode` or the host
    /// is loopback (a signed event still tells whoever reads it a customer's status).
    public static func urlProblem(_ url: String, localMode: Bool) -> String? {
        guard url.utf8.count <= urlLengthMax else { return "is longer than \(urlLengthMax) characters" }
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = c.host, !host.isEmpty else { return "must be an absolute http:// or https:// URL" }
        guard c.user == nil, c.password == nil else { return "must not carry a user or password" }
        guard c.fragment == nil else { return "must not have a #fragment" }
        if scheme == "http", !localMode, !isLoopback(host) { return "must be https:// (http:// only for a loopback host or in local mode)" }
        return nil
    }

    /// 127.0.0.0/8, ::1 and localhost.
    public static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        return h == "localhost" || h == "::1" || h == "[::1]" || h.hasPrefix("127.")
    }

    /// `secretEnv`'s value: one secret, or two separated by a comma while rotating (both sign, the first listed first);
    /// each 16…1024 bytes. The reason when it is none of these.
    public static func parseSecrets(_ value: String) -> Result<[[UInt8]], SecretProblem> {
        let parts = value.split(separator: ",", omittingEmptySubsequences: false).map { Array($0.utf8) }
        guard (1...secretsMax).contains(parts.count) else { return .failure(SecretProblem(message: "must hold one secret, or two separated by a comma")) }
        for part in parts where !secretBytesRange.contains(part.count) {
            return .failure(SecretProblem(message: "each secret must be \(secretBytesRange.lowerBound) to \(secretBytesRange.upperBound) bytes"))
        }
        return .success(parts)
    }

    public struct SecretProblem: Error, Sendable, Equatable {
        public var message: String
    }
}

/// Config `events`: `{"webhooks": [...], "retentionDays": 30}`.
public struct EventsSettings: Sendable, Hashable {
    public static let retentionDaysRange: ClosedRange<Int64> = 1...3650

    public var webhooks: [WebhookEndpoint]
    /// Events and finished deliveries older than this are purged (an undelivered one only once it ended).
    public var retentionDays: Int
    /// `events.delivery` (an addition): this process's worker timing; nil = the contract's.
    public var delivery: WebhookDeliveryTuning? = nil

    public init(webhooks: [WebhookEndpoint] = [], retentionDays: Int = 30) {
        precondition(webhooks.count <= Self.webhooksMax, "at most \(Self.webhooksMax) webhook endpoints")
        precondition(Self.retentionDaysRange.contains(Int64(retentionDays)), "retentionDays in \(Self.retentionDaysRange)")
        self.webhooks = webhooks
        self.retentionDays = retentionDays
    }

    public func endpoint(_ id: String) -> WebhookEndpoint? { webhooks.first { $0.id == id } }
}
