/// Typed views of Apple's signed payloads. Each keeps the whole decoded JSON in `raw`, so fields this
/// code doesn't know yet are never dropped. Dates are Apple's milliseconds since the UNIX epoch.
public struct PayloadDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var field: String
    public var description: String { "missing or invalid field \(field)" }
    public init(field: String) { self.field = field }
}

/// `JWSTransactionDecodedPayload` (§3).
public struct TransactionPayload: Sendable, Hashable {
    /// The whole payload, every field Apple sent (for a payload read from its stored status fields, those fields).
    public var raw: JSONValue {
        get { document.value }
        set { document = PayloadDocument(newValue) }
    }
    var document: PayloadDocument
    public var transactionId: String
    public var originalTransactionId: String
    public var webOrderLineItemId: String?
    public var bundleId: String
    public var productId: String
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Int64
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int
    public var type: AppleProductType
    public var appAccountToken: String?
    public var inAppOwnershipType: InAppOwnershipType
    public var signedDate: Int64
    public var revocationDate: Int64?
    public var revocationReason: Int?
    public var revocationType: RevocationType?
    public var revocationPercentage: Int?
    public var isUpgraded: Bool
    public var offerType: AppleOfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var offerPeriod: String?
    public var environment: AppStoreEnvironment
    public var transactionReason: TransactionReason?
    public var storefront: String?
    public var price: Int64?
    public var currency: String?
    public var appTransactionId: String?
    /// (1.21) `MONTHLY` for a yearly subscription billed monthly with a 12-month commitment.
    public var billingPlanType: BillingPlanType?
    /// (1.21) Which month of the commitment this transaction pays, and the commitment's end and price.
    public var commitmentInfo: TransactionCommitmentInfo?

    public var isRevoked: Bool { revocationDate != nil }
    /// The refunded share in milliunits (0–100000) when revoked (`WalletRules.revokedShareMilli`).
    public var revokedShareMilli: Int? {
        guard isRevoked else { return nil }
        return WalletRules.revokedShareMilli(type: revocationType, percentage: revocationPercentage)
    }

    /// The keys the fields are read from, named as the fields.
    enum Key: Int, PayloadKey {
        case transactionId, originalTransactionId, webOrderLineItemId, bundleId, productId, subscriptionGroupIdentifier, purchaseDate,
             originalPurchaseDate, expiresDate, quantity, type, appAccountToken, inAppOwnershipType, signedDate, revocationDate,
             revocationReason, revocationType, revocationPercentage, isUpgraded, offerType, offerIdentifier, offerDiscountType,
             offerPeriod, environment, transactionReason, storefront, price, currency, billingPlanType, commitmentInfo, appTransactionId
        static let names = PayloadKeyNames(allCases.map { "\($0)" })
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object(let members) = json else { throw PayloadDecodingError(field: "(payload)") }
        try self.init(PayloadMembers(members), document: PayloadDocument(json))
    }

    init(_ json: PayloadMembers<Key>, document: PayloadDocument) throws(PayloadDecodingError) {
        self.document = document
        transactionId = try json.requiredID(.transactionId)
        originalTransactionId = json[.originalTransactionId]?.idString ?? transactionId
        webOrderLineItemId = json[.webOrderLineItemId]?.idString
        bundleId = try json.requiredString(.bundleId)
        productId = try json.requiredString(.productId)
        subscriptionGroupIdentifier = json[.subscriptionGroupIdentifier]?.idString
        purchaseDate = try json.requiredMs(.purchaseDate)
        originalPurchaseDate = json[.originalPurchaseDate]?.int64Value
        expiresDate = json[.expiresDate]?.int64Value
        quantity = json[.quantity]?.intValue ?? 1
        type = AppleProductType(rawValue: try json.requiredString(.type))
        appAccountToken = json[.appAccountToken]?.stringValue.map(Self.lowercased)
        inAppOwnershipType = InAppOwnershipType(rawValue: json[.inAppOwnershipType]?.stringValue ?? "PURCHASED")
        signedDate = try json.requiredMs(.signedDate)
        revocationDate = json[.revocationDate]?.int64Value
        revocationReason = json[.revocationReason]?.intValue
        revocationType = json[.revocationType]?.stringValue.map(RevocationType.init(rawValue:))
        revocationPercentage = json[.revocationPercentage]?.intValue
        isUpgraded = json[.isUpgraded]?.boolValue ?? false
        offerType = json[.offerType]?.intValue.map(AppleOfferType.init(rawValue:))
        offerIdentifier = json[.offerIdentifier]?.stringValue
        offerDiscountType = json[.offerDiscountType]?.stringValue.map(OfferDiscountType.init(rawValue:))
        offerPeriod = json[.offerPeriod]?.stringValue
        environment = AppStoreEnvironment(rawValue: try json.requiredString(.environment))
        transactionReason = json[.transactionReason]?.stringValue.map(TransactionReason.init(rawValue:))
        storefront = json[.storefront]?.stringValue
        price = json[.price]?.int64Value
        currency = json[.currency]?.stringValue
        appTransactionId = json[.appTransactionId]?.idString
        billingPlanType = json[.billingPlanType]?.stringValue.map(BillingPlanType.init(rawValue:))
        commitmentInfo = TransactionCommitmentInfo(json: json[.commitmentInfo])
    }
}

extension TransactionPayload {
    /// `lowercased()`, without the copy when nothing is upper case (an account token as Kakin hands it out).
    static func lowercased(_ s: String) -> String {
        s.utf8.contains { $0 >= 0x80 || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) } ? s.lowercased() : s
    }
}

/// `JWSRenewalInfoDecodedPayload` (§4): what happens at the next renewal.
public struct RenewalInfoPayload: Sendable, Hashable {
    /// The whole payload, every field Apple sent (for a payload read from its stored status fields, those fields).
    public var raw: JSONValue {
        get { document.value }
        set { document = PayloadDocument(newValue) }
    }
    var document: PayloadDocument
    public var originalTransactionId: String
    public var productId: String
    public var autoRenewProductId: String?
    public var autoRenewStatus: Int
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool
    public var gracePeriodExpiresDate: Int64?
    public var priceIncreaseStatus: Int?
    public var offerType: AppleOfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var offerPeriod: String?
    public var recentSubscriptionStartDate: Int64?
    public var renewalDate: Int64?
    public var signedDate: Int64
    public var environment: AppStoreEnvironment
    public var appAccountToken: String?
    /// Win-back offers the customer may redeem, best first (none while in grace or billing retry).
    public var eligibleWinBackOfferIds: [String]
    public var renewalPrice: Int64?
    public var currency: String?
    public var appTransactionId: String?
    /// (1.21) How the next period is paid.
    public var renewalBillingPlanType: BillingPlanType?
    /// (1.21) What happens when the current 12-month commitment ends.
    public var commitmentInfo: RenewalCommitmentInfo?

    public var willAutoRenew: Bool { autoRenewStatus == 1 }

    /// The keys the fields are read from, named as the fields.
    enum Key: Int, PayloadKey {
        case originalTransactionId, productId, autoRenewProductId, autoRenewStatus, expirationIntent, isInBillingRetryPeriod,
             gracePeriodExpiresDate, priceIncreaseStatus, offerType, offerIdentifier, offerDiscountType, offerPeriod,
             recentSubscriptionStartDate, renewalDate, signedDate, environment, appAccountToken, eligibleWinBackOfferIds, renewalPrice,
             currency, appTransactionId, renewalBillingPlanType, commitmentInfo
        static let names = PayloadKeyNames(allCases.map { "\($0)" })
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object(let members) = json else { throw PayloadDecodingError(field: "(payload)") }
        try self.init(PayloadMembers(members), document: PayloadDocument(json))
    }

    init(_ json: PayloadMembers<Key>, document: PayloadDocument) throws(PayloadDecodingError) {
        self.document = document
        originalTransactionId = try json.requiredID(.originalTransactionId)
        productId = try json.requiredString(.productId)
        autoRenewProductId = json[.autoRenewProductId]?.stringValue
        autoRenewStatus = json[.autoRenewStatus]?.intValue ?? 0
        expirationIntent = json[.expirationIntent]?.intValue
        isInBillingRetryPeriod = json[.isInBillingRetryPeriod]?.boolValue ?? false
        gracePeriodExpiresDate = json[.gracePeriodExpiresDate]?.int64Value
        priceIncreaseStatus = json[.priceIncreaseStatus]?.intValue
        offerType = json[.offerType]?.intValue.map(AppleOfferType.init(rawValue:))
        offerIdentifier = json[.offerIdentifier]?.stringValue
        offerDiscountType = json[.offerDiscountType]?.stringValue.map(OfferDiscountType.init(rawValue:))
        offerPeriod = json[.offerPeriod]?.stringValue
        recentSubscriptionStartDate = json[.recentSubscriptionStartDate]?.int64Value
        renewalDate = json[.renewalDate]?.int64Value
        signedDate = try json.requiredMs(.signedDate)
        environment = AppStoreEnvironment(rawValue: try json.requiredString(.environment))
        appAccountToken = json[.appAccountToken]?.stringValue.map(TransactionPayload.lowercased)
        eligibleWinBackOfferIds = json[.eligibleWinBackOfferIds]?.arrayValue?.compactMap(\.stringValue) ?? []
        renewalPrice = json[.renewalPrice]?.int64Value
        currency = json[.currency]?.stringValue
        appTransactionId = json[.appTransactionId]?.idString
        renewalBillingPlanType = json[.renewalBillingPlanType]?.stringValue.map(BillingPlanType.init(rawValue:))
        commitmentInfo = RenewalCommitmentInfo(json: json[.commitmentInfo])
    }
}

/// `responseBodyV2DecodedPayload` (§5.2). The nested signed transaction and renewal info stay as JWS
/// strings here; the caller verifies them like any other signed data.
public struct NotificationPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    public var notificationUUID: String
    public var version: String?
    public var signedDate: Int64
    public var data: NotificationData?
    /// The `appData` payload of app-level notifications (`RESCIND_CONSENT`).
    public var appData: AppDataPayload?
    /// The app the notification is about, read from whichever of data/summary/externalPurchaseToken/appData is present.
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?

    public struct NotificationData: Sendable, Hashable {
        public var appAppleId: Int64?
        public var bundleId: String?
        public var bundleVersion: String?
        public var environment: AppStoreEnvironment?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
        public var status: Int?
        public var consumptionRequestReason: String?
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        notificationType = NotificationType(rawValue: try json.requiredString("notificationType"))
        subtype = json["subtype"]?.stringValue.map(NotificationSubtype.init(rawValue:))
        notificationUUID = try json.requiredString("notificationUUID")
        version = json["version"]?.stringValue
        // Apple's own test vectors omit signedDate on some TEST notifications; 0 means "unknown".
        signedDate = json["signedDate"]?.int64Value ?? 0
        if let d = json["data"], case .object = d {
            let nd = NotificationData(
                appAppleId: d["appAppleId"]?.int64Value,
                bundleId: d["bundleId"]?.stringValue,
                bundleVersion: d["bundleVersion"]?.stringValue,
                environment: d["environment"]?.stringValue.map(AppStoreEnvironment.init(rawValue:)),
                signedTransactionInfo: d["signedTransactionInfo"]?.stringValue,
                signedRenewalInfo: d["signedRenewalInfo"]?.stringValue,
                status: d["status"]?.intValue,
                consumptionRequestReason: d["consumptionRequestReason"]?.stringValue)
            data = nd
            bundleId = nd.bundleId
            appAppleId = nd.appAppleId
            environment = nd.environment
        } else if let s = json["summary"], case .object = s {
            bundleId = s["bundleId"]?.stringValue
            appAppleId = s["appAppleId"]?.int64Value
            environment = s["environment"]?.stringValue.map(AppStoreEnvironment.init(rawValue:))
        } else if let e = json["externalPurchaseToken"], case .object = e {
            bundleId = e["bundleId"]?.stringValue
            appAppleId = e["appAppleId"]?.int64Value
            let sandbox = e["externalPurchaseId"]?.stringValue?.hasPrefix("SANDBOX") ?? false
            environment = sandbox ? .sandbox : .production
        } else if let a = AppDataPayload(json: json["appData"]) {
            appData = a
            bundleId = a.bundleId
            appAppleId = a.appAppleId
            environment = a.environment
        }
    }
}

/// `JWSAppTransactionDecodedPayload`.
public struct AppTransactionPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var bundleId: String
    public var appAppleId: Int64?
    public var receiptType: AppStoreEnvironment
    public var receiptCreationDate: Int64?

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        bundleId = try json.requiredString("bundleId")
        appAppleId = json["appAppleId"]?.int64Value
        receiptType = AppStoreEnvironment(rawValue: try json.requiredString("receiptType"))
        receiptCreationDate = json["receiptCreationDate"]?.int64Value
    }
}

/// Which kind of signed payload a JWS carries, told apart by its fields.
public enum SignedPayloadKind: String, Sendable {
    /// `realtimeRequest`: the signed request of the Retention Messaging API's Get Retention Message call.
    case transaction, renewalInfo, notification, appTransaction, realtimeRequest, unknown

    public static func of(_ json: JSONValue) -> SignedPayloadKind {
        if json["notificationType"] != nil { return .notification }
        if json["transactionId"] != nil { return .transaction }
        if json["receiptType"] != nil { return .appTransaction }
        if json["requestIdentifier"] != nil, json["userLocale"] != nil, json["originalTransactionId"] != nil { return .realtimeRequest }
        if json["originalTransactionId"] != nil, json["autoRenewStatus"] != nil || json["renewalDate"] != nil
            || json["autoRenewProductId"] != nil
        {
            return .renewalInfo
        }
        return .unknown
    }
}

extension JSONValue {
    func requiredString(_ key: String) throws(PayloadDecodingError) -> String { try Self.requiredString(self[key], key) }
    func requiredID(_ key: String) throws(PayloadDecodingError) -> String { try Self.requiredID(self[key], key) }
    func requiredMs(_ key: String) throws(PayloadDecodingError) -> Int64 { try Self.requiredMs(self[key], key) }

    static func requiredString(_ value: JSONValue?, _ key: @autoclosure () -> String) throws(PayloadDecodingError) -> String {
        guard let s = value?.stringValue, !s.isEmpty else { throw PayloadDecodingError(field: key()) }
        return s
    }

    static func requiredID(_ value: JSONValue?, _ key: @autoclosure () -> String) throws(PayloadDecodingError) -> String {
        guard let s = value?.idString, !s.isEmpty else { throw PayloadDecodingError(field: key()) }
        return s
    }

    static func requiredMs(_ value: JSONValue?, _ key: @autoclosure () -> String) throws(PayloadDecodingError) -> Int64 {
        guard let v = value?.int64Value else { throw PayloadDecodingError(field: key()) }
        return v
    }
}

/// A payload's members as its typed view reads them: from the object a verified JWS parsed into, or from the slots
/// `JSONParser.members` filled from a stored row's text (no object built). One reading, so both give the same fields.
struct PayloadMembers<Key: PayloadKey> {
    enum Source {
        case object([String: JSONValue])
        /// By `Key.rawValue`.
        case slots([JSONValue?])
    }

    let source: Source

    init(_ object: [String: JSONValue]) { source = .object(object) }

    init(slots: [JSONValue?]) {
        precondition(slots.count == Key.names.count, "one slot per key")
        source = .slots(slots)
    }

    subscript(key: Key) -> JSONValue? {
        switch source {
        case .object(let o): return o[Key.names[key.rawValue]]
        case .slots(let s): return s[key.rawValue]
        }
    }

    func requiredString(_ key: Key) throws(PayloadDecodingError) -> String { try JSONValue.requiredString(self[key], Key.names[key.rawValue]) }
    func requiredID(_ key: Key) throws(PayloadDecodingError) -> String { try JSONValue.requiredID(self[key], Key.names[key.rawValue]) }
    func requiredMs(_ key: Key) throws(PayloadDecodingError) -> Int64 { try JSONValue.requiredMs(self[key], Key.names[key.rawValue]) }
}

/// A payload's whole JSON (`raw`): the tree it was decoded from, or the text of a stored row that `JSONParser.members`
/// read its fields from, parsed into a tree only when something asks for `raw` (the newest-copy rule on equal signing
/// dates, the admin desk): a status read never does. Equal as the trees are equal.
struct PayloadDocument: Sendable, Hashable {
    /// Exactly one of the two is set.
    private var tree: JSONValue?
    /// A document `JSONParser.members` accepted, so `JSONParser.parse` accepts it too.
    private var text: String?

    init(_ tree: JSONValue) { self.tree = tree }
    init(text: String) { self.text = text }

    var value: JSONValue {
        if let tree { return tree }
        guard let text, let tree = try? JSONParser.parse(text) else { preconditionFailure("a document whose members were read parses") }
        return tree
    }

    static func == (a: Self, b: Self) -> Bool {
        if let x = a.text, let y = b.text, x == y { return true }
        return a.value == b.value
    }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }
}

/// The payload of a compact JWS without checking its signature. Only for data Kakin verified before it
/// stored it (re-reading stored transactions); never for input.
public enum StoredJWS {
    public static func payload(_ jws: String) -> JSONValue? {
        payloadBytes(jws).flatMap { try? JSONParser.parse($0) }
    }

    /// The payload's JSON text, not parsed.
    static func payloadBytes(_ jws: String) -> [UInt8]? {
        var jws = jws
        return jws.withUTF8 { bytes -> [UInt8]? in
            // The payload is found from the end: the signature is short, the header (three certificates) long
            // and, this being a JWS that was verified before it was stored, free of dots.
            let dot = UInt8(ascii: ".")
            guard let second = bytes.lastIndex(of: dot), let first = bytes[..<second].lastIndex(of: dot) else { return nil }
            return Base64.decode(UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second]))
        }
    }
}
