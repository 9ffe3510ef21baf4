import AppStoreClient
import KakinCore
import KakinEvents
import KakinExternal
import KakinStorage

/// Reports Apple's external purchase tokens with the External Purchase Server API, as durable work in two tables:
/// a token owes a report when something new happened to it (a purchase, a renewal, a refund: at once), when its
/// no-purchase deadline comes (`ExternalPurchaseReportSchedule.noPurchaseReportDueMs`), or when Apple's
/// EXTERNAL_PURCHASE_TOKEN/UNREPORTED notification names it (at once; a token Kakin never recorded is reported
/// UNRECOGNIZED_TOKEN). A pass (1) builds the report each due token owes (`ExternalPurchaseReportBuilder.nextReport`,
/// a fresh `requestIdentifier`) and stores it as an `ExternalPurchaseReportJob`, or corrects a refused one
/// (`ExternalPurchaseReportCorrection`, same `requestIdentifier`), then (2) sends the reports due: 200 → sent (what
/// Apple accepted is kept per token, so a line item is reported once), 400 with errors → failed (kept, listed on
/// `GET /v1/admin/external-purchase-reports?state=failed`), 429/5xx/no answer → retried with backoff.
/// Nothing is sent for an app without `externalPurchaseReporting.enabled` (tokens are still recorded).
public final class ExternalPurchaseReporter: Sendable {
    let store: any StoreJobRepository
    let access: AppStoreAccess
    let apps: [String: AppSettings]
    /// The business clock (Apple's deadlines; the simulator's in local mode).
    let clock: any Clock
    let metrics: Metrics
    let logger: Logger
    let events: CustomerEvents
    /// The worker (woken when a token owes a report; polling for deadlines and retries).
    public let worker: BackgroundLoop

    init(store: any StoreJobRepository, access: AppStoreAccess, apps: [String: AppSettings], clock: any Clock, metrics: Metrics, logger: Logger,
         events: CustomerEvents, worker: BackgroundLoop = BackgroundLoop(pollIntervalMs: 30_000)) {
        self.store = store
        self.access = access
        self.apps = apps
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        self.events = events
        self.worker = worker
    }

    /// Whether any app reports tokens (else the worker need not run).
    public var isEnabled: Bool { apps.values.contains { $0.external.reporting?.enabled == true } }

    public func start() { worker.start { [self] in _ = await self.runPass() } }

    public func stop() async { await worker.stop() }

    /// One pass: plan what due tokens owe, then send what is due. Returns how many reports were attempted.
    @discardableResult
    public func runPass() async -> Int {
        let now = clock.nowMs()
        do {
            let due = try await store.snapshot { r in try r.externalTokensDue(atMs: now, limit: Self.batchMax) }
            for token in due { try await plan(token.externalPurchaseId) }
            let reports = try await store.snapshot { r in try r.externalReportsDue(atMs: now, limit: Self.batchMax) }
            for report in reports { await send(report) }
            if due.count == Self.batchMax || reports.count == Self.batchMax { worker.wake() }
            return reports.count
        } catch {
            logger.error("external purchase reports: a pass failed", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail ?? error.message)])
            return 0
        }
    }

    // MARK: Planning

    /// Builds (or corrects) the report one due token owes, in one write.
    func plan(_ externalPurchaseId: String) async throws(KakinError) {
        let apps = apps, ids = store.ids
        try await store.transaction { r in
            guard var t = try r.externalToken(externalPurchaseId), let due = t.reportDueMs, due <= r.nowMs else { return }
            t.reportDueMs = nil
            guard let reporting = apps[t.bundleId]?.external.reporting, reporting.enabled,
                  let token = try? ExternalPurchaseToken(notificationSection: t.token) else {
                try r.updateExternalToken(t)
                return
            }
            let reports = try r.externalReports(externalPurchaseId: externalPurchaseId)
            let jobs = reports.compactMap { row in ExternalPurchaseReportJob(stored: row.job).map { (row, $0) } }
            // A report on its way: once it is answered the token is looked at again.
            if jobs.contains(where: { $0.1.state == .pending || $0.1.state == .corrected }) {
                try r.updateExternalToken(t)
                return
            }
            let purchases = try r.externalPurchases(externalPurchaseId: externalPurchaseId).filter(\.applied).compactMap(Self.record)
            let accepted = Self.accepted(t.accepted)
            let noPurchaseDue = t.unreportedAtMs != nil || r.nowMs >= ExternalPurchaseReportSchedule.noPurchaseReportDueMs(token)
            let siblings = try t.customerId.map { try r.externalTokens(customerId: $0) } ?? []
            let duplicate = ExternalPurchaseReportSchedule.isDuplicate(
                token, among: siblings.filter { $0.bundleId == t.bundleId }.compactMap { try? ExternalPurchaseToken(notificationSection: $0.token) })
            func build(_ requestIdentifier: String) throws -> ExternalPurchaseReport? {
                // A token only Apple's notification told of, with no purchase: Kakin never saw it.
                if t.customerId == nil, purchases.isEmpty, !accepted.any, t.unreportedAtMs != nil {
                    return ExternalPurchaseReportBuilder.unrecognized(externalPurchaseId: externalPurchaseId, requestIdentifier: requestIdentifier)
                }
                return try ExternalPurchaseReportBuilder.nextReport(
                    externalPurchaseId: externalPurchaseId, purchases: purchases, accepted: accepted, tax: reporting.tax,
                    noPurchaseReportDue: noPurchaseDue, duplicate: duplicate, requestIdentifier: requestIdentifier)
            }
            if let (row, failed) = jobs.last(where: { $0.1.state == .failed }) {
                // Resubmit a refused report with its requestIdentifier once Kakin can fix it (Apple: "resubmit the full
                // report using the same requestIdentifier"); otherwise it waits, listed, until something changes.
                var job = failed
                if let corrected = ExternalPurchaseReportCorrection.corrected(failed.report, errors: failed.errors,
                                                                              rebuilt: try build(failed.requestIdentifier), nowMs: r.nowMs) {
                    job.correct(with: corrected, atMs: r.nowMs)
                    try r.storeExternalReport(Self.row(job, of: row))
                    try r.recordTimeline(customerId: t.customerId, kind: "externalPurchaseReport.corrected", reference: externalPurchaseId,
                                         detail: ["requestIdentifier": .string(job.requestIdentifier)])
                }
                try r.updateExternalToken(t)
                return
            }
            if let report = try build(ids.uuid()) {
                let job = ExternalPurchaseReportJob(report: report, createdAtMs: r.nowMs)
                try r.storeExternalReport(ExternalReportRow(requestIdentifier: job.requestIdentifier, externalPurchaseId: externalPurchaseId,
                                                            bundleId: t.bundleId, state: job.state.rawValue, job: job.storedJSON,
                                                            nextAttemptMs: job.nextAttemptMs, createdAtMs: r.nowMs))
            } else if purchases.isEmpty, !accepted.any {
                // Nothing to say yet: a token without purchases is reported at its deadline.
                t.reportDueMs = max(r.nowMs + 1, ExternalPurchaseReportSchedule.noPurchaseReportDueMs(token))
            }
            try r.updateExternalToken(t)
        }
    }

    /// A stored purchase as the report builder reads it.
    static func record(_ p: ExternalPurchaseRow) -> ExternalPurchaseRecord? {
        guard let currency = CurrencyCode(p.currency), let productId = p.productId else { return nil }
        let kind: ExternalPurchaseRecord.Kind
        if p.productKind == ProductKind.autoRenewable.rawValue, let end = p.expiresAtMs {
            kind = .subscriptionPeriod(subscriptionKey: p.provider + "\u{0}" + (p.subscriptionId ?? p.externalId),
                                       periodStartMs: p.periodStartMs ?? p.purchasedAtMs, periodEndMs: end)
        } else {
            kind = .oneTime(quantity: 1)
        }
        let refunds = (p.refunds.arrayValue ?? []).compactMap { r -> ExternalPurchaseRecord.Refund? in
            guard let key = r["key"]?.stringValue, let amount = r["amount"]?.int64Value, let at = r["atMs"]?.int64Value, amount > 0 else { return nil }
            return ExternalPurchaseRecord.Refund(refundKey: key, amount: amount, refundedAtMs: at)
        }
        return ExternalPurchaseRecord(provider: p.provider, externalId: p.externalId, productId: productId, kind: kind, price: p.price,
                                      currency: currency, purchasedAtMs: p.purchasedAtMs, refunds: refunds)
    }

    static func accepted(_ json: JSONValue) -> ExternalPurchaseReportBuilder.AcceptedReports {
        ExternalPurchaseReportBuilder.AcceptedReports(lineItemIds: Set((json["lineItemIds"]?.arrayValue ?? []).compactMap(\.stringValue)),
                                                      statusOnly: json["statusOnly"]?.boolValue ?? false)
    }

    static func acceptedJSON(_ a: ExternalPurchaseReportBuilder.AcceptedReports) -> JSONValue {
        ["lineItemIds": .array(a.lineItemIds.sorted().map(JSONValue.string)), "statusOnly": .bool(a.statusOnly)]
    }

    static func row(_ job: ExternalPurchaseReportJob, of row: ExternalReportRow) -> ExternalReportRow {
        var r = row
        r.state = job.state.rawValue
        r.job = job.storedJSON
        r.nextAttemptMs = job.isDue(atMs: Int64.max) ? job.nextAttemptMs : nil
        return r
    }

    // MARK: Sending

    /// Sends one due report and stores what Apple answered.
    func send(_ row: ExternalReportRow) async {
        guard var job = ExternalPurchaseReportJob(stored: row.job), job.isDue(atMs: clock.nowMs()) else { return }
        let client: AppStoreServerAPIClient
        do {
            client = try access.connection().client(for: row.bundleId)
        } catch {
            job.markRetryable(atMs: clock.nowMs())
            await save(job, row, logLine: "external purchase report waits: the App Store Server API is not configured")
            return
        }
        do {
            _ = try await client.sendExternalPurchaseReport(job.report)
            job.markSent(atMs: clock.nowMs())
        } catch {
            if error.isReportRejection, error.reportErrors.contains(where: { $0.errorCode == 1 && $0.fieldName == "requestIdentifier" }),
               let held = try? await client.retrieveExternalPurchaseReport(requestIdentifier: job.requestIdentifier,
                                                                            environment: AppStoreServerAPIClient.environment(ofExternalPurchaseId: row.externalPurchaseId)),
               held.externalPurchaseId == row.externalPurchaseId {
                // Apple accepted it before (Kakin stopped before storing the answer): Retrieve confirms what it holds.
                job.markSent(atMs: clock.nowMs())
            } else if error.isReportRejection {
                job.markRejected(error.reportErrors, atMs: clock.nowMs())
            } else {
                job.markRetryable(atMs: clock.nowMs(), retryAfterMs: error.retryAfterMs)
            }
        }
        await save(job, row, logLine: nil)
    }

    /// Stores a job after an attempt; a sent report's line items join what Apple accepted for the token, which is
    /// looked at again (more may have happened meanwhile); a refused one is looked at again in a minute (a
    /// correction Kakin can make itself).
    func save(_ job: ExternalPurchaseReportJob, _ row: ExternalReportRow, logLine: String?) async {
        let events = events, report = job.report
        do {
            let appended = try await store.transaction { r in
                try r.storeExternalReport(Self.row(job, of: row))
                guard job.state == .sent || job.state == .failed, var t = try r.externalToken(row.externalPurchaseId) else { return 0 }
                var appended = 0
                if job.state == .sent {
                    var accepted = Self.accepted(t.accepted)
                    accepted.add(report)
                    t.accepted = Self.acceptedJSON(accepted)
                    t.reportDueMs = r.nowMs
                    if let customer = t.customerId {
                        appended = try events.record(r, customerId: customer, facts: [EventDraft(type: .externalPurchaseReported, data: [
                            "externalPurchaseId": .string(row.externalPurchaseId), "requestIdentifier": .string(report.requestIdentifier),
                            "status": .string(report.status.rawValue), "lineItems": .int(Int64(report.lineItems.count)),
                        ])], bundleId: row.bundleId)
                    }
                } else {
                    t.reportDueMs = r.nowMs + ExternalPurchaseReportJob.retryBaseMs
                }
                try r.updateExternalToken(t)
                try r.recordTimeline(customerId: t.customerId, kind: "externalPurchaseReport.\(job.state.rawValue)", reference: row.externalPurchaseId,
                                     detail: ["requestIdentifier": .string(report.requestIdentifier), "status": .string(report.status.rawValue),
                                              "errors": .array(job.errors.map(\.json))])
                return appended
            }
            if appended > 0 { events.wake() }
        } catch {
            logger.error("external purchase report: could not store Apple's answer", ["requestIdentifier": .string(row.requestIdentifier),
                                                                                       "error.id": .string(error.kind.id)])
        }
        switch job.state {
        case .sent: metrics.increment(.externalReportsSent)
        case .failed:
            metrics.increment(.externalReportsFailed)
            logger.error("Apple refused an external purchase report", [
                "requestIdentifier": .string(row.requestIdentifier), "externalPurchaseId": .string(row.externalPurchaseId),
                "errors": .string(job.errors.map { "\($0.errorCode) \($0.fieldName ?? "")" }.joined(separator: ", ")),
            ])
        default:
            if let logLine { logger.warning(logLine, ["requestIdentifier": .string(row.requestIdentifier)]) }
        }
    }

    // MARK: Apple's notification, the API's answers

    /// EXTERNAL_PURCHASE_TOKEN/UNREPORTED: Apple holds no report of the token past its deadline. The token is due at
    /// once (recorded first if Kakin never saw it: then UNRECOGNIZED_TOKEN), counted in
    /// `kakin_external_purchase_tokens_unreported_total`, and the worker woken.
    public func unreported(notification json: JSONValue) async throws(KakinError) {
        guard let section = json["externalPurchaseToken"] else {
            throw KakinError(.externalPurchaseTokenInvalid, detail: "EXTERNAL_PURCHASE_TOKEN notification without externalPurchaseToken")
        }
        let token = try ExternalPurchaseToken(notificationSection: section)
        try await store.transaction { r in
            if var t = try r.externalToken(token.externalPurchaseId) {
                t.unreportedAtMs = r.nowMs
                t.reportDueMs = r.nowMs
                try r.updateExternalToken(t)
            } else {
                var t = ExternalWrite.tokenRow(token, customerId: nil, nowMs: r.nowMs)
                t.unreportedAtMs = r.nowMs
                t.reportDueMs = r.nowMs
                _ = try r.insertExternalToken(t)
            }
            try r.recordTimeline(customerId: nil, kind: "externalPurchaseToken.unreported", reference: token.externalPurchaseId, detail: .null)
        }
        metrics.increment(.externalTokensUnreported)
        logger.error("Apple says an external purchase token went unreported; reporting it now", ["externalPurchaseId": .string(token.externalPurchaseId)])
        worker.wake()
    }

    /// `pending` (nothing accepted yet), `sent` (Apple accepted a report of it), `failed` (its last report was refused).
    func reportStatus(of token: ExternalTokenRow) async throws(KakinError) -> String {
        let reports = try await store.snapshot { r in try r.externalReports(externalPurchaseId: token.externalPurchaseId) }
        if reports.last?.state == ExternalPurchaseReportJob.State.failed.rawValue { return "failed" }
        if Self.accepted(token.accepted).any || reports.contains(where: { $0.state == "sent" }) { return "sent" }
        return "pending"
    }

    /// `GET /v1/admin/external-purchase-reports?state=pending|sent|failed` → `{"reports": [...]}` newest first.
    public func reports(state: String?, limit: Int) async throws(KakinError) -> JSONValue {
        let states: [String]
        switch state {
        case nil: states = ExternalPurchaseReportJob.State.allCases.map(\.rawValue)
        case "pending"?: states = ["pending", "corrected"]
        case "sent"?, "failed"?: states = [state!]
        default: throw KakinError(.invalidField, "state must be pending, sent or failed.")
        }
        let rows = try await store.snapshot { r in try r.externalReports(states: states, limit: limit) }
        return ["reports": .array(rows.compactMap { row in
            guard let job = ExternalPurchaseReportJob(stored: row.job), case .object(var o) = job.json else { return nil }
            o["bundleId"] = .string(row.bundleId)
            o["createdAt"] = .string(Timestamp.rfc3339(row.createdAtMs))
            return .object(o)
        })]
    }
}
