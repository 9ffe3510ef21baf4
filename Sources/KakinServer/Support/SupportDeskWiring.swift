import AppStoreSecurity
import HTTPServer
import KakinAdmin
import KakinCore
import KakinService
import KakinStorage

/// What the support desk needs from the rest of Kakin, and what Kakin feeds it: errors answered (for
/// lookups by request ID) and the figures `/metrics` samples at scrape time.
extension KakinApp {
    func makeSupportDesk() -> SupportDesk {
        var adminKeys: Set<[UInt8]>?
        if let auth = settings.auth {
            adminKeys = Set(auth.apiKeys.filter { $0.scope == .admin }.compactMap { Hex.decode($0.sha256) })
        }
        let deskSettings = SupportDesk.Settings(
            adminKeyHashes: adminKeys, listensOnLoopback: settings.listensOnLoopback,
            apps: settings.apps.map { SupportDesk.App(bundleId: $0.bundleId, reportingTimeZone: $0.reportingTimeZone, catalog: $0.catalog) })
        return SupportDesk(services: services, settings: deskSettings, logError: { [unowned self] error, request in log(error, request: request) })
    }

    /// The row support finds by request ID, for the errors worth finding (not 404s of unknown paths).
    func recentError(_ error: KakinError, request: HTTPRequest) -> RecentError? {
        guard error.kind != .routeNotFound, error.kind != .methodNotAllowed else { return nil }
        let segments = request.path.split(separator: "/").map(String.init)
        var customerId: String?
        if segments.count >= 3, segments[0] == "v1", segments[1] == "customers", CustomerID.isValid(segments[2]) { customerId = segments[2] }
        if segments.count >= 3, segments[0] == "admin", segments[1] == "customers", CustomerID.isValid(segments[2]) { customerId = segments[2] }
        let process = request.headers["X-Purchase-Process-Id"].flatMap { $0.isEmpty || $0.utf8.count > RequestLimits.purchaseProcessIdLengthMax ? nil : $0 }
        return RecentError(errorKey: RecentErrorLog.newKey(), requestId: request.requestId, atMs: clock.nowMs(), errorId: error.kind.id,
                           code: error.kind.code, httpStatus: error.httpStatus, message: error.message, method: request.method,
                           path: String(request.path.prefix(512)), customerId: customerId, purchaseProcessId: process,
                           transactionId: Self.transactionNamed(by: request), detail: error.detail.map { String($0.prefix(500)) })
    }

    /// The transaction a failed `POST …/transactions` named, read from its body without verifying it (shown to
    /// support as "as the app sent it").
    static func transactionNamed(by request: HTTPRequest) -> String? {
        guard request.method == "POST", request.path.hasSuffix("/transactions"), !request.body.isEmpty,
              request.body.count <= RequestLimits.jwsBytesMax + 1024,
              let body = try? JSONParser.parse(request.body, depthMax: 4) else { return nil }
        if let id = body["transactionId"]?.stringValue { return String(id.prefix(64)) }
        if let jws = body["signedTransaction"]?.stringValue, let payload = StoredJWS.payload(jws) {
            return payload["transactionId"]?.idString.map { String($0.prefix(64)) }
        }
        return nil
    }

    /// `/metrics`: this process's counters plus what is sampled now (inbox depth from the database, the
    /// database's commit batches, recent errors dropped).
    func metricsText() async -> String {
        var sampled = Metrics.Sampled()
        sampled.nowMs = clock.nowMs()
        sampled.inbox = try? await store.inboxDepth()
        sampled.database = databaseFigures()
        sampled.recentErrorsDropped = desk.errors.droppedCount
        sampled.playNotifications = try? await store.playNotificationCounts()
        sampled.playAcknowledgements = try? await store.playAcknowledgementCounts()
        return metrics.prometheusText(sampled) + postgresMetricsText() + (await webhookMetricsText()) + (await outboxMetricsText())
            + (await businessMetricsText())
    }

    /// Writes the buffered errors (the background loop's pass; also run at shutdown).
    func flushRecentErrors() async {
        do {
            try await desk.errors.flush()
        } catch {
            logger.warning("recent errors not written; will retry", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
        }
    }
}
