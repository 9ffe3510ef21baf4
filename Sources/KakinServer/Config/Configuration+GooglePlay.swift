import GooglePlaySecurity
import KakinCore
import KakinService

/// `apps[]` entries with `"store": "googlePlay"` (contract, "Planned additions for the fourth release"):
/// `{"store": "googlePlay", "packageName", "serviceAccountFile", "apiRoot"?, "rtdn": {"audience", "serviceAccountEmail",
/// "issuer"?, "certsUrl"?}, "products": [{"productId", "type": "consumable" | "nonConsumable" | "subscription", "coins"?,
/// "bonusCoins"?, "groupId"?, "basePlans"?}], "voidedPurchasesPollMinutes"?}` (how often the voided purchases list is read:
/// 5 to 1440, default 360). `store` defaults to `"appStore"`; `groupId`s are shared with the App Store app.
extension Configuration {
    static let googlePlayAppKeys: Set<String> = ["store", "packageName", "serviceAccountFile", "apiRoot", "rtdn", "products", "voidedPurchasesPollMinutes"]
    static let packageNameLengthMax = 255

    /// The entry's store: `appStore` (the default) or `googlePlay`.
    static func isGooglePlayApp(_ v: JSONValue, path: String) throws(ConfigurationError) -> Bool {
        let a = try StrictObject(v, path: path)
        switch try a.string("store") ?? "appStore" {
        case "appStore": return false
        case "googlePlay": return true
        default: throw ConfigurationError(a.sub("store"), "must be appStore or googlePlay")
        }
    }

    static func parseGooglePlayApp(_ v: JSONValue, path: String, base: String) throws(ConfigurationError) -> GooglePlayAppSettings {
        let a = try StrictObject(v, path: path)
        try a.check(allowedKeys: googlePlayAppKeys)
        let packageName = try a.requiredString("packageName")
        guard packageName.utf8.count <= packageNameLengthMax,
              packageName.split(separator: ".", omittingEmptySubsequences: false).count >= 2,
              packageName.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "_") }) else {
            throw ConfigurationError(a.sub("packageName"), "must be an Android package name such as com.example.video")
        }
        let accountBytes = try readFile(try a.requiredString("serviceAccountFile"), base: base, key: a.sub("serviceAccountFile"))
        let account: GoogleServiceAccount
        do {
            account = try GoogleServiceAccount(fileBytes: accountBytes)
        } catch {
            throw ConfigurationError(a.sub("serviceAccountFile"), "is not a Google service-account key file: \(error.reason)")
        }
        let apiRoot = try a.string("apiRoot") ?? "https://androidpublisher.googleapis.com/"
        guard apiRoot.hasPrefix("https://") || apiRoot.hasPrefix("http://"), apiRoot.hasSuffix("/") else {
            throw ConfigurationError(a.sub("apiRoot"), "must be an http(s) URL ending in /")
        }
        var rtdn: GooglePlayAppSettings.RTDN?
        if let r = try a.object("rtdn") {
            try r.check(allowedKeys: ["audience", "serviceAccountEmail", "issuer", "certsUrl"])
            let email = try r.requiredString("serviceAccountEmail")
            guard email.contains("@") else { throw ConfigurationError(r.sub("serviceAccountEmail"), "must be the push subscription's service-account email") }
            let certs = try r.string("certsUrl") ?? PushTokenPolicy.googleCertsURL
            guard certs.hasPrefix("https://") || certs.hasPrefix("http://") else { throw ConfigurationError(r.sub("certsUrl"), "must be an http(s) URL") }
            rtdn = GooglePlayAppSettings.RTDN(audience: try r.requiredString("audience"), serviceAccountEmail: email, issuer: try r.string("issuer"),
                                              certsURL: certs)
        }
        guard let products = try a.array("products"), !products.isEmpty else {
            throw ConfigurationError(a.sub("products"), "must list the app's Play products")
        }
        var catalog = Catalog()
        for (i, p) in products.enumerated() {
            let product = try parseGooglePlayProduct(p, path: a.sub("products") + "[\(i)]")
            guard catalog[product.productId] == nil else { throw ConfigurationError(a.sub("products") + "[\(i)].productId", "duplicates another product") }
            catalog.upsert(product)
        }
        var settings = GooglePlayAppSettings(packageName: packageName, catalog: catalog, serviceAccount: account, apiRoot: apiRoot, rtdn: rtdn)
        let range = GooglePlayAppSettings.voidedPollIntervalMsRange
        if let minutes = try a.int("voidedPurchasesPollMinutes", range: range.lowerBound / 60_000...range.upperBound / 60_000) {
            settings.voidedPollIntervalMs = minutes * 60_000
        }
        return settings
    }

    static func parseGooglePlayProduct(_ v: JSONValue, path: String) throws(ConfigurationError) -> Product {
        let o = try StrictObject(v, path: path)
        try o.check(allowedKeys: ["productId", "type", "coins", "bonusCoins", "groupId", "basePlans"])
        let id = try o.requiredString("productId")
        guard !id.isEmpty, id.utf8.count <= 150 else { throw ConfigurationError(o.sub("productId"), "must be 1 to 150 characters") }
        let type = try o.requiredString("type")
        let kind: ProductKind
        switch type {
        case "consumable": kind = .consumable
        case "nonConsumable": kind = .nonConsumable
        case "subscription": kind = .autoRenewable
        default: throw ConfigurationError(o.sub("type"), "must be consumable, nonConsumable or subscription")
        }
        let coins = try o.int("coins", range: 0...1_000_000_000) ?? 0
        let bonus = try o.int("bonusCoins", range: 0...1_000_000_000) ?? 0
        if kind == .consumable, coins == 0, bonus == 0 { throw ConfigurationError(o.sub("coins"), "is required for a consumable (coins granted per unit)") }
        if kind != .consumable, o.has("coins") || o.has("bonusCoins") { throw ConfigurationError(o.sub("coins"), "only consumables grant coins") }
        let groupId = try o.string("groupId")
        if kind == .autoRenewable, groupId == nil { throw ConfigurationError(o.sub("groupId"), "is required for a subscription") }
        if kind != .autoRenewable, groupId != nil { throw ConfigurationError(o.sub("groupId"), "applies to subscriptions only") }
        if let plans = try o.array("basePlans") {
            guard kind == .autoRenewable else { throw ConfigurationError(o.sub("basePlans"), "applies to subscriptions only") }
            guard !plans.isEmpty, plans.allSatisfy({ !($0.stringValue ?? "").isEmpty }) else {
                throw ConfigurationError(o.sub("basePlans"), "must list base plan ids")
            }
        }
        return Product(productId: id, kind: kind, coins: Int(coins), bonusCoins: Int(bonus), groupId: groupId,
                       period: kind == .autoRenewable ? ISOPeriod(months: 1) : nil)
    }
}
