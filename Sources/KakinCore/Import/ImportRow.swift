/// One row of an import, checked and typed: what Kakin resolves and applies. A row that fails its checks is a reject
/// with the catalogue's error (`invalid_customer_id`, `invalid_balance`, …), decided before anything is read or written.
public enum ImportRow: Sendable, Hashable {
    /// Any transaction of the customer's App Store purchases: the history is read from the App Store Server API.
    case appStore(customerId: String, transactionId: String)
    /// A Google Play purchase (resolved by the Play seam).
    case googlePlay(GooglePlayImport)
    /// A coin balance of the old coin system.
    case balance(ImportedBalance)

    public var customerId: String {
        switch self {
        case .appStore(let customerId, _): return customerId
        case .googlePlay(let p): return p.customerId
        case .balance(let b): return b.customerId
        }
    }

    /// Checks one record of a `kind` file.
    public static func parse(_ record: ImportRecord, kind: ImportKind) throws(KakinError) -> ImportRow {
        let f = record.fields
        switch kind {
        case .appStore:
            return .appStore(customerId: try customer(f["customerId"]), transactionId: try transactionId(f["transactionId"], "transactionId"))
        case .googlePlay:
            return .googlePlay(GooglePlayImport(
                customerId: try customer(f["customerId"]), packageName: try text(f["packageName"], "packageName", max: 255),
                productId: try text(f["productId"], "productId", max: 255), purchaseToken: try text(f["purchaseToken"], "purchaseToken", max: 4_096),
                orderId: nil))
        case .balances:
            return .balance(ImportedBalance(
                customerId: try customer(f["customerId"]), paid: try coins(f["paid"], "paid"), free: try coins(f["free"], "free"),
                reference: try text(f["reference"], "reference", max: 255), asOf: try asOf(f["asOf"])))
        case .revenuecat:
            return try RevenueCatColumns.row(f)
        }
    }

    static func customer(_ value: String?) throws(KakinError) -> String {
        guard let value, !value.isEmpty else { throw KakinError(.invalidCustomerID, "customerId is missing.") }
        guard CustomerID.isValid(value) else {
            throw KakinError(.invalidCustomerID, "The customer ID \"\(value.prefix(40))\" is not 1 to 128 characters of A-Z a-z 0-9 . _ : @ -.")
        }
        return value
    }

    /// An App Store transaction ID: decimal digits.
    static func transactionId(_ value: String?, _ name: String) throws(KakinError) -> String {
        guard let value, !value.isEmpty else { throw KakinError(.importRowInvalid, "\(name) is missing.") }
        guard value.utf8.count <= 32, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw KakinError(.importRowInvalid, "\(name) \"\(value.prefix(40))\" is not an App Store transaction ID (decimal digits).")
        }
        return value
    }

    static func text(_ value: String?, _ name: String, max: Int) throws(KakinError) -> String {
        guard let value, !value.isEmpty else { throw KakinError(.importRowInvalid, "\(name) is missing.") }
        guard value.utf8.count <= max, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw KakinError(.importRowInvalid, "\(name) must be 1 to \(max) characters without control characters.")
        }
        return value
    }

    static func coins(_ value: String?, _ name: String) throws(KakinError) -> Int64 {
        let digits = value.map { $0.hasPrefix("-") ? $0.dropFirst() : Substring($0) } ?? ""
        guard let value, !digits.isEmpty, digits.utf8.count <= 18,
              digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let n = Int64(value), n.magnitude <= WalletRules.amountMax.magnitude else {
            throw KakinError(.importBalanceInvalid, "\(name) \"\((value ?? "").prefix(40))\" is not a whole number of coins within ±\(WalletRules.amountMax).")
        }
        return n
    }

    static func asOf(_ value: String?) throws(KakinError) -> ImportedBalance.AsOf {
        guard let value, !value.isEmpty else { throw KakinError(.importRowInvalid, "asOf is missing.") }
        if let day = Timestamp.parseDate(value) { return .endOfDay(day / 86_400_000) }
        if let ms = Timestamp.parseRFC3339(value) { return .instant(ms) }
        throw KakinError(.importRowInvalid, "asOf \"\(value.prefix(40))\" is not a date (YYYY-MM-DD) or an RFC 3339 UTC time.")
    }
}

/// A coin balance moved in: one ledger entry of kind `import` per `reference`, exactly once.
public struct ImportedBalance: Sendable, Hashable {
    /// When the old system held the balance: an instant, or the end of a day in the coin figures' reporting zone.
    public enum AsOf: Sendable, Hashable {
        case instant(Int64)
        /// Days since 1970-01-01.
        case endOfDay(Int64)
    }

    public var customerId: String
    public var paid: Int64
    public var free: Int64
    public var reference: String
    public var asOf: AsOf

    public init(customerId: String, paid: Int64, free: Int64, reference: String, asOf: AsOf) {
        self.customerId = customerId
        self.paid = paid
        self.free = free
        self.reference = reference
        self.asOf = asOf
    }

    /// The ledger entry's idempotency fact: one entry per reference, whoever's.
    public var effectKey: String { "import:" + reference }
}

/// A Google Play purchase named by an import row: its token (`googlePlay` files), or the order ID RevenueCat exports.
public struct GooglePlayImport: Sendable, Hashable {
    public var customerId: String
    public var packageName: String?
    public var productId: String
    public var purchaseToken: String?
    public var orderId: String?

    public init(customerId: String, packageName: String?, productId: String, purchaseToken: String?, orderId: String?) {
        self.customerId = customerId
        self.packageName = packageName
        self.productId = productId
        self.purchaseToken = purchaseToken
        self.orderId = orderId
    }
}

/// RevenueCat's scheduled data export (transactions feed, export versions 4 to 7): the columns Kakin reads. The customer
/// is the app's own user ID: `rc_last_seen_app_user_id_alias` unless it is empty or anonymous, else
/// `rc_original_app_user_id`. `store` says where `store_transaction_id` comes from.
public enum RevenueCatColumns {
    public static let originalAppUserId = "rc_original_app_user_id"
    public static let lastSeenAlias = "rc_last_seen_app_user_id_alias"
    public static let store = "store"
    public static let storeTransactionId = "store_transaction_id"
    public static let productIdentifier = "product_identifier"

    static let required = [originalAppUserId, store, storeTransactionId, productIdentifier]
    /// RevenueCat's anonymous IDs name no customer of the app.
    static let anonymousPrefix = "$RCAnonymousID:"

    static func row(_ f: [String: String]) throws(KakinError) -> ImportRow {
        let alias = f[lastSeenAlias].flatMap { $0.isEmpty || $0.hasPrefix(anonymousPrefix) ? nil : $0 }
        guard let id = alias ?? f[originalAppUserId], !id.hasPrefix(anonymousPrefix) else {
            throw KakinError(.invalidCustomerID, "The RevenueCat app user ID is anonymous ($RCAnonymousID): Kakin needs the app's own customer ID.")
        }
        let customerId = try ImportRow.customer(id)
        switch f[store] ?? "" {
        case "app_store", "mac_app_store":
            return .appStore(customerId: customerId, transactionId: try ImportRow.transactionId(f[storeTransactionId], storeTransactionId))
        case "play_store":
            return .googlePlay(GooglePlayImport(customerId: customerId, packageName: nil,
                                                productId: try ImportRow.text(f[productIdentifier], productIdentifier, max: 255),
                                                purchaseToken: nil, orderId: try ImportRow.text(f[storeTransactionId], storeTransactionId, max: 255)))
        case let other:
            throw KakinError(.importStoreNotSupported, "store \"\(other.prefix(40))\": Kakin imports app_store and play_store rows.")
        }
    }
}
