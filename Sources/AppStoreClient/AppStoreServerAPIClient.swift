import AppStoreSecurity
import KakinCore
import StoreAPITransport

/// A client for Apple's App Store Server API that talks to Apple or to Kakin's App Store simulator alike.
/// Every call signs a fresh ES256 JWT, retries retryable failures a bounded number of times with jittered
/// exponential backoff, honours a 429's `Retry-After` up to a bound, and decodes the documented JSON into
/// typed responses that keep Apple's raw JWS strings for the caller to verify.
public struct AppStoreServerAPIClient: Sendable {
    public let configuration: AppStoreServerAPIConfiguration
    let primary: AppStoreServerAPIConfiguration.Host
    /// Sandbox after production, for transaction lookups only.
    let fallback: AppStoreServerAPIConfiguration.Host?
    let transport: any HTTPTransport
    let clock: any Clock
    let sleeper: any RetrySleeper
    /// Spaces calls to Apple's hosts at Apple's published rates (nil: not paced; an explicit base URL never is).
    let pacer: RequestPacer?

    /// Upper bound of every paging helper's `pagesMax`.
    public static let pagesMaxLimit = 1_000

    /// - Parameters:
    ///   - configuration: key, app, server and limits; checked here.
    ///   - clock: JWT `iat`/`exp` and the 429 wait are computed from it. Give the simulator's clock when
    ///     talking to a simulator whose time has been moved.
    ///   - transport: `URLSessionTransport()` unless testing.
    ///   - sleeper: waits between attempts; `TaskSleeper()` unless testing.
    ///   - pacingClock: a real-time clock to space calls to Apple's hosts at Apple's published rate limits
    ///     (`AppStoreRateLimits`), shared by every call this client makes; nil: calls are not paced.
    public init(
        configuration: AppStoreServerAPIConfiguration, clock: any Clock,
        transport: any HTTPTransport = URLSessionTransport(), sleeper: any RetrySleeper = TaskSleeper(),
        pacingClock: (any Clock)? = nil
    ) throws(AppStoreServerAPIConfigurationError) {
        (primary, fallback) = try configuration.validated()
        self.configuration = configuration
        self.transport = transport
        self.clock = clock
        self.sleeper = sleeper
        switch configuration.server {
        case .apple, .appleSandbox: pacer = pacingClock.map(RequestPacer.init(clock:))
        case .baseURL: pacer = nil
        }
    }

    // MARK: Transactions

    /// Get Transaction Info. With `.apple`, asks production, then sandbox if production does not know the ID.
    /// - Parameter transactionId: any `transactionId` or `originalTransactionId` of the customer.
    public func transactionInfo(transactionId: String) async throws(AppStoreServerAPIError) -> TransactionInfoResponse {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "transactions", transactionId])
        return try await perform(call, routing: .lookup) { body, host throws(ResponseShapeError) in
            try TransactionInfoResponse(body, answeringEnvironment: host.environment)
        }
    }

    /// One page of Get Transaction History v2.
    /// - Parameters:
    ///   - transactionId: any transaction ID of the customer.
    ///   - request: filters and order; resend the same ones with each `revision`.
    ///   - revision: the previous page's `revision`; nil for the first page.
    ///   - environment: the previous page's `answeringEnvironment` (a revision is only valid there); nil for
    ///     the first page (production, then sandbox if production does not know the ID).
    public func transactionHistory(
        transactionId: String, request: TransactionHistoryRequest = TransactionHistoryRequest(), revision: String? = nil,
        environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> HistoryResponse {
        var query = request.queryItems
        if let revision { query.append(("revision", revision)) }
        let call = try APICall(method: "GET", path: ["inApps", "v2", "history", transactionId], query: query)
        return try await perform(call, routing: environment.map(Routing.environment) ?? .lookup) {
            body, host throws(ResponseShapeError) in
            try HistoryResponse(body, answeringEnvironment: host.environment)
        }
    }

    /// Every page of Get Transaction History v2, up to `pagesMax` pages (20 transactions each at Apple).
    /// Later pages go to the environment that answered the first, with identical filters.
    /// - Returns: all signed transactions; `hasMore` stays true when `pagesMax` ended the paging early.
    public func allTransactionHistory(
        transactionId: String, request: TransactionHistoryRequest = TransactionHistoryRequest(), pagesMax: Int = 50
    ) async throws(AppStoreServerAPIError) -> TransactionHistory {
        var page = try await transactionHistory(transactionId: transactionId, request: request)
        var history = TransactionHistory(
            signedTransactions: page.signedTransactions, answeringEnvironment: page.answeringEnvironment,
            bundleId: page.bundleId, appAppleId: page.appAppleId, revision: page.revision, hasMore: page.hasMore,
            pageCount: 1)
        while history.hasMore, history.pageCount < Self.clampedPages(pagesMax) {
            guard let revision = page.revision, !revision.isEmpty else {
                throw pagingError("GET /inApps/v2/history", page.answeringEnvironment, "hasMore without a revision")
            }
            page = try await transactionHistory(
                transactionId: transactionId, request: request, revision: revision, environment: page.answeringEnvironment)
            history.signedTransactions += page.signedTransactions
            history.revision = page.revision
            history.hasMore = page.hasMore
            history.pageCount += 1
        }
        return history
    }

    /// Get All Subscription Statuses, one entry per subscription instance with its latest transaction.
    /// - Parameter statuses: only these statuses; empty for all.
    public func allSubscriptionStatuses(
        transactionId: String, statuses: [SubscriptionStatusCode] = []
    ) async throws(AppStoreServerAPIError) -> StatusResponse {
        let call = try APICall(
            method: "GET", path: ["inApps", "v1", "subscriptions", transactionId],
            query: statuses.map { ("status", String($0.rawValue)) })
        return try await perform(call, routing: .lookup) { body, host throws(ResponseShapeError) in
            try StatusResponse(body, answeringEnvironment: host.environment)
        }
    }

    /// Look Up Order ID, for support: the order ID from the customer's emailed receipt.
    public func lookUpOrderId(_ orderId: String) async throws(AppStoreServerAPIError) -> OrderLookupResponse {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "lookup", orderId])
        return try await perform(call, routing: .primary) { body, _ throws(ResponseShapeError) in try OrderLookupResponse(body) }
    }

    /// One page of Get Refund History v2 (Apple-approved refunds, ascending `revocationDate`).
    /// - Parameter environment: nil for the configured primary host.
    public func refundHistory(
        transactionId: String, revision: String? = nil, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> RefundHistoryResponse {
        let call = try APICall(
            method: "GET", path: ["inApps", "v2", "refund", "lookup", transactionId],
            query: revision.map { [("revision", $0)] } ?? [])
        return try await perform(call, routing: environment.map(Routing.environment) ?? .primary) {
            body, _ throws(ResponseShapeError) in try RefundHistoryResponse(body)
        }
    }

    // MARK: Notifications

    /// One page of Get Notification History.
    /// - Parameters:
    ///   - request: the window and filters; resend it unchanged with each `paginationToken`.
    ///   - paginationToken: the previous page's; nil for the first page.
    ///   - environment: whose notifications (each environment has its own); nil for the primary host.
    public func notificationHistory(
        _ request: NotificationHistoryRequest, paginationToken: String? = nil, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> NotificationHistoryResponse {
        let call = try APICall(
            method: "POST", path: ["inApps", "v1", "notifications", "history"],
            query: paginationToken.map { [("paginationToken", $0)] } ?? [], body: request.json)
        return try await perform(call, routing: environment.map(Routing.environment) ?? .primary) {
            body, _ throws(ResponseShapeError) in try NotificationHistoryResponse(body)
        }
    }

    /// Every page of Get Notification History, up to `pagesMax` pages, to recover missed notifications.
    /// - Returns: all items; `hasMore` stays true when `pagesMax` ended the paging early.
    public func allNotificationHistory(
        _ request: NotificationHistoryRequest, environment: AppStoreEnvironment? = nil, pagesMax: Int = 50
    ) async throws(AppStoreServerAPIError) -> NotificationHistory {
        var page = try await notificationHistory(request, environment: environment)
        var history = NotificationHistory(
            notificationHistory: page.notificationHistory, paginationToken: page.paginationToken, hasMore: page.hasMore,
            pageCount: 1)
        while history.hasMore, history.pageCount < Self.clampedPages(pagesMax) {
            guard let token = page.paginationToken, !token.isEmpty else {
                throw pagingError("POST /inApps/v1/notifications/history", environment, "hasMore without a paginationToken")
            }
            page = try await notificationHistory(request, paginationToken: token, environment: environment)
            history.notificationHistory += page.notificationHistory
            history.paginationToken = page.paginationToken
            history.hasMore = page.hasMore
            history.pageCount += 1
        }
        return history
    }

    /// Request a Test Notification: Apple sends `TEST` to the notification URL of the environment called.
    /// - Returns: the `testNotificationToken` for `testNotificationStatus`.
    public func requestTestNotification(
        environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> String {
        let call = try APICall(method: "POST", path: ["inApps", "v1", "notifications", "test"])
        return try await perform(call, routing: environment.map(Routing.environment) ?? .primary) {
            body, _ throws(ResponseShapeError) in try body.string("testNotificationToken")
        }
    }

    /// Get Test Notification Status.
    public func testNotificationStatus(
        testNotificationToken: String, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> CheckTestNotificationResponse {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "notifications", "test", testNotificationToken])
        return try await perform(call, routing: environment.map(Routing.environment) ?? .primary) {
            body, _ throws(ResponseShapeError) in try CheckTestNotificationResponse(body)
        }
    }

    static func clampedPages(_ pagesMax: Int) -> Int { min(max(1, pagesMax), pagesMaxLimit) }

    private func pagingError(_ request: String, _ environment: AppStoreEnvironment?, _ detail: String) -> AppStoreServerAPIError {
        AppStoreServerAPIError(kind: .invalidResponse, request: request, environment: environment, detail: detail)
    }
}
