import AppStoreClient
import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinStorage
import Synchronization

/// Kakin's use of the App Store Server API: fetching a transaction by id, restoring a customer's history,
/// and recovering missed notifications from Notification History. One client per configured app (the
/// API token names the bundle). Everything it returns is verified like any other signed data.
struct AppStoreConnection: Sendable {
    /// Clients in the config's app order, with the bundle each serves.
    let clients: [(bundleId: String, environments: Set<AppStoreEnvironment>, client: AppStoreServerAPIClient)]

    init(api: Configuration.AppStoreServerAPI, apps: [Configuration.App], clock: any Clock,
         transport: any AppStoreHTTPTransport = URLSessionTransport()) throws(KakinError) {
        let key: P256PrivateKey
        do {
            key = try P256PrivateKey(pemPKCS8: api.privateKeyPEM)
        } catch {
            throw KakinError(.invalidConfiguration, "appStoreServerAPI.privateKeyFile is not a PKCS#8 P-256 key (.p8).")
        }
        var clients: [(String, Set<AppStoreEnvironment>, AppStoreServerAPIClient)] = []
        for app in apps {
            let server: AppStoreServerAPIConfiguration.Server
            if let base = api.baseURL {
                server = .baseURL(base, environment: app.environments.contains(.production) ? .production : .sandbox)
            } else {
                server = app.environments.contains(.production) ? .apple : .appleSandbox
            }
            let configuration = AppStoreServerAPIConfiguration(issuerId: api.issuerId, keyId: api.keyId, privateKey: key,
                                                               bundleId: app.bundleId, server: server)
            do {
                clients.append((app.bundleId, app.environments,
                                try AppStoreServerAPIClient(configuration: configuration, clock: clock, transport: transport)))
            } catch {
                throw KakinError(.invalidConfiguration, "appStoreServerAPI: \(error.reason).")
            }
        }
        self.clients = clients
    }

    /// The catalogue error for a failed API call. Never includes the token.
    static func kakinError(_ error: AppStoreServerAPIError) -> KakinError {
        if error.kind == .httpError, error.httpStatus == 404 {
            return KakinError(.transactionNotFound, detail: error.description)
        }
        if error.kind == .httpError, let status = error.httpStatus, (400..<500).contains(status), status != 429 {
            return KakinError(.invalidField, "The App Store refused the id (\(error.errorCode.map(String.init) ?? "HTTP \(status)")).",
                              detail: error.description)
        }
        return KakinError(.appStoreAPIUnavailable, detail: error.description)
    }

    /// Get Transaction Info from the first app that knows the id.
    func signedTransaction(_ transactionId: String) async throws(KakinError) -> String {
        var lastError = KakinError(.transactionNotFound)
        for entry in clients {
            do {
                return try await entry.client.transactionInfo(transactionId: transactionId).signedTransactionInfo
            } catch {
                lastError = Self.kakinError(error)
                if lastError.kind != .transactionNotFound { throw lastError }
            }
        }
        throw lastError
    }

    /// A customer's whole history for one of their transaction ids: every transaction (all pages) and the
    /// latest transaction and renewal info of each subscription.
    func history(for transactionId: String) async throws(KakinError) -> (transactions: [String], statuses: [LastTransactionsItem]) {
        var lastError = KakinError(.transactionNotFound)
        for entry in clients {
            do {
                let history = try await entry.client.allTransactionHistory(transactionId: transactionId, pagesMax: AppStoreLimits.historyPagesMax)
                let statuses = try await entry.client.allSubscriptionStatuses(transactionId: transactionId)
                return (history.signedTransactions, statuses.data.flatMap(\.lastTransactions))
            } catch {
                lastError = Self.kakinError(error)
                if lastError.kind != .transactionNotFound { throw lastError }
            }
        }
        throw lastError
    }
}

enum AppStoreLimits {
    /// 20 transactions a page: a restore reads at most 10,000 transactions per id.
    static let historyPagesMax = 500
    /// Original transactions restored in one request when the app names none.
    static let restoreOriginalsMax = 50
    static let notificationHistoryPagesMax = 500
    /// How far back recovery reads when it has never run (Apple keeps 30 days in Sandbox, 180 in Production).
    static let recoveryFirstLookBackMs: Int64 = 30 * 86_400_000
    /// Read again this much before the last run's end: history entries can appear late.
    static let recoveryOverlapMs: Int64 = 3_600_000
}

extension KakinApp {
    /// Points the App Store Server API client at Apple or (local mode) at the simulator.
    public func connectAppStoreServerAPI(_ api: Configuration.AppStoreServerAPI) throws(KakinError) {
        let connection = try AppStoreConnection(api: api, apps: settings.apps, clock: clock,
                                                transport: CountingTransport(inner: URLSessionTransport(), metrics: metrics))
        try useAPIKeyForOffers(api)
        appStoreAPI.withLock { $0 = connection }
    }

    func appStoreConnection() throws(KakinError) -> AppStoreConnection {
        guard let connection = appStoreAPI.withLock({ $0 }) else { throw KakinError(.appStoreAPINotConfigured) }
        return connection
    }

    /// The `{"transactionId"}` form of `POST …/transactions`: fetched from the App Store Server API.
    func fetchSignedTransaction(_ transactionId: String) async throws(KakinError) -> String {
        try await appStoreConnection().signedTransaction(transactionId)
    }

    /// `POST /v1/customers/{customerId}/restore`: pulls the history from the App Store Server API (for the
    /// given transaction id, or for every original transaction linked to the customer), applies it
    /// idempotently, and answers the customer's status.
    func postRestore(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let customerId = try customerID(params)
            try authenticator.authorize(request, customerId: customerId, needs: .customer)
            var transactionId: String?
            var receipt: AppReceipt?
            if !request.body.isEmpty {
                let body = try request.jsonObject()
                transactionId = try field { () throws(ConfigurationError) in
                    try body.check(allowedKeys: ["transactionId", "appReceipt"])
                    return try body.boundedString("transactionId", lengthMax: 64, required: false)
                }
                if body.has("appReceipt") {
                    guard transactionId == nil else { throw KakinError(.invalidField, "Give transactionId or appReceipt, not both.") }
                    receipt = try appReceipt(body)
                }
            }
            if let receipt {
                try await restore(customerId: customerId, receipt: receipt)
            } else {
                try await restore(customerId: customerId, transactionId: transactionId)
            }
            return .json(try await customerStatusJSON(customerId), status: 200)
        }
    }

    public func restore(customerId: String, transactionId: String?) async throws(KakinError) {
        let connection = try appStoreConnection()
        let ids: [String]
        if let transactionId {
            ids = [transactionId]
        } else {
            ids = try await store.linkedOriginalTransactions(customerId, limit: AppStoreLimits.restoreOriginalsMax)
        }
        for id in ids {
            let (transactions, statuses) = try await connection.history(for: id)
            for item in statuses {
                guard let info = try? verifier.verifyRenewalInfo(item.signedRenewalInfo) else { continue }
                try await store.storeRenewalInfo(info, jws: item.signedRenewalInfo)
            }
            // Several signed copies of one transaction can come back (history is sorted by last change):
            // every copy is applied; storage keeps the newest.
            for jws in transactions + statuses.map(\.signedTransactionInfo) {
                let tx = try verifyTransaction(jws)
                do {
                    _ = try await apply(tx, jws: jws, customerId: customerId, via: "restore", purchaseProcessId: nil)
                } catch where error.kind == .unknownProduct {
                    try await store.storeUnclaimedTransaction(tx, jws: jws)
                }
            }
        }
    }

    /// Reads Notification History since the last run and ingests what is missing (duplicates are
    /// ignored by `notificationUUID`), so an outage of the receiver heals by itself.
    @discardableResult
    public func recoverMissedNotifications() async throws(KakinError) -> (read: Int, new: Int) {
        let connection = try appStoreConnection()
        let now = clock.nowMs()
        var read = 0
        var new = 0
        for entry in connection.clients {
            for environment in entry.environments.filter({ $0 == .production || $0 == .sandbox }).sorted(by: { $0.rawValue < $1.rawValue }) {
                let marker = "notificationHistory.\(entry.bundleId).\(environment.rawValue)"
                let since = try await store.syncValue(marker).flatMap { Int64($0) } ?? (now - AppStoreLimits.recoveryFirstLookBackMs)
                let request = NotificationHistoryRequest(startDateMs: max(since - AppStoreLimits.recoveryOverlapMs, now - AppStoreLimits.recoveryFirstLookBackMs),
                                                         endDateMs: now)
                let history: NotificationHistory
                do {
                    history = try await entry.client.allNotificationHistory(request, environment: environment,
                                                                             pagesMax: AppStoreLimits.notificationHistoryPagesMax)
                } catch {
                    throw AppStoreConnection.kakinError(error)
                }
                for item in history.notificationHistory {
                    read += 1
                    if try await ingestNotification(item.signedPayload, source: "history") { new += 1 }
                }
                if !history.hasMore { try await store.setSyncValue(marker, String(now)) }
            }
        }
        logger.info("notification history read", ["notifications.read": .int(Int64(read)), "notifications.new": .int(Int64(new))])
        return (read, new)
    }

    /// The periodic job's pass: failures are logged and retried at the next pass.
    func recoverMissedNotificationsLogged() async {
        do {
            try await recoverMissedNotifications()
        } catch {
            logger.warning("notification history not read; will retry", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
        }
    }

    /// `POST /v1/admin/notifications/recover`: runs the recovery now.
    func postRecoverNotifications(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .admin)
            let (read, new) = try await recoverMissedNotifications()
            await drainNotifications()
            return .json(["read": .int(Int64(read)), "new": .int(Int64(new))], status: 200)
        }
    }
}
