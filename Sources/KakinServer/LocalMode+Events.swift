import Foundation
import KakinCore
import KakinEvents

/// Local mode's webhook: local mode has no config file, so one endpoint comes from the environment —
/// `KAKIN_WEBHOOK_URL` (http is fine in local mode) and `KAKIN_WEBHOOK_SECRET` (one secret, or two separated by a comma
/// while rotating); without a secret, one is generated for the run and printed in the startup text, so a newcomer can
/// start `kakin events listen` with it. The endpoint is named `local` and takes every event type.
struct LocalWebhook: Sendable, Equatable {
    static let urlVariable = "KAKIN_WEBHOOK_URL"
    static let secretVariable = "KAKIN_WEBHOOK_SECRET"
    static let endpointId = "local"
    /// What the startup text suggests when no webhook is configured.
    static let suggestedPort = 9000
    static let suggestedSecret = "whsec_local_0123456789abcdef"

    var url: String
    /// The first secret (the one the startup text tells `kakin events listen` to check).
    var secret: String
    var secrets: [[UInt8]]
    /// The secret was generated for this run (no `KAKIN_WEBHOOK_SECRET`).
    var generated: Bool

    var endpoint: WebhookEndpoint { WebhookEndpoint(id: Self.endpointId, url: url, secrets: secrets) }

    /// The webhook the environment asks for; nil without `KAKIN_WEBHOOK_URL`.
    /// - Throws: a one-line problem naming the variable, for a URL or secret that cannot be used.
    static func fromEnvironment(_ environment: [String: String],
                                generateSecret: () -> String = LocalWebhook.randomSecret) throws(ConfigurationError) -> LocalWebhook? {
        guard let url = environment[urlVariable], !url.isEmpty else { return nil }
        if let problem = WebhookEndpoint.urlProblem(url, localMode: true) { throw ConfigurationError(urlVariable, problem) }
        if let value = environment[secretVariable], !value.isEmpty {
            switch WebhookEndpoint.parseSecrets(value) {
            case .success(let secrets):
                return LocalWebhook(url: url, secret: String(decoding: secrets[0], as: UTF8.self), secrets: secrets, generated: false)
            case .failure(let problem):
                throw ConfigurationError(secretVariable, problem.message)
            }
        }
        let secret = generateSecret()
        return LocalWebhook(url: url, secret: secret, secrets: [Array(secret.utf8)], generated: true)
    }

    /// `whsec_` and 48 hex digits (24 random bytes).
    static func randomSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return "whsec_" + Hex.encode((0..<24).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Adds the environment's webhook to local mode's configuration (it has no `events` of its own).
    static func apply(to configuration: inout Configuration, environment: [String: String]) throws(ConfigurationError) -> LocalWebhook? {
        guard let webhook = try fromEnvironment(environment) else { return nil }
        var events = configuration.events ?? EventsSettings()
        events.webhooks.removeAll { $0.id == endpointId }
        events.webhooks.append(webhook.endpoint)
        configuration.events = events
        return webhook
    }

    /// The port `kakin events listen` should take for `url` (its explicit port, else the scheme's).
    var listenPort: Int {
        guard let c = URLComponents(string: url) else { return Self.suggestedPort }
        return c.port ?? (c.scheme?.lowercased() == "https" ? 443 : 80)
    }

    /// The startup text's part on events: how to see them arrive with `kakin events listen`.
    static func banner(_ webhook: LocalWebhook?, base: String) -> String {
        guard let webhook else {
            let s = suggestedSecret
            return """


                See every change as an event (what your backend would be told):
                  curl -s \(base)/v1/events                  # the feed, for those who poll
                  # or as signed webhooks: run a receiver that checks Kakin-Signature and prints one event a line…
                  kakin events listen --port \(suggestedPort) --secret \(s)
                  # …and restart Kakin pointing a webhook at it:
                  KAKIN_WEBHOOK_URL=http://127.0.0.1:\(suggestedPort)/ KAKIN_WEBHOOK_SECRET=\(s) ./scripts/run-local   # or kakin serve
                """
        }
        let signed = webhook.generated ? "signed with a secret generated for this run (set \(secretVariable) to keep one)"
            : "signed with \(secretVariable)"
        return """


            Events go to the webhook "\(endpointId)" at \(webhook.url), \(signed).
              # see them arrive, signatures checked, one event a line (a receiver started late gets them on a retry):
              kakin events listen --port \(webhook.listenPort) --secret \(webhook.secret)
              # the same events as a feed: curl -s \(base)/v1/events ; deliveries: curl -s \(base)/v1/admin/webhooks
            """
    }
}
