import KakinCore

/// An App Store Server API error as Apple sends it: an HTTP status and `{"errorCode", "errorMessage"}`
/// with Apple's numeric codes, so clients written for Apple branch the same way.
struct AppStoreAPIError: Error, Sendable, Equatable {
    var httpStatus: Int
    var errorCode: Int
    var errorMessage: String

    init(_ httpStatus: Int, _ errorCode: Int, _ errorMessage: String) {
        self.httpStatus = httpStatus
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }

    var json: JSONValue { ["errorCode": .int(Int64(errorCode)), "errorMessage": .string(errorMessage)] }

    static let generalBadRequest = Self(400, 4_000_000, "Bad request.")
    static let invalidRequestRevision = Self(400, 4_000_005, "Invalid request revision.")
    static let invalidTransactionId = Self(400, 4_000_006, "Invalid transaction id.")
    static let invalidOriginalTransactionId = Self(400, 4_000_008, "Invalid original transaction id.")
    static let invalidExtendByDays = Self(400, 4_000_009, "Invalid extend by days value.")
    static let invalidExtendReasonCode = Self(400, 4_000_010, "Invalid extend reason code.")
    static let invalidRequestIdentifier = Self(400, 4_000_011, "Invalid request identifier.")
    static let startDateTooFarInPast = Self(400, 4_000_012, "Start date too far in the past.")
    static let startDateAfterEndDate = Self(400, 4_000_013, "Start date after end date.")
    static let invalidPaginationToken = Self(400, 4_000_014, "Invalid pagination token.")
    static let invalidStartDate = Self(400, 4_000_015, "Invalid start date.")
    static let invalidEndDate = Self(400, 4_000_016, "Invalid end date.")
    static let invalidNotificationType = Self(400, 4_000_018, "Invalid notification type.")
    static let multipleFiltersSupplied = Self(400, 4_000_019, "Multiple filters supplied.")
    static let invalidTestNotificationToken = Self(400, 4_000_020, "Invalid test notification token.")
    static let invalidSort = Self(400, 4_000_021, "Invalid sort.")
    static let invalidProductType = Self(400, 4_000_022, "Invalid product type.")
    static let invalidProductId = Self(400, 4_000_023, "Invalid product id.")
    static let invalidSubscriptionGroupIdentifier = Self(400, 4_000_024, "Invalid subscription group identifier.")
    static let invalidExcludeRevoked = Self(400, 4_000_025, "Invalid exclude revoked.")
    static let invalidInAppOwnershipType = Self(400, 4_000_026, "Invalid in-app ownership type.")
    static let invalidEmptyStorefrontCountryCodeList = Self(400, 4_000_027, "Invalid empty storefront country code list.")
    static let invalidStorefrontCountryCode = Self(400, 4_000_028, "Invalid storefront country code.")
    static let invalidRevoked = Self(400, 4_000_030, "Invalid revoked.")
    static let invalidStatus = Self(400, 4_000_031, "Invalid status.")
    static let invalidAccountTenure = Self(400, 4_000_032, "Invalid account tenure.")
    static let invalidAppAccountToken = Self(400, 4_000_033, "Invalid app account token.")
    static let invalidConsumptionStatus = Self(400, 4_000_034, "Invalid consumption status.")
    static let invalidCustomerConsented = Self(400, 4_000_035, "Invalid customer consented.")
    static let invalidDeliveryStatus = Self(400, 4_000_036, "Invalid delivery status.")
    static let invalidLifetimeDollarsPurchased = Self(400, 4_000_037, "Invalid lifetime dollars purchased.")
    static let invalidLifetimeDollarsRefunded = Self(400, 4_000_038, "Invalid lifetime dollars refunded.")
    static let invalidPlatform = Self(400, 4_000_039, "Invalid platform.")
    static let invalidPlayTime = Self(400, 4_000_040, "Invalid play time.")
    static let invalidSampleContentProvided = Self(400, 4_000_041, "Invalid sample content provided.")
    static let invalidUserStatus = Self(400, 4_000_042, "Invalid user status.")
    static let invalidTransactionNotConsumable = Self(400, 4_000_043, "Invalid transaction not consumable.")
    static let invalidAppAccountTokenUUID = Self(400, 4_000_183, "Invalid request. The app account token field must be a valid UUID.")
    static let familyTransactionNotSupported = Self(400, 4_000_185,
                                                    "Invalid request. Family Sharing transactions aren't supported by this endpoint.")
    static let transactionIdIsNotOriginalTransactionId = Self(400, 4_000_187,
                                                              "Invalid request. The transaction ID provided is not an original transaction ID.")
    static let subscriptionExtensionIneligible = Self(403, 4_030_004, "Subscription extension ineligible.")
    static let subscriptionMaxExtension = Self(403, 4_030_005, "Subscription max extension.")
    static let familySharedSubscriptionExtensionIneligible = Self(403, 4_030_007, "Family shared subscription extension ineligible.")
    static let originalTransactionIdNotFound = Self(404, 4_040_005, "Original transaction id not found.")
    static let serverNotificationURLNotFound = Self(404, 4_040_007, "Server notification URL not found.")
    static let testNotificationNotFound = Self(404, 4_040_008, "Test notification not found.")
    static let statusRequestNotFound = Self(404, 4_040_009, "Status request not found.")
    static let transactionIdNotFound = Self(404, 4_040_010, "Transaction id not found.")
    static let appTransactionDoesNotExist = Self(404, 4_040_019, "No AppTransaction exists for the customer.")
}
