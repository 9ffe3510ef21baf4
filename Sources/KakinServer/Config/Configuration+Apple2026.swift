import KakinCore
import KakinService

extension Configuration {
    /// The app's Apple 2026 settings (none: no retention answers, no server finish).
    public func apple2026Settings(bundleId: String) -> Apple2026AppSettings {
        apps.first { $0.bundleId == bundleId }?.apple2026 ?? Apple2026AppSettings()
    }

    /// Apple's 2026 additions per app, by bundle ID (each app's `apple2026`): the apps that configure any.
    public var apple2026: [String: Apple2026AppSettings] {
        get {
            Dictionary(apps.filter { !$0.apple2026.isEmpty }.map { ($0.bundleId, $0.apple2026) }, uniquingKeysWith: { a, _ in a })
        }
        set {
            for i in apps.indices { apps[i].apple2026 = newValue[apps[i].bundleId] ?? Apple2026AppSettings() }
        }
    }
}

extension Configuration {
    /// Each app's settings whose JSON has any (the app itself parsed already, in the same order).
    /// - Parameter entries: the App Store entries of `apps[]` with their index in it, in the order of `apps`.
    static func parseApple2026(_ entries: [(index: Int, json: JSONValue)], _ apps: inout [App]) throws(ConfigurationError) {
        for (k, entry) in entries.enumerated() where k < apps.count {
            apps[k].apple2026 = try parseApple2026(try StrictObject(entry.json, path: "apps[\(entry.index)]"), catalog: apps[k].catalog)
        }
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

extension Configuration {
    /// What Apple's 2026 settings need from the rest of the file: `serverFinish` calls the App Store Server API; a
    /// `retentionMessaging` rule that offers a promotional offer signs it (a V2 JWS needs an issuer ID).
    static func validateApple2026(_ c: Configuration) throws(ConfigurationError) {
        for (i, app) in c.apps.enumerated() {
            if app.apple2026.serverFinish != nil, c.appStoreServerAPI == nil {
                throw ConfigurationError("apps[\(i)].serverFinish", "needs appStoreServerAPI (Finish Transaction is an App Store Server API call)")
            }
            if app.apple2026.retentionMessaging?.rules.contains(where: { $0.offerId != nil }) == true {
                let hasKey = c.offerSigning != nil || c.appStoreServerAPI != nil
                guard hasKey, (c.offerSigning?.issuerId ?? c.appStoreServerAPI?.issuerId) != nil else {
                    throw ConfigurationError("apps[\(i)].retentionMessaging",
                                             "offers a promotional offer: needs offerSigning (with issuerId) or appStoreServerAPI to sign it")
                }
            }
        }
    }
}
