import GooglePlaySecurity
import KakinCore
import StoreAPITransport
import Synchronization

/// The Google Play Developer API (androidpublisher v3) calls Kakin makes, over an injected transport: the same
/// code talks to Google or to the Play simulator (`apiRoot`). Each call gets a bearer token from the service
/// account's JWT-bearer grant (cached until shortly before it expires), is retried on 429/5xx/timeouts with
/// backoff and `Retry-After`, and never follows a redirect (the transport's rule).
public final class GooglePlayDeveloperAPIClient: Sendable {
    public let configuration: GooglePlayClientConfiguration
    let transport: any HTTPTransport
    let clock: any Clock
    let sleeper: any RetrySleeper
    let tokens = Mutex<CachedToken?>(nil)

    struct CachedToken: Sendable {
        var value: String
        var expiresAtMs: Int64
    }

    static let userAgent = "Kakin-GooglePlayClient/1"

    /// - Parameters:
    ///   - clock: the time for the assertion's `iat`/`exp` and the token cache (with a simulator on moved time, its clock).
    ///   - sleeper: waits between attempts (tests pass one that returns at once).
    public init(configuration: GooglePlayClientConfiguration, transport: any HTTPTransport, clock: any Clock,
                sleeper: any RetrySleeper = TaskSleeper()) throws(GooglePlayAPIError) {
        try configuration.validate()
        self.configuration = configuration
        self.transport = transport
        self.clock = clock
        self.sleeper = sleeper
    }

    // MARK: - Subscriptions

    /// `purchases.subscriptionsv2.get`.
    public func subscriptionV2(token: String) async throws(GooglePlayAPIError) -> SubscriptionPurchaseV2 {
        let json = try await call("GET", "purchases.subscriptionsv2.get", ["purchases", "subscriptionsv2", "tokens", token])
        return try decode("purchases.subscriptionsv2.get") { () throws(PayloadDecodingError) in try SubscriptionPurchaseV2(json: json) }
    }

    public enum CancellationType: String, Sendable {
        case userRequestedStopRenewals = "USER_REQUESTED_STOP_RENEWALS"
        case developerRequestedStopPayments = "DEVELOPER_REQUESTED_STOP_PAYMENTS"
    }

    /// `purchases.subscriptionsv2.cancel`: auto-renew off; entitled until expiry.
    public func cancelSubscription(token: String, type: CancellationType) async throws(GooglePlayAPIError) {
        _ = try await call("POST", "purchases.subscriptionsv2.cancel", ["purchases", "subscriptionsv2", "tokens", token], verb: "cancel",
                           body: ["cancellationContext": ["cancellationType": .string(type.rawValue)]])
    }

    public enum Revocation: Sendable, Equatable {
        case fullRefund, proratedRefund
        case itemBasedRefund(productId: String)
    }

    /// `purchases.subscriptionsv2.revoke`: entitlement ends now, with the refund named.
    public func revokeSubscription(token: String, revocation: Revocation) async throws(GooglePlayAPIError) {
        let context: JSONValue = switch revocation {
        case .fullRefund: ["fullRefund": .object([:])]
        case .proratedRefund: ["proratedRefund": .object([:])]
        case .itemBasedRefund(let productId): ["itemBasedRefund": ["productId": .string(productId)]]
        }
        _ = try await call("POST", "purchases.subscriptionsv2.revoke", ["purchases", "subscriptionsv2", "tokens", token], verb: "revoke",
                           body: ["revocationContext": context])
    }

    /// `purchases.subscriptionsv2.defer`: moves the renewal later by `seconds`; answers each item's new expiry (ms).
    public func deferSubscription(token: String, seconds: Int64, etag: String? = nil,
                                  validateOnly: Bool = false) async throws(GooglePlayAPIError) -> [(productId: String, expiryTimeMs: Int64)] {
        var context: [String: JSONValue] = ["deferDuration": .string("\(seconds)s"), "validateOnly": .bool(validateOnly)]
        if let etag { context["etag"] = .string(etag) }
        let json = try await call("POST", "purchases.subscriptionsv2.defer", ["purchases", "subscriptionsv2", "tokens", token], verb: "defer",
                                  body: ["deferralContext": .object(context)])
        return (json["itemExpiryTimeDetails"]?.arrayValue ?? []).compactMap { item in
            guard let id = item["productId"]?.stringValue, let time = item["expiryTime"]?.stringValue.flatMap(Timestamp.parseRFC3339) else { return nil }
            return (id, time)
        }
    }

    /// `purchases.subscriptions.acknowledge` (the v1 path; the only acknowledge for subscriptions). Optionally sets
    /// the purchase's `obfuscatedAccountId` when the app did not.
    public func acknowledgeSubscription(subscriptionId: String, token: String, developerPayload: String? = nil,
                                        obfuscatedAccountId: String? = nil) async throws(GooglePlayAPIError) {
        var body: [String: JSONValue] = [:]
        if let developerPayload { body["developerPayload"] = .string(developerPayload) }
        if let obfuscatedAccountId { body["externalAccountIds"] = ["obfuscatedAccountId": .string(obfuscatedAccountId)] }
        _ = try await call("POST", "purchases.subscriptions.acknowledge", ["purchases", "subscriptions", subscriptionId, "tokens", token],
                           verb: "acknowledge", body: .object(body))
    }

    // MARK: - One-time products

    /// `purchases.products.get` (v1).
    public func productPurchase(productId: String, token: String) async throws(GooglePlayAPIError) -> ProductPurchase {
        let json = try await call("GET", "purchases.products.get", ["purchases", "products", productId, "tokens", token])
        return try decode("purchases.products.get") { () throws(PayloadDecodingError) in try ProductPurchase(json: json) }
    }

    /// `purchases.productsv2.getproductpurchasev2`.
    public func productPurchaseV2(token: String) async throws(GooglePlayAPIError) -> ProductPurchaseV2 {
        let json = try await call("GET", "purchases.productsv2.get", ["purchases", "productsv2", "tokens", token])
        return try decode("purchases.productsv2.get") { () throws(PayloadDecodingError) in try ProductPurchaseV2(json: json) }
    }

    /// `purchases.products.acknowledge`.
    public func acknowledgeProduct(productId: String, token: String, developerPayload: String? = nil) async throws(GooglePlayAPIError) {
        let body: JSONValue = developerPayload.map { ["developerPayload": .string($0)] } ?? .object([:])
        _ = try await call("POST", "purchases.products.acknowledge", ["purchases", "products", productId, "tokens", token], verb: "acknowledge",
                           body: body)
    }

    /// `purchases.products.consume`: the customer can buy it again (consuming also acknowledges).
    public func consumeProduct(productId: String, token: String) async throws(GooglePlayAPIError) {
        _ = try await call("POST", "purchases.products.consume", ["purchases", "products", productId, "tokens", token], verb: "consume")
    }

    // MARK: - Voided purchases and orders

    /// One page of `purchases.voidedpurchases.list`. `startTimeMs` at most 30 days back (Google's rule);
    /// `includeSubscriptions` is `type=1`.
    public func voidedPurchases(startTimeMs: Int64? = nil, endTimeMs: Int64? = nil, maxResults: Int? = nil, pageToken: String? = nil,
                                includeSubscriptions: Bool = true,
                                includeQuantityBasedPartialRefund: Bool = true) async throws(GooglePlayAPIError) -> VoidedPurchasesPage {
        var query: [(String, String)] = []
        if let startTimeMs { query.append(("startTime", String(startTimeMs))) }
        if let endTimeMs { query.append(("endTime", String(endTimeMs))) }
        if let maxResults { query.append(("maxResults", String(maxResults))) }
        if let pageToken { query.append(("token", pageToken)) }
        query.append(("type", includeSubscriptions ? "1" : "0"))
        query.append(("includeQuantityBasedPartialRefund", includeQuantityBasedPartialRefund ? "true" : "false"))
        let json = try await call("GET", "purchases.voidedpurchases.list", ["purchases", "voidedpurchases"], query: query)
        return try decode("purchases.voidedpurchases.list") { () throws(PayloadDecodingError) in try VoidedPurchasesPage(json: json) }
    }

    /// Every page from `pageToken` on, at most `voidedPagesMax` of them: the voided purchases, and the token to
    /// continue from when pages remain (keep it as the poll's cursor).
    public func allVoidedPurchases(startTimeMs: Int64? = nil, endTimeMs: Int64? = nil, pageToken: String? = nil,
                                   includeSubscriptions: Bool = true) async throws(GooglePlayAPIError) -> (voided: [VoidedPurchase], nextPageToken: String?) {
        var all: [VoidedPurchase] = []
        var token = pageToken
        for _ in 0..<configuration.voidedPagesMax {
            let page = try await voidedPurchases(startTimeMs: startTimeMs, endTimeMs: endTimeMs, pageToken: token, includeSubscriptions: includeSubscriptions)
            all += page.voidedPurchases
            token = page.nextPageToken
            if token == nil { break }
        }
        return (all, token)
    }

    /// `orders.get`: what the buyer paid for an order (needs *View financial data*).
    public func order(orderId: String) async throws(GooglePlayAPIError) -> PlayOrder {
        let json = try await call("GET", "orders.get", ["orders", orderId])
        return try decode("orders.get") { () throws(PayloadDecodingError) in try PlayOrder(json: json) }
    }

    /// `orders.refund`: refunds the order; `revoke` also ends the entitlement.
    public func refundOrder(orderId: String, revoke: Bool) async throws(GooglePlayAPIError) {
        _ = try await call("POST", "orders.refund", ["orders", orderId], verb: "refund", query: [("revoke", revoke ? "true" : "false")])
    }

    func decode<T>(_ request: String, _ body: () throws(PayloadDecodingError) -> T) throws(GooglePlayAPIError) -> T {
        do throws(PayloadDecodingError) {
            return try body()
        } catch {
            throw GooglePlayAPIError(kind: .invalidResponse, request: request, httpStatus: 200, detail: error.description)
        }
    }
}
