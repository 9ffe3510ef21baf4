/// The External Purchase Server API's report (`PUT /externalPurchase/v1/reports`, `GET …/reports/{requestIdentifier}`):
/// one report per external purchase token, named as Apple names it. Kakin builds these (KakinExternal), the App
/// Store Server API client sends them, the simulator reads them back. Amounts are milli-units of the reporting
/// currency, dates UNIX milliseconds.

/// `status`: what the report says about its token.
public struct ExternalPurchaseReportStatus: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The token led to transactions, listed in `lineItems` (also for corrections).
    public static let lineItem = Self(rawValue: "LINE_ITEM")
    /// The token led to no transaction; no `lineItems`.
    public static let noLineItem = Self(rawValue: "NO_LINE_ITEM")
    /// A token learned of from an EXTERNAL_PURCHASE_TOKEN notification that Kakin has no record of.
    public static let unrecognizedToken = Self(rawValue: "UNRECOGNIZED_TOKEN")
    /// A SERVICES or ACQUISITION token of a period whose transactions another token reports.
    public static let duplicateToken = Self(rawValue: "DUPLICATE_TOKEN")
    public static let known: [Self] = [.lineItem, .noLineItem, .unrecognizedToken, .duplicateToken]
}

/// `subscriptionEvent` of a `SubscriptionBuyLineItem`.
public struct ExternalPurchaseSubscriptionEvent: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let subscriptionStart = Self(rawValue: "SUBSCRIPTION_START")
    public static let renewal = Self(rawValue: "RENEWAL")
    public static let subscriptionChange = Self(rawValue: "SUBSCRIPTION_CHANGE")
    public static let subscriptionPayment = Self(rawValue: "SUBSCRIPTION_PAYMENT")
    public static let known: [Self] = [.subscriptionStart, .renewal, .subscriptionChange, .subscriptionPayment]
}

/// One line of a report: a `OneTimeBuyLineItem`, a `SubscriptionBuyLineItem` or a `RefundLineItem`.
public struct ExternalPurchaseLineItem: Sendable, Hashable {
    /// What the line reports; the JSON's `eventType` and `productType` follow from it.
    public enum Kind: Sendable, Hashable {
        /// `eventType` BUY, `productType` ONE_TIME_BUY.
        case oneTimeBuy(productIdentifier: String, quantity: Int64)
        /// `eventType` BUY, `productType` SUBSCRIPTION.
        case subscriptionBuy(Subscription)
        /// `eventType` REFUND of the line `referenceLineItemId` (a buy reported before).
        case refund(referenceLineItemId: String)
    }

    public struct Subscription: Sendable, Hashable {
        public var productIdentifier: String
        public var quantity: Int64
        public var event: ExternalPurchaseSubscriptionEvent
        /// The subscription's SUBSCRIPTION_START line; nil on that line itself.
        public var referenceLineItemId: String?
        /// The period this payment covers.
        public var startDateMs: Int64
        public var endDateMs: Int64
        /// Days of paid service before this period (0 for SUBSCRIPTION_START, Apple's examples).
        public var daysOfPaidService: Int64

        public init(productIdentifier: String, quantity: Int64 = 1, event: ExternalPurchaseSubscriptionEvent, referenceLineItemId: String?,
                    startDateMs: Int64, endDateMs: Int64, daysOfPaidService: Int64) {
            self.productIdentifier = productIdentifier
            self.quantity = quantity
            self.event = event
            self.referenceLineItemId = referenceLineItemId
            self.startDateMs = startDateMs
            self.endDateMs = endDateMs
            self.daysOfPaidService = daysOfPaidService
        }
    }

    public var lineItemId: String
    /// When the customer authorized the purchase (or the refund was completed).
    public var creationDateMs: Int64
    public var kind: Kind
    public var pricingCurrency: String
    public var reportingCurrency: String
    /// Only when the customer was billed in a currency Apple does not take for reporting.
    public var exchangeRate: Double?
    public var amountTaxExclusive: Int64
    public var amountTaxInclusive: Int64
    public var taxAmount: Int64
    /// The purchase's net amount after every refund reported so far, tax excluded.
    public var netAmountTaxExclusive: Int64
    /// ISO 3166-1 alpha-3.
    public var taxCountry: String
    public var restatement: Bool
    public var erroneouslySubmitted: Bool

    public init(lineItemId: String, creationDateMs: Int64, kind: Kind, pricingCurrency: String, reportingCurrency: String,
                exchangeRate: Double? = nil, amountTaxExclusive: Int64, amountTaxInclusive: Int64, taxAmount: Int64,
                netAmountTaxExclusive: Int64, taxCountry: String, restatement: Bool = false, erroneouslySubmitted: Bool = false) {
        self.lineItemId = lineItemId
        self.creationDateMs = creationDateMs
        self.kind = kind
        self.pricingCurrency = pricingCurrency
        self.reportingCurrency = reportingCurrency
        self.exchangeRate = exchangeRate
        self.amountTaxExclusive = amountTaxExclusive
        self.amountTaxInclusive = amountTaxInclusive
        self.taxAmount = taxAmount
        self.netAmountTaxExclusive = netAmountTaxExclusive
        self.taxCountry = taxCountry
        self.restatement = restatement
        self.erroneouslySubmitted = erroneouslySubmitted
    }

    public var eventType: String {
        if case .refund = kind { return "REFUND" }
        return "BUY"
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "lineItemId": .string(lineItemId), "creationDate": .int(creationDateMs), "eventType": .string(eventType),
            "pricingCurrency": .string(pricingCurrency), "reportingCurrency": .string(reportingCurrency),
            "amountTaxExclusive": .int(amountTaxExclusive), "amountTaxInclusive": .int(amountTaxInclusive),
            "taxAmount": .int(taxAmount), "netAmountTaxExclusive": .int(netAmountTaxExclusive), "taxCountry": .string(taxCountry),
        ]
        if let exchangeRate { o["exchangeRate"] = .double(exchangeRate) }
        if restatement { o["restatement"] = true }
        if erroneouslySubmitted { o["erroneouslySubmitted"] = true }
        switch kind {
        case .oneTimeBuy(let product, let quantity):
            o["productType"] = "ONE_TIME_BUY"
            o["productIdentifier"] = .string(product)
            o["quantity"] = .int(quantity)
        case .subscriptionBuy(let s):
            o["productType"] = "SUBSCRIPTION"
            o["productIdentifier"] = .string(s.productIdentifier)
            o["quantity"] = .int(s.quantity)
            o["subscriptionEvent"] = .string(s.event.rawValue)
            o["subscriptionStartDate"] = .int(s.startDateMs)
            o["subscriptionEndDate"] = .int(s.endDateMs)
            o["subscriptionDaysOfPaidService"] = .int(s.daysOfPaidService)
            if let ref = s.referenceLineItemId { o["referenceLineItemId"] = .string(ref) }
        case .refund(let ref):
            o["referenceLineItemId"] = .string(ref)
        }
        return .object(o)
    }

    /// Reads a line item as Apple returns it (Retrieve External Purchase Report).
    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "lineItems[]") }
        lineItemId = try json.requiredString("lineItemId")
        creationDateMs = try json.requiredMs("creationDate")
        pricingCurrency = try json.requiredString("pricingCurrency")
        reportingCurrency = try json.requiredString("reportingCurrency")
        exchangeRate = json["exchangeRate"]?.doubleValue
        amountTaxExclusive = try json.requiredMs("amountTaxExclusive")
        amountTaxInclusive = try json.requiredMs("amountTaxInclusive")
        taxAmount = try json.requiredMs("taxAmount")
        netAmountTaxExclusive = try json.requiredMs("netAmountTaxExclusive")
        taxCountry = try json.requiredString("taxCountry")
        restatement = json["restatement"]?.boolValue ?? false
        erroneouslySubmitted = json["erroneouslySubmitted"]?.boolValue ?? false
        switch try json.requiredString("eventType") {
        case "REFUND":
            kind = .refund(referenceLineItemId: try json.requiredString("referenceLineItemId"))
        case "BUY":
            let product = try json.requiredString("productIdentifier")
            let quantity = try json.requiredMs("quantity")
            switch try json.requiredString("productType") {
            case "ONE_TIME_BUY":
                kind = .oneTimeBuy(productIdentifier: product, quantity: quantity)
            case "SUBSCRIPTION":
                kind = .subscriptionBuy(Subscription(
                    productIdentifier: product, quantity: quantity,
                    event: ExternalPurchaseSubscriptionEvent(rawValue: try json.requiredString("subscriptionEvent")),
                    referenceLineItemId: json["referenceLineItemId"]?.stringValue,
                    startDateMs: try json.requiredMs("subscriptionStartDate"), endDateMs: try json.requiredMs("subscriptionEndDate"),
                    daysOfPaidService: try json.requiredMs("subscriptionDaysOfPaidService")))
            default:
                throw PayloadDecodingError(field: "productType")
            }
        default:
            throw PayloadDecodingError(field: "eventType")
        }
    }
}

/// `ExternalPurchaseReport`: the request body of Send External Purchase Report and the answer of Retrieve.
public struct ExternalPurchaseReport: Sendable, Hashable {
    /// A UUID Kakin generates per report and reuses when it resubmits that report after a 400.
    public var requestIdentifier: String
    public var externalPurchaseId: String
    public var status: ExternalPurchaseReportStatus
    /// Empty unless `status` is LINE_ITEM (then at least one).
    public var lineItems: [ExternalPurchaseLineItem]

    public init(requestIdentifier: String, externalPurchaseId: String, status: ExternalPurchaseReportStatus,
                lineItems: [ExternalPurchaseLineItem] = []) {
        self.requestIdentifier = requestIdentifier
        self.externalPurchaseId = externalPurchaseId
        self.status = status
        self.lineItems = lineItems
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "requestIdentifier": .string(requestIdentifier), "externalPurchaseId": .string(externalPurchaseId),
            "status": .string(status.rawValue),
        ]
        if status == .lineItem { o["lineItems"] = .array(lineItems.map(\.json)) }
        return .object(o)
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(report)") }
        requestIdentifier = try json.requiredString("requestIdentifier")
        externalPurchaseId = try json.requiredString("externalPurchaseId")
        status = ExternalPurchaseReportStatus(rawValue: try json.requiredString("status"))
        var items: [ExternalPurchaseLineItem] = []
        if let list = json["lineItems"] {
            guard let array = list.arrayValue else { throw PayloadDecodingError(field: "lineItems") }
            for item in array { items.append(try ExternalPurchaseLineItem(json: item)) }
        }
        lineItems = items
    }
}

/// One entry of a `SendReportErrorResponse`'s `errors` (or a Retrieve's NotFoundError): Apple's error object
/// (`DuplicateValueError`, `OmittedFieldError`, …) with its fixed `errorCode`, `errorMessage` and `fieldName`.
public struct ExternalPurchaseReportError: Error, Sendable, Hashable, CustomStringConvertible {
    public var errorCode: Int
    public var errorMessage: String
    public var fieldName: String?
    /// The line item the error is about (absent for report-level errors such as a duplicate requestIdentifier).
    public var lineItemId: String?

    public init(errorCode: Int, errorMessage: String, fieldName: String?, lineItemId: String? = nil) {
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.fieldName = fieldName
        self.lineItemId = lineItemId
    }

    /// Apple's object name for the code (its documentation lists them in code order), or nil for one Kakin
    /// does not know.
    public var objectName: String? {
        guard errorCode >= 1, errorCode <= Self.objectNames.count else { return nil }
        return Self.objectNames[errorCode - 1]
    }

    public var description: String {
        var text = "\(objectName ?? "error") \(errorCode)"
        if let fieldName { text += " on \(fieldName)" }
        if let lineItemId { text += " of line item \(lineItemId)" }
        return text + ": " + errorMessage
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["errorCode": .int(Int64(errorCode)), "errorMessage": .string(errorMessage)]
        if let fieldName { o["fieldName"] = .string(fieldName) }
        if let lineItemId { o["lineItemId"] = .string(lineItemId) }
        return .object(o)
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .int(let code)? = json["errorCode"], let c = Int(exactly: code) else { throw PayloadDecodingError(field: "errorCode") }
        errorCode = c
        errorMessage = json["errorMessage"]?.stringValue ?? ""
        fieldName = json["fieldName"]?.stringValue
        lineItemId = json["lineItemId"]?.stringValue
    }

    /// `SendReportErrorResponse.errors`' types in Apple's order: `errorCode` n is the n-th.
    public static let objectNames = [
        "DuplicateValueError", "ReportingCurrencyMismatchError", "NotFoundError", "OmittedFieldError", "FieldNotAllowedError",
        "FutureDateError", "UnknownEnumError", "LineItemStatusRegressionError", "MissingLineItemsForStatusError",
        "LineItemsNotAllowedForStatusError", "IncorrectAmountTaxInclusiveError", "IncorrectNetAmountError", "SelfReferenceError",
        "ReferenceInvalidSubscriptionEventError", "NegativeValueNotAllowedError", "PositiveValueRequiredError",
        "StartDateAfterEndDateError", "ReportingCurrencyExchangeNotAllowedError", "MaximumLengthExceededError",
        "ErroneouslySubmittedNotRestatementError", "ReferenceLineItemNotABuyError", "ErroneousLineItemReferencedByValidLineItemError",
        "TaxCountryMismatchError", "NetAmountMismatchError", "ValidLineItemReferencesErroneousLineItemError",
        "SimultaneousSubmissionError", "DateTooFarInPastError", "RefundReferencedByRefundError", "NonInitialBuyReferencedByBuyError",
        "RepeatErroneousSubmissionError", "ReferencedCreationDateIncompatibleError", "PricingCurrencyMismatchError",
        "ExchangeRateMismatchError", "SubscriptionStartNonZeroDaysPaidServiceError", "InvalidTaxInclusiveAmountForSubscriptionPaymentError",
        "LineItemCreationDateOutOfRangeError", "DuplicateTokenStatusNotAllowedError", "RestatementCreationDateMismatchError",
        "RestatementNotAllowedCreationDateError", "RefundNotAllowedCreationDateError",
    ]
}
