import KakinCore
import KakinEvents

/// Config `events`: `{"webhooks": [{"id", "url", "secretEnv", "types"?}], "retentionDays"?: 30}` (the contract's
/// "Events out"). `secretEnv` names the environment variable holding the signing secret, or two separated by a
/// comma while rotating (each signs); `types` defaults to `["*"]`.
extension Configuration {
    static func parseEvents(_ o: StrictObject, environment: [String: String], localMode: Bool = false) throws(ConfigurationError) -> EventsSettings? {
        guard let e = try o.object("events") else { return nil }
        try e.check(allowedKeys: ["webhooks", "retentionDays", "delivery"])
        let retentionDays = Int(try e.int("retentionDays", range: EventsSettings.retentionDaysRange) ?? 30)
        let list = try e.array("webhooks") ?? []
        guard list.count <= EventsSettings.webhooksMax else {
            throw ConfigurationError(e.sub("webhooks"), "lists more than \(EventsSettings.webhooksMax) endpoints")
        }
        var webhooks: [WebhookEndpoint] = []
        for (i, v) in list.enumerated() {
            let w = try StrictObject(v, path: e.sub("webhooks") + "[\(i)]")
            try w.check(allowedKeys: ["id", "url", "secretEnv", "types"])
            let id = try w.requiredString("id")
            if let problem = WebhookEndpoint.idProblem(id) { throw ConfigurationError(w.sub("id"), problem) }
            guard !webhooks.contains(where: { $0.id == id }) else { throw ConfigurationError(w.sub("id"), "duplicates another webhook's id") }
            let url = try w.requiredString("url")
            if let problem = WebhookEndpoint.urlProblem(url, localMode: localMode) { throw ConfigurationError(w.sub("url"), problem) }
            let name = try w.requiredString("secretEnv")
            guard let value = environment[name], !value.isEmpty else {
                throw ConfigurationError(w.sub("secretEnv"), "environment variable \(name) is not set")
            }
            let secrets: [[UInt8]]
            switch WebhookEndpoint.parseSecrets(value) {
            case .success(let s): secrets = s
            case .failure(let problem): throw ConfigurationError(w.sub("secretEnv"), "environment variable \(name) \(problem.message)")
            }
            var types = EventTypeFilter.all
            if let patterns = try w.array("types") {
                var strings: [String] = []
                for (j, p) in patterns.enumerated() {
                    guard let s = p.stringValue else { throw ConfigurationError(w.sub("types") + "[\(j)]", "must be a string") }
                    strings.append(s)
                }
                do {
                    types = try EventTypeFilter(patterns: strings)
                } catch {
                    throw ConfigurationError(strings.isEmpty ? w.sub("types") : w.sub("types") + "[\(error.index)]", error.message)
                }
            }
            webhooks.append(WebhookEndpoint(id: id, url: url, secrets: secrets, types: types))
        }
        var settings = EventsSettings(webhooks: webhooks, retentionDays: retentionDays)
        if let d = try e.object("delivery") {
            try d.check(allowedKeys: ["timeoutMs", "leaseMs", "retryFirstDelayMs", "retryMaxDelayMs", "retryWindowHours", "concurrencyPerEndpoint",
                                      "pollIntervalMs"])
            var tuning = WebhookDeliveryTuning()
            tuning.timeoutMs = try d.int("timeoutMs", range: WebhookDeliveryTuning.timeoutMsRange)
            tuning.leaseMs = try d.int("leaseMs", range: WebhookDeliveryTuning.leaseMsRange)
            tuning.retryFirstDelayMs = try d.int("retryFirstDelayMs", range: WebhookDeliveryTuning.delayMsRange)
            tuning.retryMaxDelayMs = try d.int("retryMaxDelayMs", range: WebhookDeliveryTuning.delayMsRange)
            tuning.retryWindowHours = try d.int("retryWindowHours", range: WebhookDeliveryTuning.windowHoursRange)
            tuning.concurrencyPerEndpoint = try d.int("concurrencyPerEndpoint", range: WebhookDeliveryTuning.concurrencyRange).map { Int($0) }
            tuning.pollIntervalMs = try d.int("pollIntervalMs", range: WebhookDeliveryTuning.pollIntervalMsRange)
            if let problem = tuning.problem() { throw ConfigurationError(e.sub("delivery"), problem) }
            settings.delivery = tuning
        }
        return settings
    }
}
