import KakinCore
import KakinMetrics
import KakinStorage

/// Resolves and applies a Google Play import row; answers whether anything changed (in a dry run: would). The seam Google
/// Play's ingest plugs into; until it does, every Play row is a `google_play_not_configured` reject.
public typealias GooglePlayImportResolver = @Sendable (_ row: GooglePlayImport, _ dryRun: Bool, _ eventsAsked: Bool) async throws(KakinError) -> Bool

/// An import's progress, as `GET /v1/admin/imports/{id}` answers it.
public struct ImportStatus: Sendable, Hashable {
    public var job: ImportJob
    /// Rows per second over the current (or last) run, on the real clock.
    public var ratePerSecond: Double
    /// Seconds until the rows left are done at that rate (0 once ended; nil while nothing is known).
    public var etaSeconds: Int64?

    /// The contract's states (`receiving`, a file still being stored, is shown as `queued`).
    public var state: String { job.state == .receiving ? "queued" : job.state.rawValue }

    public var json: JSONValue {
        ["importId": .string(job.importId), "kind": .string(job.kind), "state": .string(state), "dryRun": .bool(job.dryRun),
         "events": .bool(job.events), "rows": .int(job.rows), "done": .int(job.done), "applied": .int(job.applied),
         "alreadyPresent": .int(job.alreadyPresent), "rejected": .int(job.rejected), "ratePerSecond": .double(ratePerSecond),
         "etaSeconds": etaSeconds.map(JSONValue.int) ?? .null, "createdAt": .string(Timestamp.rfc3339(job.createdAtMs)),
         "finishedAt": Timestamp.rfc3339(job.finishedAtMs), "error": job.lastError.map(JSONValue.string) ?? .null]
    }
}

/// Moving in (`kakin import`, `POST /v1/admin/imports`): a file of an existing app's customers, purchases or coin
/// balances, applied row by row in the background through the same use cases as everything else — an App Store row
/// through `AppStoreSync.importHistory` (the one apply's `import` path, one write per row), a balance through
/// `Wallets.importBalances` — so it shares the writer, the App Store client's rate limits and the apply path. The job
/// and its rows are stored: any process runs it under a lease, a restart resumes at the first row not committed, and a
/// row applied twice changes nothing the second time. Events are told only when the import asked for them (the
/// `import` path's row in the path table says so); without them, the business numbers of the customers it changed are
/// recomputed after each batch (the rollup worker follows events).
public final class Imports: Sendable {
    let jobs: ImportJobStore
    let ids: any IDGenerator
    let wallets: Wallets
    let sync: AppStoreSync
    let numbers: BusinessMetrics
    let googlePlay: GooglePlayImportResolver?
    /// Real time: leases, rates, back-off.
    let clock: any Clock
    let logger: Logger
    let owner: String
    public let worker: BackgroundLoop

    /// A worker holds its job this long without renewing (each batch renews): a killed process's job resumes after it.
    public static let leaseMs: Int64 = 15_000
    /// Balances written per write (one write: their ledger entries and their rows' outcomes).
    public static let balancesPerWrite = 250
    /// App Store rows resolved side by side (their calls are spaced by the client's rate limits).
    public static let storeRowsAtOnce = 8

    init(store: KakinStore, wallets: Wallets, sync: AppStoreSync, numbers: BusinessMetrics, googlePlay: GooglePlayImportResolver?,
         clock: any Clock, logger: Logger, owner: String, worker: BackgroundLoop = BackgroundLoop(pollIntervalMs: 5_000)) {
        jobs = ImportJobStore(store: store)
        ids = store.ids
        self.wallets = wallets
        self.sync = sync
        self.numbers = numbers
        self.googlePlay = googlePlay
        self.clock = clock
        self.logger = logger
        self.owner = owner
        self.worker = worker
    }

    // MARK: The API

    /// Reads the file (refused whole, with the line, when empty or malformed) and queues a job for its rows.
    public func start(kind name: String, file: [UInt8], dryRun: Bool, events: Bool, createdBy: String?) async throws(KakinError) -> String {
        guard let kind = ImportKind(rawValue: name) else {
            throw KakinError(.invalidField, "kind must be appStore, googlePlay, balances or revenuecat.")
        }
        let records = try ImportFile.parse(file, kind: kind)
        let importId = ids.id(prefix: "imp_")
        try await jobs.create(importId: importId, kind: kind.rawValue, dryRun: dryRun, events: events,
                              rows: records.map { ($0.line, $0.json.jsonString) }, createdBy: createdBy, nowMs: clock.nowMs(),
                              jobsAtOnceMax: ImportLimits.jobsAtOnceMax)
        logger.info("import queued", ["import.id": .string(importId), "import.kind": .string(kind.rawValue), "import.rows": .int(Int64(records.count))])
        worker.wake()
        return importId
    }

    public func status(_ importId: String) async throws(KakinError) -> ImportStatus {
        guard let job = try await jobs.job(importId) else { throw KakinError(.importNotFound) }
        return status(of: job)
    }

    public func list() async throws(KakinError) -> [ImportStatus] {
        try await jobs.jobs(limit: Self.listMax).map(status(of:))
    }

    func status(of job: ImportJob) -> ImportStatus {
        var rate = 0.0
        if let started = job.runStartedAtMs {
            let elapsedMs = max(1, (job.finishedAtMs ?? clock.nowMs()) - started)
            rate = (Double(job.done - job.doneAtRunStart) * 1000 / Double(elapsedMs) * 10).rounded() / 10
        }
        var eta: Int64?
        if !job.state.isOpen {
            eta = 0
        } else if rate > 0 {
            eta = Int64((Double(job.rows - job.done) / rate).rounded(.up))
        }
        return ImportStatus(job: job, ratePerSecond: rate, etaSeconds: eta)
    }

    /// Rejected rows in file order: `{"line", "row", "error": {"code", "id", "message"}}`, and where the next page starts.
    public func rejects(_ importId: String, after: Int64?, limit: Int) async throws(KakinError) -> (rejects: [JSONValue], next: Int64?) {
        guard try await jobs.job(importId) != nil else { throw KakinError(.importNotFound) }
        let page = try await jobs.rejects(importId, afterRow: after, limit: limit)
        let json: [JSONValue] = page.map { r in
            ["line": .int(r.line), "row": (try? JSONParser.parse(r.fields)) ?? .object([:]), "error": (try? JSONParser.parse(r.error)) ?? .null]
        }
        return (json, page.count == limit ? page.last?.rowNumber : nil)
    }

    public func cancel(_ importId: String) async throws(KakinError) -> ImportStatus {
        let job = try await jobs.cancel(importId, nowMs: clock.nowMs())
        logger.info("import cancelled", ["import.id": .string(importId), "import.done": .int(job.done)])
        return status(of: job)
    }

    // MARK: The worker

    /// The worker's pass: runs every job it can claim, one at a time, to its end (or until it is cancelled, taken over or
    /// the loop stops). A failure of the database ends the pass; the lease then lets the next pass (or process) resume.
    public func processDue() async {
        while !Task.isCancelled {
            let job: ImportJob
            do {
                let now = clock.nowMs()
                guard let claimed = try await jobs.claim(owner: owner, nowMs: now, leaseUntilMs: now + Self.leaseMs) else { return }
                job = claimed
            } catch {
                logger.warning("imports: no job claimed; will retry", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail ?? "")])
                return
            }
            logger.info("import running", ["import.id": .string(job.importId), "import.done": .int(job.done), "import.rows": .int(job.rows)])
            await run(job)
        }
    }

    func run(_ job: ImportJob) async {
        guard let kind = ImportKind(rawValue: job.kind) else {
            try? await jobs.finish(job.importId, owner: owner, state: .failed, error: "unknown kind \(job.kind)", nowMs: clock.nowMs())
            return
        }
        var covered = Set<String>()
        var backoffMs: Int64 = 1_000
        while !Task.isCancelled {
            do throws(KakinError) {
                guard try await jobs.renew(job.importId, owner: owner, leaseUntilMs: clock.nowMs() + Self.leaseMs) else { return }
                let rows = try await jobs.pendingRows(job.importId, limit: kind == .balances ? Self.balancesPerWrite : Self.storeRowsAtOnce)
                guard !rows.isEmpty else {
                    try await jobs.finish(job.importId, owner: owner, state: .done, error: nil, nowMs: clock.nowMs())
                    let ended = try await jobs.job(job.importId)
                    logger.info("import done", ["import.id": .string(job.importId), "import.applied": .int(ended?.applied ?? 0),
                                                "import.alreadyPresent": .int(ended?.alreadyPresent ?? 0), "import.rejected": .int(ended?.rejected ?? 0)])
                    return
                }
                if kind == .balances {
                    try await applyBalances(rows, job: job)
                } else {
                    try await applyStoreRows(rows, job: job, kind: kind, covered: &covered)
                }
                backoffMs = 1_000
            } catch where !Self.isRetryable(error) {
                // Not the row's fault and not worth retrying (a bug): the job stops, its rows done stay done.
                logger.error("import failed", ["import.id": .string(job.importId), "error.id": .string(error.kind.id),
                                               "error.detail": .string(error.detail ?? error.message)])
                try? await jobs.finish(job.importId, owner: owner, state: .failed, error: "\(error.kind.id) \(error.message)", nowMs: clock.nowMs())
                return
            } catch {
                // The App Store or the database is unavailable: the rows stay pending; wait (Apple's Retry-After when given).
                let waitMs = min(Self.backoffMsMax, max(backoffMs, (error.retryAfterMs ?? 0) - clock.nowMs()))
                logger.warning("import waiting", ["import.id": .string(job.importId), "error.id": .string(error.kind.id),
                                                  "error.detail": .string(error.detail ?? error.message), "retry.ms": .int(waitMs)])
                backoffMs = min(Self.backoffMsMax, backoffMs * 2)
                guard await wait(ms: waitMs, holding: job.importId) else { return }
            }
        }
    }

    /// Waits on the real clock, renewing the job's lease meanwhile; false when the job is no longer this worker's or the
    /// task was cancelled (the server is stopping).
    func wait(ms: Int64, holding importId: String) async -> Bool {
        var left = max(0, ms)
        while left > 0 {
            let step = min(left, Self.leaseMs / 3)
            guard (try? await Task.sleep(nanoseconds: UInt64(step) * 1_000_000)) != nil,
                  (try? await jobs.renew(importId, owner: owner, leaseUntilMs: clock.nowMs() + Self.leaseMs)) == true else { return false }
            left -= step
        }
        return true
    }

    /// A row's checks: its typed form, or its reject.
    static func parse(_ row: PendingImportRow, kind: ImportKind) -> Result<ImportRow, KakinError> {
        var fields: [String: String] = [:]
        if case .object(let o)? = try? JSONParser.parse(row.fields) {
            for (k, v) in o { if let s = v.stringValue { fields[k] = s } }
        }
        do {
            return .success(try ImportRow.parse(ImportRecord(line: Int(row.line), fields: fields), kind: kind))
        } catch {
            return .failure(error)
        }
    }

    static func rejected(_ row: PendingImportRow, _ error: KakinError) -> ImportRowOutcome {
        ImportRowOutcome(rowNumber: row.rowNumber, state: .rejected,
                         error: ["code": .string(error.kind.code), "id": .string(error.kind.id), "message": .string(error.message)])
    }

    /// A failure that says nothing about the row (the App Store, the verifier's revocation check or the database is
    /// unavailable: 503s): the row stays pending and is tried again.
    static func isRetryable(_ error: KakinError) -> Bool { error.httpStatus == 503 }

    /// Balances: one write for the batch's ledger entries and its rows' outcomes (`Wallets.importBalances`).
    func applyBalances(_ rows: [PendingImportRow], job: ImportJob) async throws(KakinError) {
        var outcomes: [ImportRowOutcome] = []
        var valid: [(row: PendingImportRow, balance: ImportedBalance, atMs: Int64)] = []
        for row in rows {
            switch Self.parse(row, kind: .balances) {
            case .success(.balance(let b)):
                let atMs: Int64
                switch b.asOf {
                case .instant(let ms): atMs = ms
                case .endOfDay(let day): atMs = numbers.settings.coinCalendar.lastMs(ofDay: day)
                }
                valid.append((row, b, atMs))
            case .success: preconditionFailure("a balances file has balance rows")
            case .failure(let error): outcomes.append(Self.rejected(row, error))
            }
        }
        let importId = job.importId
        let rejects = outcomes
        let validRows = valid.map(\.row)
        let results = try await wallets.importBalances(valid.map { ($0.balance, $0.atMs) }, recordsEvents: job.events, dryRun: job.dryRun) { r, results in
            try r.recordImportOutcomes(importId, rejects + Self.outcomes(validRows, results))
        }
        if job.dryRun { try await jobs.record(importId, rejects + Self.outcomes(validRows, results)) }
        if !job.dryRun, !job.events {
            let changed = zip(valid, results).compactMap { v, result -> String? in if case .applied = result { return v.balance.customerId } else { return nil } }
            try await numbers.recompute(customerIds: Array(Set(changed)).sorted())
        }
    }

    static func outcomes(_ rows: [PendingImportRow], _ results: [Wallets.BalanceImportOutcome]) -> [ImportRowOutcome] {
        zip(rows, results).map { row, result in
            switch result {
            case .applied: return ImportRowOutcome(rowNumber: row.rowNumber, state: .applied)
            case .alreadyPresent: return ImportRowOutcome(rowNumber: row.rowNumber, state: .present)
            case .conflict(let error): return rejected(row, error)
            }
        }
    }

    /// App Store (and Google Play) rows, side by side: each is one history read and applied whole, or a reject. Rows that
    /// met an unavailable App Store or database stay pending, and the batch's failure makes the job wait.
    func applyStoreRows(_ rows: [PendingImportRow], job: ImportJob, kind: ImportKind, covered: inout Set<String>) async throws(KakinError) {
        enum RowResult: Sendable {
            case done(ImportRowOutcome, customerId: String?, covers: Set<String>)
            case retry(KakinError)
        }
        let sync = sync, googlePlay = googlePlay, known = covered
        let results = await withTaskGroup(of: RowResult.self) { group -> [RowResult] in
            for row in rows {
                group.addTask {
                    let typed: ImportRow
                    switch Self.parse(row, kind: kind) {
                    case .success(let r): typed = r
                    case .failure(let error): return .done(Self.rejected(row, error), customerId: nil, covers: [])
                    }
                    do throws(KakinError) {
                        switch typed {
                        case .appStore(let customerId, let transactionId):
                            if known.contains(customerId + "|" + transactionId) {
                                return .done(ImportRowOutcome(rowNumber: row.rowNumber, state: .present), customerId: nil, covers: [])
                            }
                            let history = try await sync.importHistory(customerId: customerId, transactionId: transactionId, dryRun: job.dryRun,
                                                                       eventsAsked: job.events)
                            return .done(ImportRowOutcome(rowNumber: row.rowNumber, state: history.changed ? .applied : .present),
                                         customerId: history.changed ? customerId : nil,
                                         covers: Set(history.transactionIds.map { customerId + "|" + $0 }))
                        case .googlePlay(let purchase):
                            guard let googlePlay else { throw KakinError(.googlePlayNotConfigured) }
                            let changed = try await googlePlay(purchase, job.dryRun, job.events)
                            return .done(ImportRowOutcome(rowNumber: row.rowNumber, state: changed ? .applied : .present),
                                         customerId: changed ? purchase.customerId : nil, covers: [])
                        case .balance:
                            preconditionFailure("only a balances file has balance rows")
                        }
                    } catch where Self.isRetryable(error) {
                        return .retry(error)
                    } catch {
                        return .done(Self.rejected(row, error), customerId: nil, covers: [])
                    }
                }
            }
            var all: [RowResult] = []
            for await r in group { all.append(r) }
            return all
        }
        var outcomes: [ImportRowOutcome] = []
        var changed: Set<String> = []
        var retry: KakinError?
        for result in results {
            switch result {
            case .done(let outcome, let customerId, let covers):
                outcomes.append(outcome)
                if let customerId { changed.insert(customerId) }
                if covered.count + covers.count <= Self.coveredMax { covered.formUnion(covers) }
            case .retry(let error):
                retry = retry.map { ($0.retryAfterMs ?? 0) >= (error.retryAfterMs ?? 0) ? $0 : error } ?? error
            }
        }
        try await jobs.record(job.importId, outcomes.sorted { $0.rowNumber < $1.rowNumber })
        if !job.dryRun, !job.events { try await numbers.recompute(customerIds: changed.sorted()) }
        if let retry { throw retry }
    }
}
