/// What went wrong, with the `KKN-…` ID the app shows so that support can look it up (`docs/errors.md`).
/// Kakin's own errors keep the ID of its error body; failures that happen in the app (no network, an
/// unreadable answer, the store refusing) carry KakinKit's IDs (`ClientError`, KKN-8001…).
public struct KakinKitError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `KKN-…`: show it to the user next to the message.
    public var id: String
    /// The contract's snake_case code (`already_processed`, `network_unavailable`, …).
    public var code: String
    /// One sentence, safe to show.
    public var message: String
    /// Kakin's request ID when the error came from Kakin (support finds the request by it).
    public var requestId: String?
    /// The HTTP status when the error came from an HTTP answer.
    public var httpStatus: Int?

    public init(id: String, code: String, message: String, requestId: String? = nil, httpStatus: Int? = nil) {
        self.id = id
        self.code = code
        self.message = message
        self.requestId = requestId
        self.httpStatus = httpStatus
    }

    /// One of KakinKit's own errors; `message` replaces the catalogue's sentence where more is known.
    public init(_ kind: ClientError, message: String? = nil) {
        self.init(id: kind.id, code: kind.code, message: message ?? kind.message)
    }

    /// Worth trying again later with the same transaction: the network, Kakin overloaded or restarting,
    /// a verification check Kakin could not complete. Anything else needs a person or a new build.
    public var isRetryable: Bool {
        if id == ClientError.networkUnavailable.id || id == ClientError.invalidServerResponse.id { return true }
        guard let httpStatus else { return false }
        return httpStatus >= 500 || httpStatus == 429 || httpStatus == 408
    }

    public var description: String { "\(id) \(code): \(message)" }
}

/// KakinKit's own error IDs. The root package's catalogue (`Sources/KakinCore/Errors/ErrorCatalogue.swift`)
/// lists the same IDs, codes and sentences, and a test there keeps the two equal, so `docs/errors.md`
/// explains every ID an app can show.
public enum ClientError: String, CaseIterable, Sendable {
    case networkUnavailable
    case invalidServerResponse
    case storeFailed
    case offersNotSupported
    case purchaseStillProcessing
    case productUnavailable
    case deviceStateUnreadable

    public var id: String {
        switch self {
        case .networkUnavailable: return "KKN-8001"
        case .invalidServerResponse: return "KKN-8002"
        case .storeFailed: return "KKN-8003"
        case .offersNotSupported: return "KKN-8004"
        case .purchaseStillProcessing: return "KKN-8005"
        case .productUnavailable: return "KKN-8006"
        case .deviceStateUnreadable: return "KKN-8007"
        }
    }

    public var code: String {
        switch self {
        case .networkUnavailable: return "network_unavailable"
        case .invalidServerResponse: return "invalid_server_response"
        case .storeFailed: return "store_failed"
        case .offersNotSupported: return "offers_not_supported"
        case .purchaseStillProcessing: return "purchase_still_processing"
        case .productUnavailable: return "product_unavailable"
        case .deviceStateUnreadable: return "device_state_unreadable"
        }
    }

    public var message: String {
        switch self {
        case .networkUnavailable: return "Kakin could not be reached; a paid purchase stays unfinished and is retried later."
        case .invalidServerResponse: return "Kakin's answer could not be read; a paid purchase stays unfinished and is retried later."
        case .storeFailed: return "The App Store could not complete the request; nothing was charged by this attempt."
        case .offersNotSupported: return "This Kakin server does not sign offers yet."
        case .purchaseStillProcessing: return "Your previous purchase of this item is still being processed."
        case .productUnavailable: return "The App Store does not offer this product."
        case .deviceStateUnreadable: return "The purchases saved on this device could not be read or written."
        }
    }
}
