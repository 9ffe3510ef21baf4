/// The one catalogue of errors Kakin shows to apps and people. Every case has a stable ID (`KKN-…`) that
/// an app can display and support can look up; `docs/errors.md` is generated from this list
/// (`kakin errors --markdown`) and a test keeps the two equal. Never renumber a case; add new ones.
public enum ErrorKind: String, CaseIterable, Sendable {
    // 1xxx: requests and the server
    case internalError
    case malformedJSON
    case invalidField
    case unsupportedMediaType
    case bodyTooLarge
    case routeNotFound
    case methodNotAllowed
    case invalidCustomerID
    case requestTimeout
    case serviceUnavailable
    case storageUnavailable
    case unauthorized
    case forbidden
    case invalidCursor
    case databaseUnavailable
    case writeOutcomeUnknown
    case writeConflict
    case headersTooLarge
    case uriTooLong
    case storageFull
    // 2xxx: signed data verification (the contract's verification codes)
    case invalidFormat
    case unsupportedAlgorithm
    case untrustedCertificate
    case invalidSignature
    case wrongBundleID
    case wrongAppAppleID
    case wrongEnvironment
    case retryableFailure
    // 2100…2149: Google Play verification (RTDN push tokens)
    case pushTokenInvalid
    case pushTokenKeysUnavailable
    // 3300…3349: Google Play purchases
    case playPurchasePending
    case playPurchaseCancelled
    case playUnknownPackage
    case playAPIUnavailable
    case playAPIFailed
    case playPurchaseNotFound
    case playProductMismatch
    // 3xxx: purchases
    case alreadyProcessed
    case unknownProduct
    case transactionRevoked
    case belongsToAnotherCustomer
    // 3200…3249: the one apply (issue 24)
    case restoreTooLarge
    case appStoreAPINotConfigured
    case transactionNotFound
    case appStoreAPIUnavailable
    case invalidReceipt
    case untrustedReceipt
    case receiptWithoutPurchases
    case receiptForAnotherApp
    // 3050…3099: purchases outside the App Store (generic source, Stripe, Apple's external purchase tokens and reports)
    case externalPurchaseInvalid
    case externalRefundInvalid
    case externalPurchaseNotFound
    case externalPurchaseAlreadyRefunded
    case stripeSignatureMalformed
    case stripeSignatureOutsideTolerance
    case stripeSignatureMismatch
    case stripeEventInvalid
    case stripeMetadataMissing
    case stripeNotConfigured
    case externalPurchaseTokenInvalid
    case externalPurchaseTokenWrongBundleID
    case externalPurchaseTokenWrongAppAppleID
    case externalPurchaseTokenWrongEnvironment
    case externalPurchaseTokenExpired
    case externalPurchaseTokenTypeNotAccepted
    case externalPurchaseReportingNotConfigured
    case externalPurchaseReportRejected
    case externalPurchaseReportNotFound
    // 4xxx: wallet and ledger
    case insufficientBalance
    case idempotencyKeyRequired
    case idempotencyKeyReused
    case invalidAmount
    // 5xxx: App Store operations: offers (5001…5049), renewal-date extensions (5050…)
    case offerNotEligible
    case offerRedemptionLimitReached
    case offerAlreadyPending
    case unknownOffer
    case offerSigningNotConfigured
    case extensionNotAllowed
    case extensionLimitReached
    case invalidExtension
    case extensionRequestNotFound
    case unknownApp
    // 5100…5149: Apple's 2026 additions (Retention Messaging, Finish Transaction, consent)
    case retentionMessagingNotConfigured
    // 5200…5249: offerings, placements, experiments and customer attributes
    case offeringInvalid
    case offeringUnknownProduct
    case storeCatalogNotConfigured
    case placementInvalid
    case offeringNotDefined
    case experimentInvalid
    case experimentOverlaps
    case experimentStarted
    case placementNotDefined
    case offeringNotFound
    case placementNotFound
    case experimentNotFound
    case invalidOfferingsQuery
    case invalidAttributes
    // 6xxx: App Store simulator
    case simulatorUnknownProduct
    case simulatorNotEligible
    case simulatorUnknownSubscription
    case simulatorUnknownTransaction
    case simulatorInvalidAction
    case simulatorInvalidOfferSignature
    case simulatorOfferSignatureExpired
    case simulatorOfferNonceReused
    case simulatorInvalidOfferIdentifier
    case simulatorMissingOfferParameters
    case simulatorInvalidEligibilitySignature
    case simulatorNoExternalPurchaseToken
    case simulatorUnknownExternalPurchaseToken
    // 6100…6149: Google Play simulator
    case playSimulatorUnknownProduct
    case playSimulatorUnknownPurchase
    case playSimulatorInvalidAction
    case playSimulatorUnknownOrder
    // 7xxx: configuration and command line
    case invalidConfiguration
    // 8xxx: KakinKit, the app side: raised in the app (never an HTTP answer); KakinKit's `ClientError`
    // holds the same IDs, codes and sentences, and a test keeps the two equal.
    case appNetworkUnavailable
    case appInvalidServerResponse
    case appStoreFailed
    case appOffersNotSupported
    case appPurchaseStillProcessing
    case appProductUnavailable
    case appDeviceStateUnreadable
    // 9xxx: the support desk and operations
    case adminKeyRefused
    case formTokenInvalid
    case notificationNotFound
    case requestNotFound
    case orderNotFound
    case invalidReportDate
    case customerNotFound
    case backupFailed
    case subscriptionNotFound
    // 9100…9149: events out (webhooks, the feed, replays)
    case webhookNotFound
    case invalidEventQuery
    case invalidReplayRequest
    // 9150…9199: business numbers and export
    case invalidMetricsQuery
    case unknownMetric
    case noExchangeRate
    case exportFailed
    // 9200…9249: imports (moving in an existing app's customers, purchases and balances)
    case importFileInvalid
    case importNotFound
    case importsBusy
    case importRowInvalid
    case importBalanceInvalid
    case importReferenceConflict
    case googlePlayNotConfigured
    case importStoreNotSupported
    case importEnded

    public var id: String {
        switch self {
        case .internalError: return "KKN-1000"
        case .malformedJSON: return "KKN-1001"
        case .invalidField: return "KKN-1002"
        case .unsupportedMediaType: return "KKN-1003"
        case .bodyTooLarge: return "KKN-1004"
        case .routeNotFound: return "KKN-1005"
        case .methodNotAllowed: return "KKN-1006"
        case .invalidCustomerID: return "KKN-1007"
        case .requestTimeout: return "KKN-1008"
        case .serviceUnavailable: return "KKN-1009"
        case .storageUnavailable: return "KKN-1010"
        case .unauthorized: return "KKN-1011"
        case .forbidden: return "KKN-1012"
        case .invalidCursor: return "KKN-1013"
        case .databaseUnavailable: return "KKN-1020"
        case .writeOutcomeUnknown: return "KKN-1021"
        case .writeConflict: return "KKN-1022"
        case .headersTooLarge: return "KKN-1040"
        case .uriTooLong: return "KKN-1041"
        case .storageFull: return "KKN-1042"
        case .invalidFormat: return "KKN-2001"
        case .unsupportedAlgorithm: return "KKN-2002"
        case .untrustedCertificate: return "KKN-2003"
        case .invalidSignature: return "KKN-2004"
        case .wrongBundleID: return "KKN-2005"
        case .wrongAppAppleID: return "KKN-2006"
        case .wrongEnvironment: return "KKN-2007"
        case .retryableFailure: return "KKN-2008"
        case .pushTokenInvalid: return "KKN-2100"
        case .pushTokenKeysUnavailable: return "KKN-2101"
        case .playPurchasePending: return "KKN-3300"
        case .playPurchaseCancelled: return "KKN-3301"
        case .playUnknownPackage: return "KKN-3302"
        case .playAPIUnavailable: return "KKN-3303"
        case .playAPIFailed: return "KKN-3304"
        case .playPurchaseNotFound: return "KKN-3305"
        case .playProductMismatch: return "KKN-3306"
        case .alreadyProcessed: return "KKN-3001"
        case .unknownProduct: return "KKN-3002"
        case .transactionRevoked: return "KKN-3003"
        case .belongsToAnotherCustomer: return "KKN-3004"
        case .restoreTooLarge: return "KKN-3200"
        case .appStoreAPINotConfigured: return "KKN-3005"
        case .transactionNotFound: return "KKN-3006"
        case .appStoreAPIUnavailable: return "KKN-3007"
        case .invalidReceipt: return "KKN-3010"
        case .untrustedReceipt: return "KKN-3011"
        case .receiptWithoutPurchases: return "KKN-3012"
        case .receiptForAnotherApp: return "KKN-3013"
        case .externalPurchaseInvalid: return "KKN-3050"
        case .externalRefundInvalid: return "KKN-3051"
        case .externalPurchaseNotFound: return "KKN-3052"
        case .externalPurchaseAlreadyRefunded: return "KKN-3053"
        case .stripeSignatureMalformed: return "KKN-3055"
        case .stripeSignatureOutsideTolerance: return "KKN-3056"
        case .stripeSignatureMismatch: return "KKN-3057"
        case .stripeEventInvalid: return "KKN-3058"
        case .stripeMetadataMissing: return "KKN-3059"
        case .stripeNotConfigured: return "KKN-3060"
        case .externalPurchaseTokenInvalid: return "KKN-3070"
        case .externalPurchaseTokenWrongBundleID: return "KKN-3071"
        case .externalPurchaseTokenWrongAppAppleID: return "KKN-3072"
        case .externalPurchaseTokenWrongEnvironment: return "KKN-3073"
        case .externalPurchaseTokenExpired: return "KKN-3074"
        case .externalPurchaseTokenTypeNotAccepted: return "KKN-3075"
        case .externalPurchaseReportingNotConfigured: return "KKN-3080"
        case .externalPurchaseReportRejected: return "KKN-3081"
        case .externalPurchaseReportNotFound: return "KKN-3082"
        case .extensionNotAllowed: return "KKN-5050"
        case .extensionLimitReached: return "KKN-5051"
        case .invalidExtension: return "KKN-5052"
        case .extensionRequestNotFound: return "KKN-5053"
        case .unknownApp: return "KKN-5054"
        case .retentionMessagingNotConfigured: return "KKN-5100"
        case .offeringInvalid: return "KKN-5200"
        case .offeringUnknownProduct: return "KKN-5201"
        case .storeCatalogNotConfigured: return "KKN-5202"
        case .placementInvalid: return "KKN-5203"
        case .offeringNotDefined: return "KKN-5204"
        case .experimentInvalid: return "KKN-5205"
        case .experimentOverlaps: return "KKN-5206"
        case .experimentStarted: return "KKN-5207"
        case .placementNotDefined: return "KKN-5208"
        case .offeringNotFound: return "KKN-5209"
        case .placementNotFound: return "KKN-5210"
        case .experimentNotFound: return "KKN-5211"
        case .invalidOfferingsQuery: return "KKN-5212"
        case .invalidAttributes: return "KKN-5213"
        case .insufficientBalance: return "KKN-4001"
        case .idempotencyKeyRequired: return "KKN-4002"
        case .idempotencyKeyReused: return "KKN-4003"
        case .invalidAmount: return "KKN-4004"
        case .offerNotEligible: return "KKN-5001"
        case .offerRedemptionLimitReached: return "KKN-5002"
        case .offerAlreadyPending: return "KKN-5003"
        case .unknownOffer: return "KKN-5004"
        case .offerSigningNotConfigured: return "KKN-5005"
        case .simulatorUnknownProduct: return "KKN-6001"
        case .simulatorNotEligible: return "KKN-6002"
        case .simulatorUnknownSubscription: return "KKN-6003"
        case .simulatorUnknownTransaction: return "KKN-6004"
        case .simulatorInvalidAction: return "KKN-6005"
        case .simulatorInvalidOfferSignature: return "KKN-6010"
        case .simulatorOfferSignatureExpired: return "KKN-6011"
        case .simulatorOfferNonceReused: return "KKN-6012"
        case .simulatorInvalidOfferIdentifier: return "KKN-6013"
        case .simulatorMissingOfferParameters: return "KKN-6014"
        case .simulatorInvalidEligibilitySignature: return "KKN-6015"
        case .simulatorNoExternalPurchaseToken: return "KKN-6030"
        case .simulatorUnknownExternalPurchaseToken: return "KKN-6031"
        case .playSimulatorUnknownProduct: return "KKN-6100"
        case .playSimulatorUnknownPurchase: return "KKN-6101"
        case .playSimulatorInvalidAction: return "KKN-6102"
        case .playSimulatorUnknownOrder: return "KKN-6103"
        case .invalidConfiguration: return "KKN-7001"
        case .appNetworkUnavailable: return "KKN-8001"
        case .appInvalidServerResponse: return "KKN-8002"
        case .appStoreFailed: return "KKN-8003"
        case .appOffersNotSupported: return "KKN-8004"
        case .appPurchaseStillProcessing: return "KKN-8005"
        case .appProductUnavailable: return "KKN-8006"
        case .appDeviceStateUnreadable: return "KKN-8007"
        case .adminKeyRefused: return "KKN-9001"
        case .formTokenInvalid: return "KKN-9002"
        case .notificationNotFound: return "KKN-9003"
        case .requestNotFound: return "KKN-9004"
        case .orderNotFound: return "KKN-9005"
        case .invalidReportDate: return "KKN-9006"
        case .customerNotFound: return "KKN-9007"
        case .backupFailed: return "KKN-9008"
        case .subscriptionNotFound: return "KKN-9050"
        case .webhookNotFound: return "KKN-9100"
        case .invalidEventQuery: return "KKN-9101"
        case .invalidReplayRequest: return "KKN-9102"
        case .invalidMetricsQuery: return "KKN-9150"
        case .unknownMetric: return "KKN-9151"
        case .noExchangeRate: return "KKN-9152"
        case .exportFailed: return "KKN-9153"
        case .importFileInvalid: return "KKN-9200"
        case .importNotFound: return "KKN-9201"
        case .importsBusy: return "KKN-9202"
        case .importRowInvalid: return "KKN-9203"
        case .importBalanceInvalid: return "KKN-9204"
        case .importReferenceConflict: return "KKN-9205"
        case .googlePlayNotConfigured: return "KKN-9206"
        case .importStoreNotSupported: return "KKN-9207"
        case .importEnded: return "KKN-9208"
        }
    }

    /// The contract's snake_case code. Several kinds may share one code (e.g. `invalid_request`) while
    /// keeping their own ID, so support can tell them apart.
    public var code: String {
        switch self {
        case .internalError: return "internal_error"
        case .malformedJSON, .invalidField: return "invalid_request"
        case .unsupportedMediaType: return "unsupported_media_type"
        case .bodyTooLarge: return "payload_too_large"
        case .routeNotFound: return "not_found"
        case .methodNotAllowed: return "method_not_allowed"
        case .invalidCustomerID: return "invalid_customer_id"
        case .requestTimeout: return "request_timeout"
        case .serviceUnavailable: return "service_unavailable"
        case .storageUnavailable: return "storage_unavailable"
        case .unauthorized: return "unauthorized"
        case .forbidden: return "forbidden"
        case .invalidCursor: return "invalid_cursor"
        case .databaseUnavailable, .writeOutcomeUnknown, .writeConflict: return "retryable_failure"
        case .headersTooLarge: return "request_header_fields_too_large"
        case .uriTooLong: return "uri_too_long"
        case .storageFull: return "retryable_failure"
        case .invalidFormat: return "invalid_format"
        case .unsupportedAlgorithm: return "unsupported_algorithm"
        case .untrustedCertificate: return "untrusted_certificate"
        case .invalidSignature: return "invalid_signature"
        case .wrongBundleID: return "wrong_bundle_id"
        case .wrongAppAppleID: return "wrong_app_apple_id"
        case .wrongEnvironment: return "wrong_environment"
        case .retryableFailure: return "retryable_failure"
        case .pushTokenInvalid: return "push_token_invalid"
        case .pushTokenKeysUnavailable: return "push_token_keys_unavailable"
        case .playPurchasePending: return "purchase_pending"
        case .playPurchaseCancelled: return "purchase_cancelled"
        case .playUnknownPackage: return "unknown_package"
        case .playAPIUnavailable: return "google_play_api_unavailable"
        case .playAPIFailed: return "google_play_api_failed"
        case .playPurchaseNotFound: return "purchase_not_found"
        case .playProductMismatch: return "product_mismatch"
        case .alreadyProcessed: return "already_processed"
        case .unknownProduct: return "unknown_product"
        case .transactionRevoked: return "transaction_revoked"
        case .belongsToAnotherCustomer: return "belongs_to_another_customer"
        case .restoreTooLarge: return "restore_too_large"
        case .appStoreAPINotConfigured: return "app_store_api_not_configured"
        case .transactionNotFound: return "transaction_not_found"
        case .appStoreAPIUnavailable: return "app_store_api_unavailable"
        case .invalidReceipt: return "invalid_receipt"
        case .untrustedReceipt: return "untrusted_receipt"
        case .receiptWithoutPurchases: return "receipt_without_purchases"
        case .receiptForAnotherApp: return "wrong_bundle_id"
        case .externalPurchaseInvalid: return "invalid_request"
        case .externalRefundInvalid: return "invalid_amount"
        case .externalPurchaseNotFound: return "not_found"
        case .externalPurchaseAlreadyRefunded: return "already_refunded"
        case .stripeSignatureMalformed, .stripeSignatureOutsideTolerance, .stripeSignatureMismatch: return "invalid_signature"
        case .stripeEventInvalid: return "invalid_request"
        case .stripeMetadataMissing: return "missing_metadata"
        case .stripeNotConfigured: return "not_found"
        case .externalPurchaseTokenInvalid: return "invalid_external_purchase_token"
        case .externalPurchaseTokenWrongBundleID: return "wrong_bundle_id"
        case .externalPurchaseTokenWrongAppAppleID: return "wrong_app_apple_id"
        case .externalPurchaseTokenWrongEnvironment: return "wrong_environment"
        case .externalPurchaseTokenExpired: return "token_expired"
        case .externalPurchaseTokenTypeNotAccepted: return "invalid_token_type"
        case .externalPurchaseReportingNotConfigured: return "external_purchase_reporting_not_configured"
        case .externalPurchaseReportRejected: return "report_rejected"
        case .externalPurchaseReportNotFound: return "not_found"
        case .extensionNotAllowed: return "extension_not_allowed"
        case .extensionLimitReached: return "extension_limit_reached"
        case .invalidExtension: return "invalid_request"
        case .extensionRequestNotFound: return "not_found"
        case .unknownApp: return "unknown_app"
        case .retentionMessagingNotConfigured: return "retention_messaging_not_configured"
        case .offeringInvalid: return "offering_invalid"
        case .offeringUnknownProduct: return "offering_unknown_product"
        case .storeCatalogNotConfigured: return "store_catalog_not_configured"
        case .placementInvalid: return "placement_invalid"
        case .offeringNotDefined: return "offering_not_defined"
        case .experimentInvalid: return "experiment_invalid"
        case .experimentOverlaps: return "experiment_overlaps"
        case .experimentStarted: return "experiment_started"
        case .placementNotDefined: return "placement_not_defined"
        case .offeringNotFound: return "offering_not_found"
        case .placementNotFound: return "placement_not_found"
        case .experimentNotFound: return "experiment_not_found"
        case .invalidOfferingsQuery: return "invalid_offerings_query"
        case .invalidAttributes: return "invalid_attributes"
        case .insufficientBalance: return "insufficient_balance"
        case .idempotencyKeyRequired: return "idempotency_key_required"
        case .idempotencyKeyReused: return "idempotency_key_reused"
        case .invalidAmount: return "invalid_amount"
        case .offerNotEligible, .offerRedemptionLimitReached, .offerAlreadyPending: return "offer_not_eligible"
        case .unknownOffer: return "unknown_offer"
        case .offerSigningNotConfigured: return "offer_signing_not_configured"
        case .simulatorUnknownProduct: return "unknown_product"
        case .simulatorNotEligible: return "not_eligible"
        case .simulatorUnknownSubscription: return "unknown_subscription"
        case .simulatorUnknownTransaction: return "unknown_transaction"
        case .simulatorInvalidAction: return "invalid_action"
        case .simulatorInvalidOfferSignature, .simulatorOfferSignatureExpired, .simulatorOfferNonceReused,
            .simulatorInvalidEligibilitySignature:
            return "invalid_offer_signature"
        case .simulatorInvalidOfferIdentifier: return "invalid_offer_identifier"
        case .simulatorMissingOfferParameters: return "missing_offer_parameters"
        case .simulatorNoExternalPurchaseToken: return "token_unavailable"
        case .simulatorUnknownExternalPurchaseToken: return "unknown_token"
        case .playSimulatorUnknownProduct: return "unknown_product"
        case .playSimulatorUnknownPurchase: return "unknown_purchase"
        case .playSimulatorInvalidAction: return "invalid_action"
        case .playSimulatorUnknownOrder: return "unknown_order"
        case .invalidConfiguration: return "invalid_configuration"
        case .appNetworkUnavailable: return "network_unavailable"
        case .appInvalidServerResponse: return "invalid_server_response"
        case .appStoreFailed: return "store_failed"
        case .appOffersNotSupported: return "offers_not_supported"
        case .appPurchaseStillProcessing: return "purchase_still_processing"
        case .appProductUnavailable: return "product_unavailable"
        case .appDeviceStateUnreadable: return "device_state_unreadable"
        case .adminKeyRefused: return "admin_key_refused"
        case .formTokenInvalid: return "form_token_invalid"
        case .notificationNotFound: return "notification_not_found"
        case .requestNotFound: return "request_not_found"
        case .orderNotFound: return "order_not_found"
        case .invalidReportDate: return "invalid_report_date"
        case .customerNotFound: return "customer_not_found"
        case .backupFailed: return "backup_failed"
        case .subscriptionNotFound: return "subscription_not_found"
        case .webhookNotFound: return "webhook_not_found"
        case .invalidEventQuery, .invalidReplayRequest: return "invalid_request"
        case .invalidMetricsQuery: return "invalid_request"
        case .unknownMetric: return "not_found"
        case .noExchangeRate: return "no_exchange_rate"
        case .exportFailed: return "export_failed"
        case .importFileInvalid: return "invalid_import_file"
        case .importNotFound: return "import_not_found"
        case .importsBusy: return "too_many_imports"
        case .importRowInvalid: return "invalid_import_row"
        case .importBalanceInvalid: return "invalid_balance"
        case .importReferenceConflict: return "import_reference_conflict"
        case .googlePlayNotConfigured: return "google_play_not_configured"
        case .importStoreNotSupported: return "unsupported_store"
        case .importEnded: return "import_ended"
        }
    }

    public var httpStatus: Int {
        switch self {
        case .internalError: return 500
        case .malformedJSON, .invalidField, .invalidCustomerID, .invalidCursor, .idempotencyKeyRequired, .invalidAmount,
            .invalidReceipt, .invalidExtension:
            return 400
        case .unsupportedMediaType: return 415
        case .bodyTooLarge, .restoreTooLarge: return 413
        case .routeNotFound: return 404
        case .methodNotAllowed: return 405
        case .requestTimeout, .serviceUnavailable, .storageUnavailable, .retryableFailure, .appStoreAPIUnavailable, .storageFull,
            .databaseUnavailable, .writeOutcomeUnknown, .writeConflict:
            return 503
        case .headersTooLarge: return 431
        case .uriTooLong: return 414
        case .unauthorized: return 401
        case .forbidden, .belongsToAnotherCustomer, .offerNotEligible, .offerRedemptionLimitReached, .offerAlreadyPending: return 403
        case .invalidFormat, .unsupportedAlgorithm, .untrustedCertificate, .invalidSignature, .wrongBundleID,
            .wrongAppAppleID, .wrongEnvironment, .unknownProduct, .transactionRevoked,
            .idempotencyKeyReused, .untrustedReceipt, .receiptWithoutPurchases, .receiptForAnotherApp, .unknownOffer:
            return 422
        case .appStoreAPINotConfigured, .offerSigningNotConfigured: return 501
        case .transactionNotFound, .extensionRequestNotFound, .unknownApp, .retentionMessagingNotConfigured: return 404
        case .offeringNotFound, .placementNotFound, .experimentNotFound: return 404
        case .invalidOfferingsQuery, .invalidAttributes: return 400
        case .offeringInvalid, .offeringUnknownProduct, .storeCatalogNotConfigured, .placementInvalid,
            .offeringNotDefined, .experimentInvalid, .experimentOverlaps, .experimentStarted,
            .placementNotDefined:
            return 422
        case .extensionNotAllowed, .extensionLimitReached: return 409
        case .alreadyProcessed, .insufficientBalance: return 409
        case .simulatorUnknownProduct, .simulatorNotEligible, .simulatorInvalidAction, .simulatorInvalidOfferSignature,
            .simulatorOfferSignatureExpired, .simulatorOfferNonceReused, .simulatorInvalidOfferIdentifier,
            .simulatorMissingOfferParameters, .simulatorInvalidEligibilitySignature:
            return 422
        case .simulatorUnknownSubscription, .simulatorUnknownTransaction: return 404
        case .invalidConfiguration: return 2
        case .externalPurchaseInvalid, .externalRefundInvalid, .stripeSignatureMalformed, .stripeSignatureOutsideTolerance,
            .stripeSignatureMismatch, .stripeEventInvalid, .externalPurchaseTokenInvalid:
            return 400
        case .externalPurchaseNotFound, .stripeNotConfigured, .externalPurchaseReportNotFound: return 404
        case .externalPurchaseAlreadyRefunded: return 409
        case .stripeMetadataMissing, .externalPurchaseTokenWrongBundleID, .externalPurchaseTokenWrongAppAppleID,
            .externalPurchaseTokenWrongEnvironment, .externalPurchaseTokenExpired, .externalPurchaseTokenTypeNotAccepted,
            .externalPurchaseReportRejected:
            return 422
        case .externalPurchaseReportingNotConfigured: return 501
        case .simulatorNoExternalPurchaseToken, .simulatorUnknownExternalPurchaseToken: return 404
        case .pushTokenInvalid: return 401
        case .pushTokenKeysUnavailable: return 503
        case .playPurchasePending, .playPurchaseCancelled, .playUnknownPackage, .playPurchaseNotFound, .playProductMismatch: return 422
        case .playAPIUnavailable: return 503
        case .playAPIFailed: return 502
        case .playSimulatorUnknownProduct, .playSimulatorInvalidAction: return 422
        case .playSimulatorUnknownPurchase, .playSimulatorUnknownOrder: return 404
        // Never sent by the server: the app raises these itself.
        case .appNetworkUnavailable, .appInvalidServerResponse, .appStoreFailed, .appOffersNotSupported,
            .appPurchaseStillProcessing, .appProductUnavailable, .appDeviceStateUnreadable:
            return 0
        case .adminKeyRefused: return 401
        case .formTokenInvalid: return 403
        case .notificationNotFound, .requestNotFound, .orderNotFound, .customerNotFound, .subscriptionNotFound: return 404
        case .invalidReportDate: return 400
        case .backupFailed: return 500
        case .webhookNotFound: return 404
        case .invalidEventQuery, .invalidReplayRequest: return 400
        case .invalidMetricsQuery: return 400
        case .unknownMetric: return 404
        case .noExchangeRate: return 422
        case .exportFailed: return 500
        case .importFileInvalid: return 400
        case .importNotFound: return 404
        case .importsBusy: return 429
        case .importRowInvalid: return 422
        case .importBalanceInvalid: return 422
        case .importReferenceConflict: return 409
        case .googlePlayNotConfigured: return 422
        case .importStoreNotSupported: return 422
        case .importEnded: return 409
        }
    }

    /// The default one-sentence message. Never contains tokens, keys or whole JWS.
    public var defaultMessage: String {
        switch self {
        case .internalError: return "Something went wrong on the server; the request may be retried."
        case .malformedJSON: return "The request body is not valid JSON."
        case .invalidField: return "A field of the request is missing or has the wrong type or value."
        case .unsupportedMediaType: return "The request body must be JSON (Content-Type: application/json)."
        case .bodyTooLarge: return "The request body is larger than the server accepts."
        case .routeNotFound: return "No such endpoint."
        case .methodNotAllowed: return "This endpoint does not accept that HTTP method."
        case .invalidCustomerID: return "The customer ID must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ -."
        case .requestTimeout: return "The server did not finish the request in time; retry it."
        case .serviceUnavailable: return "The server is shutting down or overloaded; retry shortly."
        case .storageUnavailable: return "The database could not complete the request; retry it."
        case .unauthorized: return "Missing or invalid credentials."
        case .forbidden: return "These credentials may not do this."
        case .invalidCursor: return "The cursor is not one this server issued."
        case .databaseUnavailable: return "The database cannot be reached right now (restart or failover); nothing was changed. Retry shortly."
        case .writeOutcomeUnknown: return "The database connection broke while saving; retry the same request (it is never applied twice)."
        case .writeConflict: return "Too many concurrent changes to the same data; nothing was changed. Retry shortly."
        case .headersTooLarge: return "The request line and headers are larger than the server accepts."
        case .uriTooLong: return "The request's path and query are longer than the server accepts."
        case .storageFull: return "The database is out of disk space; nothing was changed, retry later."
        case .invalidFormat: return "The signed data is not a well-formed App Store JWS."
        case .unsupportedAlgorithm: return "The signed data uses an algorithm other than ES256."
        case .untrustedCertificate: return "The signing certificates do not chain to a trusted Apple root, lack Apple's markers, or were not valid when the data was signed."
        case .invalidSignature: return "The signature does not match the signed data."
        case .wrongBundleID: return "The signed data belongs to another app (bundle ID)."
        case .wrongAppAppleID: return "The signed data belongs to another app (app Apple ID)."
        case .wrongEnvironment: return "The signed data comes from an environment this server does not accept."
        case .retryableFailure: return "The signature could not be checked right now; retry later."
        case .alreadyProcessed: return "This transaction was already applied; finish it in the app."
        case .unknownProduct: return "The product is not in this server's catalog."
        case .transactionRevoked: return "The transaction was refunded or revoked and grants nothing."
        case .belongsToAnotherCustomer: return "The transaction is linked to another customer."
        case .restoreTooLarge: return "The purchase history is too large to restore in one request; restore one transaction at a time."
        case .appStoreAPINotConfigured: return "The App Store Server API is not configured on this server."
        case .transactionNotFound: return "The App Store does not know this transaction."
        case .appStoreAPIUnavailable: return "The App Store Server API could not be reached; retry later."
        case .invalidReceipt: return "The app receipt is not a readable App Store receipt (base64 PKCS#7); it may be truncated."
        case .untrustedReceipt: return "The app receipt's signature does not verify against a trusted root."
        case .receiptWithoutPurchases: return "The app receipt lists no in-app purchase to apply."
        case .receiptForAnotherApp: return "The app receipt belongs to another app (bundle ID)."
        case .externalPurchaseInvalid: return "An external purchase needs provider, externalId, productId, price (whole minor units), currency (ISO 4217) and purchasedAt (RFC 3339); expiresAt, if given, after purchasedAt."
        case .externalRefundInvalid: return "A refund amount must be a whole number of minor units from 1 to what remains unrefunded."
        case .externalPurchaseNotFound: return "No external purchase has this provider and externalId."
        case .externalPurchaseAlreadyRefunded: return "This external purchase was already refunded in full."
        case .stripeSignatureMalformed: return "The Stripe-Signature header is missing or has no t= timestamp and v1= signature."
        case .stripeSignatureOutsideTolerance: return "The Stripe-Signature timestamp is farther from now than the tolerance (a replay, or a clock far off)."
        case .stripeSignatureMismatch: return "No v1 signature in Stripe-Signature matches the app's webhook secret."
        case .stripeEventInvalid: return "The body is not a Stripe event of a shape Kakin reads (or a field it needs is missing)."
        case .stripeMetadataMissing: return "The Stripe object lacks the customer or product metadata key named in the app's stripe config."
        case .stripeNotConfigured: return "This app has no Stripe webhook configured."
        case .externalPurchaseTokenInvalid: return "The external purchase token is not Base64URL-encoded JSON with appAppleId, bundleId, tokenCreationDate and externalPurchaseId."
        case .externalPurchaseTokenWrongBundleID: return "The external purchase token belongs to another app (bundle ID)."
        case .externalPurchaseTokenWrongAppAppleID: return "The external purchase token belongs to another app (app Apple ID)."
        case .externalPurchaseTokenWrongEnvironment: return "The external purchase token comes from an environment this app does not accept (SANDBOX… tokens are Sandbox)."
        case .externalPurchaseTokenExpired: return "The custom link token had expired when the purchase was made; name a token active at the time of the purchase."
        case .externalPurchaseTokenTypeNotAccepted: return "The external purchase token's type is not one Kakin knows (ACQUISITION, SERVICES, IN_APP, LINK_OUT)."
        case .externalPurchaseReportingNotConfigured: return "External purchase reporting is not configured for this app (externalPurchaseReporting and appStoreServerAPI)."
        case .externalPurchaseReportRejected: return "Apple refused the external purchase report's line items; fix them and resend with the same requestIdentifier."
        case .externalPurchaseReportNotFound: return "No external purchase report has this requestIdentifier."
        case .extensionNotAllowed: return "The App Store does not extend this subscription now (free offer period, billing retry or grace period, expired, revoked, or family-shared)."
        case .extensionLimitReached: return "This subscription was already extended twice in the last 365 days."
        case .invalidExtension: return "An extension needs days from 1 to 90 and a reason: undeclared, customerSatisfaction, other or serviceIssueOrOutage."
        case .extensionRequestNotFound: return "The App Store knows no renewal-date extension request with this ID for this product."
        case .unknownApp: return "This server has no app with that bundle ID."
        case .retentionMessagingNotConfigured: return "This app has no retentionMessaging rules: the App Store shows its default message."
        case .offeringInvalid: return "The offering is not valid: the message names the field."
        case .offeringUnknownProduct: return "A package names a product that is not in that store's catalog."
        case .storeCatalogNotConfigured: return "A package names a product in a store this server has no catalog for (Google Play until its catalog is configured)."
        case .placementInvalid: return "The placement is not valid: the message names the field."
        case .offeringNotDefined: return "A placement rule, its default or an experiment variant names an offering that does not exist."
        case .experimentInvalid: return "The experiment is not valid (2 to 4 variants with positive weights, enrollmentPercent 0 to 100, endsAt after startsAt): the message names the field."
        case .experimentOverlaps: return "Another experiment runs on the same placement at the same time."
        case .experimentStarted: return "A started experiment keeps its placement, startsAt and variant ids."
        case .placementNotDefined: return "The experiment names a placement that does not exist."
        case .offeringNotFound: return "No offering with this id."
        case .placementNotFound: return "No placement with this id."
        case .experimentNotFound: return "No experiment with this id."
        case .invalidOfferingsQuery: return "The query needs placement and platform (ios, android or web); appVersion is dot-separated numbers, country an ISO 3166-1 alpha-2 code."
        case .invalidAttributes: return "Attributes are a JSON object of keys to strings (null removes one), at most 50 per customer."
        case .insufficientBalance: return "Not enough coins; nothing was spent."
        case .idempotencyKeyRequired: return "The Idempotency-Key header is required (1 to 255 characters)."
        case .idempotencyKeyReused: return "This Idempotency-Key was used with a different request."
        case .invalidAmount: return "The amount must be a positive whole number of coins within limits."
        case .offerNotEligible: return "The app's offer rules do not give this customer this offer."
        case .offerRedemptionLimitReached: return "The customer already redeemed this offer as many times as the app's offer rules allow."
        case .offerAlreadyPending: return "The same offer already waits for the subscription's next renewal."
        case .unknownOffer: return "The product has no promotional offer with this ID in this server's catalog."
        case .offerSigningNotConfigured: return "No In-App Purchase key is configured to sign offers (offerSigning or appStoreServerAPI)."
        case .simulatorUnknownProduct: return "The simulator's catalog has no such product."
        case .simulatorNotEligible: return "The App Store would refuse this purchase (not eligible for the offer)."
        case .simulatorUnknownSubscription: return "The simulator has no such subscription."
        case .simulatorUnknownTransaction: return "The simulator has no such transaction."
        case .simulatorInvalidAction: return "The simulator cannot apply this action in the subscription's current state."
        case .simulatorInvalidOfferSignature: return "The offer signature does not verify for this purchase with the app's keys (StoreKit: invalidOfferSignature)."
        case .simulatorOfferSignatureExpired: return "The offer signature is more than 24 hours away from the App Store's time (StoreKit: invalidOfferSignature)."
        case .simulatorOfferNonceReused: return "The offer signature's nonce was already used for a purchase (StoreKit: invalidOfferSignature)."
        case .simulatorInvalidOfferIdentifier: return "The product has no offer with this identifier (StoreKit: invalidOfferIdentifier)."
        case .simulatorMissingOfferParameters: return "A promotional offer needs a signature (StoreKit: missingOfferParameters)."
        case .simulatorInvalidEligibilitySignature: return "The introductory offer eligibility JWS does not verify for this purchase (StoreKit: invalidOfferSignature)."
        case .simulatorNoExternalPurchaseToken: return "The App Store has no active external purchase token of this type for the account (StoreKit: token(for:) returns nil)."
        case .simulatorUnknownExternalPurchaseToken: return "The simulator issued no external purchase token with this externalPurchaseId."
        case .pushTokenInvalid: return "The push request's bearer token is missing, or not a valid OIDC token from the configured service account for this endpoint."
        case .pushTokenKeysUnavailable: return "The keys that sign push tokens could not be fetched; the push is retried later."
        case .playPurchasePending: return "The Google Play purchase is still pending payment; send it again once it completes."
        case .playPurchaseCancelled: return "The Google Play purchase was cancelled or refunded; nothing is granted."
        case .playUnknownPackage: return "The Google Play package is not configured on this server."
        case .playAPIUnavailable: return "The Google Play Developer API could not be reached; try again later."
        case .playAPIFailed: return "The Google Play Developer API refused the request; try again later."
        case .playPurchaseNotFound: return "Google Play does not know this purchase token for this package and product."
        case .playProductMismatch: return "The purchase token is for another product than the one sent."
        case .playSimulatorUnknownProduct: return "The Play simulator's catalog has no such product, base plan or offer."
        case .playSimulatorUnknownPurchase: return "The Play simulator has no purchase with this purchase token."
        case .playSimulatorInvalidAction: return "This action is not possible for the purchase in its current state."
        case .playSimulatorUnknownOrder: return "The Play simulator has no order with this order ID."
        case .invalidConfiguration: return "The configuration is invalid."
        case .appNetworkUnavailable: return "Kakin could not be reached; a paid purchase stays unfinished and is retried later."
        case .appInvalidServerResponse: return "Kakin's answer could not be read; a paid purchase stays unfinished and is retried later."
        case .appStoreFailed: return "The App Store could not complete the request; nothing was charged by this attempt."
        case .appOffersNotSupported: return "This Kakin server does not sign offers yet."
        case .appPurchaseStillProcessing: return "Your previous purchase of this item is still being processed."
        case .appProductUnavailable: return "The App Store does not offer this product."
        case .appDeviceStateUnreadable: return "The purchases saved on this device could not be read or written."
        case .adminKeyRefused: return "That key is not an admin API key of this server."
        case .formTokenInvalid: return "The form is stale or did not come from this site; reload the page and try again."
        case .notificationNotFound: return "No stored notification has this notificationUUID."
        case .requestNotFound: return "No recent error has this request ID (errors are kept 30 days, at most 100,000)."
        case .orderNotFound: return "The App Store knows no purchase with this order ID."
        case .invalidReportDate: return "asOf must be a calendar date written YYYY-MM-DD."
        case .customerNotFound: return "No customer has this ID."
        case .backupFailed: return "The backup could not be written; the database is unchanged."
        case .subscriptionNotFound: return "This customer has no subscription with this original transaction ID."
        case .webhookNotFound: return "No webhook endpoint with this ID is configured (events.webhooks)."
        case .invalidEventQuery: return "The event feed takes limit 1 to 500, afterSequence a whole number of 0 or more, and types as event type names or prefixes ending in .* (or *), separated by commas."
        case .invalidReplayRequest: return "A replay takes eventIds (1 to 1,000 event IDs) or since (an RFC 3339 time), not both."
        case .invalidMetricsQuery: return "Metrics take from and to as dates YYYY-MM-DD (from not after to, at most 3,660 days), interval day, week or month (at most 1,000 points), and a configured bundleId."
        case .unknownMetric: return "No metric has this name (activeSubscriptions, activeTrials, newSubscriptions, trialConversions, churned, mrr, revenue, refunds, coins)."
        case .noExchangeRate: return "A reporting currency needs exchangeRates in the configuration with a rate for it and for every currency counted."
        case .exportFailed: return "The export could not be written; no partial file was left in place."
        case .importFileInvalid: return "The import file is empty or malformed (the message names the line); no import was started."
        case .importNotFound: return "No import has this ID."
        case .importsBusy: return "As many imports as the server takes at once are queued or running; wait for one to end."
        case .importRowInvalid: return "A field of the import row is missing or malformed; the row was not imported."
        case .importBalanceInvalid: return "paid and free must be whole numbers of coins (at most 100,000,000 either way); the row was not imported."
        case .importReferenceConflict: return "This reference was imported before for another customer or other amounts; the row was not imported."
        case .googlePlayNotConfigured: return "Google Play is not configured on this server; the row was not imported."
        case .importStoreNotSupported: return "Kakin imports App Store (and Google Play) purchases; this row is from another store and was not imported."
        case .importEnded: return "The import has already ended; there is nothing to cancel."
        }
    }
}

/// An error as a value: a catalogue kind plus a safe message for the caller and a detail for logs only.
public struct KakinError: Error, Sendable, CustomStringConvertible {
    public var kind: ErrorKind
    /// Shown to the caller; one sentence, no secrets.
    public var message: String
    /// Logged, never returned (may name internal state; still never a token or key).
    public var detail: String?
    /// Overrides the catalogue's HTTP status where an endpoint's contract says so.
    public var httpStatus: Int
    /// When a retry may succeed (UNIX ms), where the failing side said so (the App Store's 429 `Retry-After`).
    public var retryAfterMs: Int64? = nil

    public init(_ kind: ErrorKind, _ message: String? = nil, detail: String? = nil, httpStatus: Int? = nil) {
        self.kind = kind
        self.message = message ?? kind.defaultMessage
        self.detail = detail
        self.httpStatus = httpStatus ?? kind.httpStatus
    }

    public var description: String { "\(kind.id) \(kind.code): \(message)" + (detail.map { " (\($0))" } ?? "") }

    /// The contract's error body.
    public func body(requestId: String) -> JSONValue {
        ["error": ["code": .string(kind.code), "id": .string(kind.id), "message": .string(message), "requestId": .string(requestId)]]
    }
}

extension ErrorKind {
    /// KakinKit's errors (KKN-8xxx): the app raises them itself (no network, an unreadable answer, the store).
    public var isRaisedInApp: Bool { id.hasPrefix("KKN-8") }

    /// `docs/errors.md`, generated from this catalogue.
    public static func markdownCatalogue() -> String {
        var lines = [
            "# Kakin error catalogue",
            "",
            "Generated from `Sources/KakinCore/Errors/ErrorCatalogue.swift` by `kakin errors --markdown`; a test keeps",
            "this file equal to the code. Every non-2xx answer carries one of these in",
            "`{\"error\": {\"code\", \"id\", \"message\", \"requestId\"}}`. IDs are stable: apps may show them and",
            "support can look them up here. (Configuration errors are reported by the command line with exit code 2;",
            "`KKN-8xxx` are raised in the app by KakinKit, never answered by the server.)",
            "",
            "| ID | code | HTTP | meaning |",
            "|---|---|---|---|",
        ]
        for kind in allCases {
            let status = kind == .invalidConfiguration ? "exit 2" : kind.isRaisedInApp ? "app" : String(kind.httpStatus)
            lines.append("| \(kind.id) | `\(kind.code)` | \(status) | \(kind.defaultMessage) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
