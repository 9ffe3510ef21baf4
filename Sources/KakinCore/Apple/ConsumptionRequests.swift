/// The bodies of Send Consumption Information (reference §6.7), named as Apple names them. Kakin builds
/// them from its ledger (`ConsumptionInformation`), the App Store client sends them, the simulator checks
/// them. `json` is the wire form; `init(json:)` reads a stored body back (it is rebuilt only from JSON
/// Kakin wrote, so it checks presence and types, not Apple's value ranges).

/// `deliveryStatus` of the current (V2) request.
public struct DeliveryStatus: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let delivered = Self(rawValue: "DELIVERED")
    public static let undeliveredQualityIssue = Self(rawValue: "UNDELIVERED_QUALITY_ISSUE")
    public static let undeliveredWrongItem = Self(rawValue: "UNDELIVERED_WRONG_ITEM")
    public static let undeliveredServerOutage = Self(rawValue: "UNDELIVERED_SERVER_OUTAGE")
    public static let undeliveredOther = Self(rawValue: "UNDELIVERED_OTHER")
    public static let known: [Self] = [.delivered, .undeliveredQualityIssue, .undeliveredWrongItem, .undeliveredServerOutage, .undeliveredOther]
}

/// `refundPreference` of the current (V2) request.
public struct RefundPreference: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let decline = Self(rawValue: "DECLINE")
    public static let grantFull = Self(rawValue: "GRANT_FULL")
    public static let grantProrated = Self(rawValue: "GRANT_PRORATED")
    public static let known: [Self] = [.decline, .grantFull, .grantProrated]
}

/// `ConsumptionRequest`: `PUT /inApps/v2/transactions/consumption/{transactionId}`.
public struct ConsumptionRequest: Sendable, Hashable {
    /// Must be true: Apple refuses the request otherwise (4000035).
    public var customerConsented: Bool
    public var deliveryStatus: DeliveryStatus
    /// A free sample, trial or information about the content was provided before the purchase.
    public var sampleContentProvided: Bool
    /// Milliunits, 0–100000 (50000 = half consumed). Not for auto-renewables (Apple computes it itself).
    public var consumptionPercentage: Int?
    public var refundPreference: RefundPreference?

    public init(customerConsented: Bool, deliveryStatus: DeliveryStatus, sampleContentProvided: Bool,
                consumptionPercentage: Int? = nil, refundPreference: RefundPreference? = nil) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["customerConsented": .bool(customerConsented), "deliveryStatus": .string(deliveryStatus.rawValue),
                                      "sampleContentProvided": .bool(sampleContentProvided)]
        if let consumptionPercentage { o["consumptionPercentage"] = .int(Int64(consumptionPercentage)) }
        if let refundPreference { o["refundPreference"] = .string(refundPreference.rawValue) }
        return .object(o)
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard let consented = json["customerConsented"]?.boolValue else { throw PayloadDecodingError(field: "customerConsented") }
        guard let sample = json["sampleContentProvided"]?.boolValue else { throw PayloadDecodingError(field: "sampleContentProvided") }
        customerConsented = consented
        deliveryStatus = DeliveryStatus(rawValue: try json.requiredString("deliveryStatus"))
        sampleContentProvided = sample
        consumptionPercentage = json["consumptionPercentage"]?.intValue
        refundPreference = json["refundPreference"]?.stringValue.map(RefundPreference.init(rawValue:))
    }
}

/// `ConsumptionRequestV1`: the deprecated `PUT /inApps/v1/transactions/consumption/{transactionId}`. Apple's
/// enumerations are small integers here; 0 always means "undeclared" (not provided).
public struct ConsumptionRequestV1: Sendable, Hashable {
    public var customerConsented: Bool
    /// 0 undeclared, 1 not consumed, 2 partially consumed, 3 fully consumed.
    public var consumptionStatus: Int
    /// 0 undeclared, 1 Apple platform, 2 non-Apple platform.
    public var platform: Int
    public var sampleContentProvided: Bool
    /// 0 delivered and working, 1 quality issue, 2 wrong item, 3 server outage, 4 in-game currency change, 5 other.
    public var deliveryStatus: Int
    /// The customer's app account token (UUID), or "" when the app never set one.
    public var appAccountToken: String
    /// 0 undeclared, 1 0–3 days, 2 3–10 days, 3 10–30 days, 4 30–90 days, 5 90–180 days, 6 180–365 days, 7 over 365 days.
    public var accountTenure: Int
    /// 0 undeclared, then the same kind of ranges in minutes/hours Apple lists; Kakin never knows it.
    public var playTime: Int
    /// 0 undeclared, 1 $0, 2 $0.01–49.99, 3 $50–99.99, 4 $100–499.99, 5 $500–999.99, 6 $1000–1999.99, 7 over $2000.
    public var lifetimeDollarsRefunded: Int
    public var lifetimeDollarsPurchased: Int
    /// 0 undeclared, 1 active, 2 suspended, 3 terminated, 4 limited access.
    public var userStatus: Int
    /// 0 undeclared, 1 prefer grant, 2 prefer decline, 3 no preference.
    public var refundPreference: Int

    public init(customerConsented: Bool, consumptionStatus: Int, platform: Int, sampleContentProvided: Bool, deliveryStatus: Int,
                appAccountToken: String, accountTenure: Int, playTime: Int, lifetimeDollarsRefunded: Int,
                lifetimeDollarsPurchased: Int, userStatus: Int, refundPreference: Int) {
        self.customerConsented = customerConsented
        self.consumptionStatus = consumptionStatus
        self.platform = platform
        self.sampleContentProvided = sampleContentProvided
        self.deliveryStatus = deliveryStatus
        self.appAccountToken = appAccountToken
        self.accountTenure = accountTenure
        self.playTime = playTime
        self.lifetimeDollarsRefunded = lifetimeDollarsRefunded
        self.lifetimeDollarsPurchased = lifetimeDollarsPurchased
        self.userStatus = userStatus
        self.refundPreference = refundPreference
    }

    static let integerFields = ["consumptionStatus", "platform", "deliveryStatus", "accountTenure", "playTime",
                                "lifetimeDollarsRefunded", "lifetimeDollarsPurchased", "userStatus", "refundPreference"]

    public var json: JSONValue {
        ["customerConsented": .bool(customerConsented), "consumptionStatus": .int(Int64(consumptionStatus)),
         "platform": .int(Int64(platform)), "sampleContentProvided": .bool(sampleContentProvided),
         "deliveryStatus": .int(Int64(deliveryStatus)), "appAccountToken": .string(appAccountToken),
         "accountTenure": .int(Int64(accountTenure)), "playTime": .int(Int64(playTime)),
         "lifetimeDollarsRefunded": .int(Int64(lifetimeDollarsRefunded)), "lifetimeDollarsPurchased": .int(Int64(lifetimeDollarsPurchased)),
         "userStatus": .int(Int64(userStatus)), "refundPreference": .int(Int64(refundPreference))]
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        func int(_ key: String) throws(PayloadDecodingError) -> Int {
            guard case .int(let v)? = json[key], let i = Int(exactly: v) else { throw PayloadDecodingError(field: key) }
            return i
        }
        guard let consented = json["customerConsented"]?.boolValue else { throw PayloadDecodingError(field: "customerConsented") }
        guard let sample = json["sampleContentProvided"]?.boolValue else { throw PayloadDecodingError(field: "sampleContentProvided") }
        guard let token = json["appAccountToken"]?.stringValue else { throw PayloadDecodingError(field: "appAccountToken") }
        self.init(customerConsented: consented, consumptionStatus: try int("consumptionStatus"), platform: try int("platform"),
                  sampleContentProvided: sample, deliveryStatus: try int("deliveryStatus"), appAccountToken: token,
                  accountTenure: try int("accountTenure"), playTime: try int("playTime"),
                  lifetimeDollarsRefunded: try int("lifetimeDollarsRefunded"), lifetimeDollarsPurchased: try int("lifetimeDollarsPurchased"),
                  userStatus: try int("userStatus"), refundPreference: try int("refundPreference"))
    }
}
