import AppStoreClient
import AppStoreSecurity
import KakinCore
import KakinCrypto
import KakinStorage

/// What Kakin reads from the App Store Server API and ingests like any other signed fact: a transaction by id, a
/// customer's history (restore), a legacy receipt's purchases, missed notifications (Notification History), an
/// order's transactions. Everything returned is verified before use.
public struct AppStoreSync: Sendable {
    let store: any PurchaseRepository & NotificationRepository & SupportRepository
    let access: AppStoreAccess
    let ingest: Ingest
    let inbox: NotificationInbox
    let logger: Logger
    let clock: any Clock
    let retryClock: any Clock
    let apps: [String: AppSettings]
    let appReceiptRootsDER: [[UInt8]]?
    let leaseOwner: String

    // MARK: Transactions by id

    /// Get Transaction Info, verified: the `{"transactionId"}` form of `POST …/transactions`.
    public func fetchTransaction(_ transactionId: String) async throws(KakinError) -> VerifiedTransaction {
        try ingest.verifyTransaction(try await access.connection().signedTransaction(transactionId))
    }

    /// Apple's Look Up Order ID, asked of every configured app until one knows the order; each transaction verified.
    public func lookUpOrder(_ orderId: String) async throws(KakinError) -> [VerifiedTransaction] {
        let connection = try access.connection()
        for entry in connection.clients {
            let answer: [String]
            do {
                answer = try await entry.client.lookUpOrderId(orderId).signedTransactions
            } catch {
                throw AppStoreConnection.kakinError(error)
            }
            if !answer.isEmpty {
                var out: [VerifiedTransaction] = []
                for jws in answer { out.append(try ingest.verifyTransaction(jws)) }
                return out
            }
        }
        return []
    }

    // MARK: Restore

    /// Pulls the history from the App Store Server API (for the given transaction id, or for every original
    /// transaction linked to the customer) and ingests it (`IngestPath.restore`) as ONE decision: everything read is
    /// verified first, then applied in one write (`Ingest.applyAll`), so a chain of it that belongs to another customer
    /// (under `keepFirstOwner`) refuses the whole restore with nothing applied, even when that customer claims it at the
    /// same moment — the presenter cannot claim the account's other, still unclaimed chains (a family member's shared
    /// subscription) on the way (`kakin simulate` found it: seed 280394968700754). Idempotent: restoring twice changes
    /// nothing the second time. At most `Ingest.factsPerWriteMax` signed copies (`restore_too_large` beyond).
    /// - Parameter actor: the desk's restore names who did it: recorded in the customer's timeline once it applied.
    public func restore(customerId: String, transactionId: String?, byDesk actor: String? = nil) async throws(KakinError) {
        try await restoreHistory(customerId: customerId, transactionId: transactionId)
        if let actor {
            try await store.recordSupportAction(customerId: customerId, kind: "admin.restore", reference: nil, detail: ["by": .string(actor)])
        }
    }

    private func restoreHistory(customerId: String, transactionId: String?) async throws(KakinError) {
        let connection = try access.connection()
        let ids: [String]
        if let transactionId {
            ids = [transactionId]
        } else {
            ids = try await store.linkedOriginalTransactions(customerId, limit: AppStoreLimits.restoreOriginalsMax)
        }
        var items: [IngestItem] = []
        for id in ids {
            items += try await verifiedHistory(connection, id, path: .restore, itemsBefore: items.count, what: "the history of \(ids.count) purchases")
        }
        guard !items.isEmpty else { return }
        _ = try await ingest.applyAll(items, path: .restore, presenter: customerId)
    }

    /// A customer's history as the App Store Server API answers it for one of their transactions (Get Transaction
    /// History, all pages, and Get All Subscription Statuses), every payload verified: each subscription's latest
    /// transaction with its renewal info, then the history. Several signed copies of one transaction can come back
    /// (history is sorted by last change): every copy is ingested; the newest is kept. With the `itemsBefore` already
    /// gathered, at most `Ingest.factsPerWriteMax` (`restore_too_large` beyond, `what` saying whose).
    func verifiedHistory(_ connection: AppStoreConnection, _ id: String, path: IngestPath, itemsBefore: Int = 0,
                         what: String) async throws(KakinError) -> [IngestItem] {
        let (transactions, statuses) = try await connection.history(for: id)
        guard itemsBefore + statuses.count + transactions.count <= Ingest.factsPerWriteMax else {
            throw KakinError(.restoreTooLarge, detail: "\(what) exceeds \(Ingest.factsPerWriteMax) signed copies")
        }
        var items: [IngestItem] = []
        for item in statuses {
            items.append(IngestItem(transaction: try ingest.verifyTransaction(item.signedTransactionInfo),
                                    renewalInfo: try ingest.verifyRenewalInfo(item.signedRenewalInfo, for: path)))
        }
        for jws in transactions { items.append(IngestItem(transaction: try ingest.verifyTransaction(jws))) }
        return items
    }

    // MARK: Import

    /// What an import row of the App Store did.
    public struct ImportedHistory: Sendable {
        /// Whether anything changed (or, in a dry run, would).
        public var changed: Bool
        /// Every transaction ID of the history (and their original IDs): later rows naming one of them are covered.
        public var transactionIds: Set<String>
    }

    /// An import row (`IngestPath.import`): reads the customer's whole history for `transactionId`, verifies every signed
    /// payload, then applies it with `customerId` as the owner in ONE write, as a restore does (`Ingest.applyAll`): a
    /// product not in the catalog or a chain that is another customer's refuses the row with nothing applied. Whether
    /// events are told is the `import` path's registered option (`IngestEvents.whenAsked`): `eventsAsked` is the job's
    /// `--events`. A dry run decides the same on a snapshot and writes nothing (`Ingest.wouldChange`).
    /// - Throws: the row's reject (verification, `unknown_product`, `belongs_to_another_customer`, `transaction_not_found`,
    ///   `restore_too_large`), or a failure worth retrying later (503s: the App Store or the database unavailable, with
    ///   `retryAfterMs` when known).
    public func importHistory(customerId: String, transactionId: String, dryRun: Bool, eventsAsked: Bool) async throws(KakinError) -> ImportedHistory {
        let connection = try access.connection()
        let items: [IngestItem]
        do {
            items = try await verifiedHistory(connection, transactionId, path: .import, what: "the history of transaction \(transactionId)")
        } catch where error.kind == .transactionNotFound {
            throw KakinError(.transactionNotFound, "No configured app's App Store knows transaction \(transactionId) (another app's, or a typo).")
        }
        let payloads = items.compactMap(\.transaction?.payload)
        let ids = Set(payloads.flatMap { [$0.transactionId, $0.originalTransactionId] })
        guard !items.isEmpty else { return ImportedHistory(changed: false, transactionIds: ids) }
        let changed: Bool
        if dryRun {
            changed = try await ingest.wouldChange(items, path: .import, presenter: customerId)
        } else {
            let results = try await ingest.applyAll(items, path: .import, presenter: customerId, context: IngestContext(eventsAsked: eventsAsked))
            changed = results.contains { !$0.changes.isEmpty }
        }
        return ImportedHistory(changed: changed, transactionIds: ids)
    }

    // MARK: Legacy app receipts

    /// A receipt in a request, read and (when configured) verified, for one of this server's apps. Kakin reads the
    /// receipt only for its transaction IDs and then asks the App Store: what the receipt itself claims is never applied.
    public func readReceipt(base64: String) throws(KakinError) -> AppReceipt {
        let receipt: AppReceipt
        do {
            let der = try AppReceipt.der(fromBase64: base64)
            if let roots = appReceiptRootsDER {
                let certificates = roots.compactMap { try? X509Certificate(der: $0) }
                receipt = try AppReceipt.parse(der: der, trustedRoots: certificates, nowMs: clock.nowMs())
            } else {
                receipt = try AppReceipt.parse(der: der)
            }
        } catch {
            switch error {
            case .malformed(let reason): throw KakinError(.invalidReceipt, detail: reason)
            case .untrusted(let reason): throw KakinError(.untrustedReceipt, detail: reason)
            }
        }
        guard let bundleId = receipt.bundleId, apps[bundleId] != nil else {
            throw KakinError(.receiptForAnotherApp, detail: "receipt bundle id \(receipt.bundleId ?? "(none)")")
        }
        return receipt
    }

    /// `POST …/transactions {"appReceipt"}`: looks up the newest purchase of each chain the receipt lists and
    /// ingests each; answers for the newest one (`IngestPath.receipt`), the purchase the app is finishing. Older
    /// ones (`receiptOlder`) that the App Store does not know, that are not in the catalog, refunded, or linked to
    /// another customer are skipped; only the newest one's refusal is the answer.
    public func applyReceipt(_ receipt: AppReceipt, customerId: String,
                             purchaseProcessId: String?) async throws(KakinError) -> (IngestOutcome, VerifiedTransaction) {
        let chains = receipt.latestPerOriginal.prefix(Self.receiptLookupsMax)
        guard !chains.isEmpty else { throw KakinError(.receiptWithoutPurchases) }
        var answer: (IngestOutcome, VerifiedTransaction)?
        for (index, purchase) in chains.enumerated() {
            let isNewest = index == 0
            guard let id = purchase.transactionId ?? purchase.originalTransactionId else { continue }
            do {
                let tx = try await fetchTransaction(id)
                let result = try await ingest.apply(transaction: tx, path: isNewest ? .receipt : .receiptOlder, presenter: customerId,
                                                    purchaseProcessId: isNewest ? purchaseProcessId : nil)
                if isNewest, let outcome = result.outcome { answer = (outcome, tx) }
            } catch where !isNewest && error.kind == .transactionNotFound {
                logger.info("receipt purchase skipped", ["transaction.id": .string(id), "error.id": .string(error.kind.id)])
            }
        }
        guard let answer else { throw KakinError(.internalError, detail: "no answer for the newest receipt purchase") }
        return answer
    }

    /// `POST …/restore {"appReceipt"}`: restores from the first receipt ID the App Store knows (newest first);
    /// a receipt without purchases restores what the customer is already linked to, like an empty body.
    public func restore(customerId: String, receipt: AppReceipt) async throws(KakinError) {
        let ids = receipt.transactionIds.prefix(Self.receiptRestoreAttemptsMax)
        guard !ids.isEmpty else { return try await restore(customerId: customerId, transactionId: nil) }
        var lastError = KakinError(.transactionNotFound)
        for id in ids {
            do {
                return try await restore(customerId: customerId, transactionId: id)
            } catch where error.kind == .transactionNotFound {
                lastError = error
            }
        }
        throw lastError
    }

    // MARK: Missed notifications

    /// Reads Notification History since the last run and stores what is missing (duplicates are ignored by
    /// `notificationUUID`), so an outage of the receiver heals by itself.
    @discardableResult
    public func recoverMissedNotifications() async throws(KakinError) -> (read: Int, new: Int) {
        let connection = try access.connection()
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
                    if try await inbox.receive(item.signedPayload, source: "history") { new += 1 }
                }
                if !history.hasMore { try await store.setSyncValue(marker, String(now)) }
            }
        }
        logger.info("notification history read", ["notifications.read": .int(Int64(read)), "notifications.new": .int(Int64(new))])
        return (read, new)
    }

    /// Name of the lease that makes one process at a time read Notification History.
    static let recoveryLease = "notificationHistoryRecovery"
    /// How long a recovery run may hold the lease before another process may start one.
    static let recoveryRunLeaseMs: Int64 = 10 * 60 * 1000

    /// The periodic Notification History recovery, in turn with the other processes: runs when no process
    /// ran it in the last 90 % of `intervalMs` (so the fleet reads the history about once per interval,
    /// whatever the number of processes); after a failure the turn is handed back at once.
    public func recoverMissedNotificationsInTurn(everyMs intervalMs: Int64) async {
        let now = retryClock.nowMs()
        do {
            guard try await store.takeLease(Self.recoveryLease, owner: leaseOwner, nowMs: now, untilMs: now + Self.recoveryRunLeaseMs) else { return }
        } catch {
            logger.warning("notification history recovery lease not taken; will retry", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            return
        }
        let succeeded = await recoverMissedNotificationsLogged()
        let end = succeeded ? retryClock.nowMs() + intervalMs * 9 / 10 : retryClock.nowMs()
        try? await store.setLeaseEnd(Self.recoveryLease, owner: leaseOwner, untilMs: end)
    }

    /// The periodic job's pass: failures are logged and retried at the next pass. Returns whether it succeeded.
    public func recoverMissedNotificationsLogged() async -> Bool {
        do {
            try await recoverMissedNotifications()
            return true
        } catch {
            logger.warning("notification history not read; will retry", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            return false
        }
    }
}
