import KakinCore

/// Kakin's half of Finish Transaction (App Store Server API 1.20), per app (`serverFinish`): a consumable
/// Kakin credited from a notification or a restore, which the app has not sent within `afterSeconds`, is
/// finished by Kakin through the Server API (the app was killed before it could; seed 000's worst case).
/// An app that sent the transaction finishes it itself.
public struct ServerFinishPolicy: Sendable, Hashable {
    public var afterSeconds: Int64

    public init(afterSeconds: Int64) { self.afterSeconds = afterSeconds }

    /// 1 minute to 30 days.
    public static let afterSecondsRange: ClosedRange<Int64> = 60...(30 * 86_400)
}

extension Configuration {
    /// The app's Apple 2026 settings (none: no retention answers, no server finish).
    public func apple2026Settings(bundleId: String) -> Apple2026AppSettings {
        apple2026[bundleId] ?? Apple2026AppSettings()
    }
}

/// The per-app settings of Apple's 2026 additions (`Configuration.apple2026`, by bundle ID). Kept beside the app
/// settings rather than in them while the use cases (`KakinService.AppSettings`) don't read them yet.
public struct Apple2026AppSettings: Sendable {
    public var retentionMessaging: RetentionMessagingConfig?
    public var serverFinish: ServerFinishPolicy?
    public init(retentionMessaging: RetentionMessagingConfig? = nil, serverFinish: ServerFinishPolicy? = nil) {
        self.retentionMessaging = retentionMessaging
        self.serverFinish = serverFinish
    }

    /// The app keys this file parses.
    static let appKeys: Set<String> = ["retentionMessaging", "serverFinish"]
}

extension Configuration {
    /// Each app's settings whose JSON has any (the app itself parsed already, in the same order).
    static func parseApple2026(_ json: [JSONValue], _ apps: [App]) throws(ConfigurationError) -> [String: Apple2026AppSettings] {
        var out: [String: Apple2026AppSettings] = [:]
        for (i, (v, app)) in zip(json, apps).enumerated() {
            let settings = try parseApple2026(try StrictObject(v, path: "apps[\(i)]"), catalog: app.catalog)
            if settings.retentionMessaging != nil || settings.serverFinish != nil { out[app.bundleId] = settings }
        }
        return out
    }

    /// `apps[].retentionMessaging`: `{"rules": [{"productIds"?, "messageId"?, "offerId"?, "alternateProductId"?}],
    /// "defaultMessageId"?}`, checked against the app's catalog; `apps[].serverFinish`: `{"afterSeconds": N}`.
    static func parseApple2026(_ app: StrictObject, catalog: Catalog) throws(ConfigurationError) -> Apple2026AppSettings {
        var settings = Apple2026AppSettings()
        if let r = try app.object("retentionMessaging") {
            try r.check(allowedKeys: ["rules", "defaultMessageId"])
            var rules: [RetentionMessagingConfig.Rule] = []
            let list = try r.array("rules") ?? []
            guard list.count <= RetentionMessagingConfig.rulesMax else {
                throw ConfigurationError(r.sub("rules"), "has more than \(RetentionMessagingConfig.rulesMax) rules")
            }
            for (i, v) in list.enumerated() {
                let rule = try StrictObject(v, path: r.sub("rules") + "[\(i)]")
                try rule.check(allowedKeys: ["productIds", "messageId", "offerId", "alternateProductId"])
                var productIds: [String]?
                if let ids = try rule.array("productIds") {
                    productIds = try ids.enumerated().map { (j, id) throws(ConfigurationError) in
                        guard let s = id.stringValue, !s.isEmpty, s.count <= 255 else {
                            throw ConfigurationError(rule.sub("productIds") + "[\(j)]", "must be a product ID")
                        }
                        return s
                    }
                }
                rules.append(.init(productIds: productIds, messageId: try rule.string("messageId")?.lowercased(), offerId: try rule.string("offerId"),
                                   alternateProductId: try rule.string("alternateProductId")))
            }
            let config = RetentionMessagingConfig(rules: rules, defaultMessageId: try r.string("defaultMessageId")?.lowercased())
            try config.validate(catalog: catalog, path: app.sub("retentionMessaging"))
            settings.retentionMessaging = config
        }
        if let f = try app.object("serverFinish") {
            try f.check(allowedKeys: ["afterSeconds"])
            guard let seconds = try f.int("afterSeconds", range: ServerFinishPolicy.afterSecondsRange) else {
                throw ConfigurationError(f.sub("afterSeconds"), "is required (seconds after which Kakin finishes a consumable the app never sent)")
            }
            settings.serverFinish = ServerFinishPolicy(afterSeconds: seconds)
        }
        return settings
    }
}
