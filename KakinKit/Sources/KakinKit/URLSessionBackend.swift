import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Kakin over HTTP(S) with URLSession. With customer tokens configured on the server, give
/// `customerToken`: it returns the bearer JWT your auth server issued for the customer.
public struct URLSessionBackend: Backend {
    public let baseURL: URL
    let session: URLSession
    let customerToken: (@Sendable (_ customerID: String) async throws -> String?)?

    /// Kakin's answers are small; anything larger is not Kakin.
    public static let responseBytesMax = 4 << 20
    public static let requestTimeoutSeconds: TimeInterval = 20

    /// - Parameters:
    ///   - baseURL: Kakin's root, e.g. `https://billing.example.com`.
    ///   - session: defaults to an ephemeral session with a 20-second request timeout.
    ///   - customerToken: the bearer token for a customer's requests; nil when Kakin runs without auth (local mode).
    public init(baseURL: URL, session: URLSession? = nil,
                customerToken: (@Sendable (_ customerID: String) async throws -> String?)? = nil) {
        self.baseURL = baseURL
        self.session = session ?? Self.defaultSession
        self.customerToken = customerToken
    }

    static let defaultSession: URLSession = {
        let c = URLSessionConfiguration.ephemeral
        c.timeoutIntervalForRequest = requestTimeoutSeconds
        c.timeoutIntervalForResource = requestTimeoutSeconds * 3
        return URLSession(configuration: c)
    }()

    public func customer(_ customerID: String) async throws(KakinKitError) -> CustomerStatus {
        try await call("GET", customerID, "").decode(CustomerStatus.self)
    }

    public func submit(_ transaction: StoreTransaction, customerID: String, processID: String) async throws(KakinKitError) -> SubmitResult {
        let body = try Self.json(["signedTransaction": transaction.jwsRepresentation])
        let answer = try await call("POST", customerID, "/transactions", body: body, headers: ["X-Purchase-Process-Id": processID])
        return try answer.submitResult(transactionID: transaction.id)
    }

    public func submitPlayPurchase(_ purchase: PlayPurchase, customerID: String) async throws(KakinKitError) -> SubmitResult {
        let body = try Self.json(["store": "googlePlay", "packageName": purchase.packageName, "productId": purchase.productID,
                                  "purchaseToken": purchase.purchaseToken])
        return try await call("POST", customerID, "/transactions", body: body).submitResult(transactionID: purchase.purchaseToken)
    }

    public func restore(_ customerID: String, transactionID: String?) async throws(KakinKitError) -> CustomerStatus {
        let body = try transactionID.map { (id: String) throws(KakinKitError) -> Data in try Self.json(["transactionId": id]) }
        return try await call("POST", customerID, "/restore", body: body).decode(CustomerStatus.self)
    }

    public func wallet(_ customerID: String) async throws(KakinKitError) -> Wallet {
        try await call("GET", customerID, "/wallet").decode(Wallet.self)
    }

    public func offerSignature(_ customerID: String, productID: String, offerID: String,
                               format: OfferSignatureFormat) async throws(KakinKitError) -> SignedOffer {
        let body = try Self.json(["productId": productID, "offerId": offerID, "format": format.rawValue])
        return try await call("POST", customerID, "/offers/signatures", body: body).signedOffer(offerID: offerID, format: format)
    }

    public func introductoryOfferEligibility(_ customerID: String, productID: String,
                                             appTransactionID: String?) async throws(KakinKitError) -> String? {
        var fields = ["productId": productID]
        if let appTransactionID { fields["appTransactionId"] = appTransactionID }
        let answer = try await call("POST", customerID, "/offers/introductory-eligibility", body: try Self.json(fields))
        return try answer.eligibility(sentAppTransactionID: appTransactionID != nil)
    }

    public func offering(_ customerID: String, placement: String, appVersion: String?, country: String?) async throws(KakinKitError) -> PaywallOffering {
        var query = [("placement", placement), ("platform", "ios")]
        if let appVersion { query.append(("appVersion", appVersion)) }
        if let country { query.append(("country", country)) }
        let allowed = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+?#"))
        let text = query.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        return try await call("GET", customerID, "/offerings?" + text).decode(PaywallOffering.self)
    }

    // MARK: Transport

    func call(_ method: String, _ customerID: String, _ suffix: String, body: Data? = nil,
              headers: [String: String] = [:]) async throws(KakinKitError) -> KakinAnswer {
        let segment = customerID.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? customerID
        guard let url = URL(string: baseURL.absoluteString.trimmingSuffix("/") + "/v1/customers/" + segment + suffix) else {
            throw KakinKitError(.networkUnavailable, message: "The Kakin URL is not valid.")
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        do {
            if let token = try await customerToken?(customerID) {
                request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
            }
        } catch {
            throw KakinKitError(.networkUnavailable, message: "The customer token could not be obtained.")
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw KakinKitError(.networkUnavailable)
        }
        guard let http = response as? HTTPURLResponse else { throw KakinKitError(.invalidServerResponse) }
        guard data.count <= Self.responseBytesMax else {
            throw KakinKitError(id: ClientError.invalidServerResponse.id, code: ClientError.invalidServerResponse.code,
                                message: ClientError.invalidServerResponse.message, httpStatus: http.statusCode)
        }
        return KakinAnswer(status: http.statusCode, body: data)
    }

    static func json(_ object: [String: String]) throws(KakinKitError) -> Data {
        do {
            return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        } catch {
            throw KakinKitError(.invalidServerResponse, message: "The request could not be encoded.")
        }
    }
}

/// One HTTP answer from Kakin, read by the contract: a 2xx body, or `{"error": {code, id, message, requestId}}`.
struct KakinAnswer: Sendable {
    var status: Int
    var body: Data

    struct ErrorBody: Decodable {
        struct Inner: Decodable {
            var code: String
            var id: String
            var message: String
            var requestId: String?
        }
        var error: Inner
    }

    struct PurchaseBody: Decodable {
        struct Transaction: Decodable {
            /// A Play purchase's order (`GPA.…`); the App Store's transaction has its ID where the app has it already.
            var orderId: String?
        }
        var transaction: Transaction?
        var grant: Grant?
        var customer: CustomerStatus?
    }

    struct LegacySignature: Decodable {
        var keyIdentifier: String
        var nonce: String
        var timestamp: Int64
        var signature: String
    }

    struct JWSSignature: Decodable {
        var jws: String
    }

    /// The contract's error for a non-2xx answer; an answer that is not Kakin's (a proxy's HTML page) keeps
    /// its status so that a 502 stays retryable.
    func error() -> KakinKitError {
        if let e = try? JSONDecoder().decode(ErrorBody.self, from: body) {
            return KakinKitError(id: e.error.id, code: e.error.code, message: e.error.message, requestId: e.error.requestId, httpStatus: status)
        }
        let kind = ClientError.invalidServerResponse
        return KakinKitError(id: kind.id, code: kind.code, message: kind.message, httpStatus: status)
    }

    func decode<T: Decodable>(_ type: T.Type) throws(KakinKitError) -> T {
        guard (200..<300).contains(status) else { throw error() }
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch {
            throw KakinKitError(.invalidServerResponse)
        }
    }

    /// 201 and 409 `already_processed` carry the same fields; 422 `transaction_revoked` means recorded,
    /// nothing to grant. Everything else leaves the transaction unfinished. The submission is named by the answer's
    /// order ID when it has one (Google Play), else by `transactionID`.
    func submitResult(transactionID: String) throws(KakinKitError) -> SubmitResult {
        switch status {
        case 201, 409:
            if status == 409 {
                let e = error()
                guard e.code == "already_processed" else { throw e }
            }
            let parsed = try? JSONDecoder().decode(PurchaseBody.self, from: body)
            let submission = Submission(transactionID: parsed?.transaction?.orderId ?? transactionID, httpStatus: status, grant: parsed?.grant,
                                        customer: parsed?.customer)
            return status == 201 ? .credited(submission) : .alreadyProcessed(submission)
        case 422:
            let e = error()
            if e.code == "transaction_revoked" { return .revoked(e) }
            throw e
        default:
            throw (200..<300).contains(status) ? KakinKitError(.invalidServerResponse) : error()
        }
    }

    /// 404 for the route itself (`route_not_found`, KKN-1005): this Kakin has no offers endpoint yet.
    var isMissingRoute: Bool {
        guard status == 404 else { return false }
        let e = error()
        return e.id == "KKN-1005" || e.code == "not_found" || e.code == "route_not_found"
    }

    /// The eligibility JWS, or nil when Kakin has none to give: no such route, no signing key (501
    /// `offer_signing_not_configured`), or a customer it cannot name (400, when no `appTransactionId` was sent).
    func eligibility(sentAppTransactionID: Bool) throws(KakinKitError) -> String? {
        if isMissingRoute { return nil }
        if status == 501, error().code == "offer_signing_not_configured" { return nil }
        if status == 400, !sentAppTransactionID, error().code == "invalid_field" { return nil }
        return try decode(JWSSignature.self).jws
    }

    /// A missing offers route means offers are not supported by this Kakin.
    func signedOffer(offerID: String, format: OfferSignatureFormat) throws(KakinKitError) -> SignedOffer {
        if isMissingRoute { throw KakinKitError(.offersNotSupported) }
        switch format {
        case .legacy:
            let s = try decode(LegacySignature.self)
            guard let nonce = UUID(uuidString: s.nonce) else { throw KakinKitError(.invalidServerResponse) }
            return .legacy(offerID: offerID, keyID: s.keyIdentifier, nonce: nonce, signature: s.signature, timestamp: s.timestamp)
        case .jws:
            return .jws(offerID: offerID, compactJWS: try decode(JWSSignature.self).jws)
        }
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        var s = self
        while s.hasSuffix(suffix) { s.removeLast(suffix.count) }
        return s
    }
}
