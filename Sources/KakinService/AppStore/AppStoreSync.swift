import AppStoreClient
import AppStoreSecurity
import KakinCore
import KakinCrypto
import KakinStorage

/// What Kakin reads from the App Store Server API and ingests like any other signed fact: a transaction by id, a
/// customer's history (restore), a legacy receipt's purchases, missed notifications (Notification History), an
/// order's transactions. Everything returned is verified before use.
public struct AppStoreSync: Sendable {
    let store: KakinStore
    let access: AppStoreAccess
    let ingest: Ingest
    let inbox: NotificationInbox
    let logger: Logger
    let clock: any Clock
    let retryClock: any Clock
    let apps: [String: AppSettings]
    let appReceiptRootsDER: [[UInt8]]?
    let leaseOwner: String
    /// What Apple's 2026 additions add to a restore's writes (`Apple2026Ingest`).
    let apple2026: Apple2026Ingest

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
    /// transaction linked to the customer) and ingests it (`IngestPath.restore`): idempotent, so restoring twice
    /// changes nothing the second time.
    public func restore(customerId: String, transactionId: String?) async throws(KakinError) {
        let connection = try access.connection()
        let ids: [String]
        if let transactionId {
            ids = [transactionId]
        } else {
            ids = try await store.linkedOriginalTransactions(customerId, limit: AppStoreLimits.restoreOriginalsMax)
        }
        for id in ids {
            let history = try await verifiedHistory(connection, id, path: .restore)
            // A refused restore changes nothing: when a chain of this history belongs to another customer (and the
            // policy keeps first owners), it is refused before anything is applied, so the presenter cannot claim the
            // account's other, still unclaimed chains (a family member's shared subscription) on the way
            // (`kakin simulate` found it: seed 280394968700754).
            try await refuseAnotherCustomersHistory(history.all, presenter: customerId)
            _ = try await apply(history, path: .restore, customerId: customerId, recordsEvents: true)
        }
    }

    /// A customer's history as the App Store Server API answers it for one of their transactions, every payload verified:
    /// each subscription's latest transaction with its renewal info, then every transaction (all pages).
    struct VerifiedHistory: Sendable {
        var subscriptions: [(VerifiedTransaction, VerifiedRenewalInfo?)]
        var transactions: [VerifiedTransaction]
        var all: [VerifiedTransaction] { subscriptions.map(\.0) + transactions }
    }

    func verifiedHistory(_ connection: AppStoreConnection, _ id: String, path: IngestPath) async throws(KakinError) -> VerifiedHistory {
        let (transactions, statuses) = try await connection.history(for: id)
        var history = VerifiedHistory(subscriptions: [], transactions: [])
        for item in statuses {
            history.subscriptions.append((try ingest.verifyTransaction(item.signedTransactionInfo),
                                          try ingest.verifyRenewalInfo(item.signedRenewalInfo, for: path)))
        }
        for jws in transactions { history.transactions.append(try ingest.verifyTransaction(jws)) }
        return history
    }

    /// Applies a verified history for `customerId`. Several signed copies of one transaction can come back (history is
    /// sorted by last change): every copy is ingested; storage keeps the newest.
    func apply(_ history: VerifiedHistory, path: IngestPath, customerId: String, recordsEvents: Bool) async throws(KakinError) -> [IngestResult] {
        var results: [IngestResult] = []
        for (transaction, renewalInfo) in history.subscriptions {
            results.append(try await ingest.apply(transaction: transaction, renewalInfo: renewalInfo, path: path, presenter: customerId,
                                                  recordsEvents: recordsEvents, alsoInWrite: apple2026.inWrite(transaction.payload, path: path)))
        }
        for transaction in history.transactions {
            results.append(try await ingest.apply(transaction: transaction, path: path, presenter: customerId, recordsEvents: recordsEvents,
                                                  alsoInWrite: apple2026.inWrite(transaction.payload, path: path)))
        }
        return results
    }

    // MARK: Import

    /// What an import row of the App Store did.
    public struct ImportedHistory: Sendable {
        /// Whether anything changed (or, in a dry run, would).
        public var changed: Bool
        /// Every transaction ID of the history (and their original IDs): later rows naming one of them are covered.
        public var transactionIds: Set<String>
    }

    /// An import row (`IngestPath.import`): reads the customer's whole history for `transactionId` (Get Transaction History,
    /// all pages, and Get All Subscription Statuses), verifies every signed payload, refuses the row when a product is not
    /// in the catalog or a chain is another customer's, then applies it all with `customerId` as the owner. A dry run
    /// checks the same and writes nothing.
    /// - Throws: the row's reject (verification, `unknown_product`, `belongs_to_another_customer`, `transaction_not_found`),
    ///   or a failure worth retrying later (503s: the App Store or the database unavailable, with `retryAfterMs` when known).
    public func importHistory(customerId: String, transactionId: String, dryRun: Bool, recordsEvents: Bool) async throws(KakinError) -> ImportedHistory {
        let connection = try access.connection()
        let history: VerifiedHistory
        do {
            history = try await verifiedHistory(connection, transactionId, path: .import)
        } catch where error.kind == .transactionNotFound {
            throw KakinError(.transactionNotFound, "No configured app's App Store knows transaction \(transactionId) (another app's, or a typo).")
        }
        let all = history.all
        if let unknown = all.first(where: { ingest.catalogs[$0.payload.bundleId]?[$0.payload.productId] == nil })?.payload {
            throw KakinError(.unknownProduct, "Product \(unknown.productId) (transaction \(unknown.transactionId)) is not in this server's catalog.")
        }
        try await refuseAnotherCustomersHistory(all, presenter: customerId)
        let ids = Set(all.flatMap { [$0.payload.transactionId, $0.payload.originalTransactionId] })
        guard !dryRun else {
            let transactionIds = Set(all.filter { $0.payload.revocationDate == nil }.map(\.payload.transactionId))
            let known = try await store.snapshot { r in try transactionIds.filter { try r.appliedPurchase($0) != nil }.count }
            return ImportedHistory(changed: known < transactionIds.count, transactionIds: ids)
        }
        let results = try await apply(history, path: .import, customerId: customerId, recordsEvents: recordsEvents)
        return ImportedHistory(changed: results.contains { !$0.changes.isEmpty }, transactionIds: ids)
    }

    /// Throws `belongs_to_another_customer` when, under `keepFirstOwner`, a chain of `transactions` is the chain of a
    /// customer other than `presenter` (by its link, else its token), as the ingest would for that chain.
    func refuseAnotherCustomersHistory(_ transactions: [VerifiedTransaction], presenter: String) async throws(KakinError) {
        guard ingest.transferPolicy == .keepFirstOwner, !transactions.isEmpty else { return }
        let payloads = transactions.map(\.payload)
        let other = try await store.transaction { r -> String? in
            for tx in payloads {
                let owner = Ownership.currentOwner(linkOwner: try r.linkOwner(originalTransactionId: tx.originalTransactionId),
                                                   tokenOwner: try tx.appAccountToken.flatMap(r.customerOwning(appAccountToken:)))
                if let owner, owner != presenter { return tx.originalTransactionId }
            }
            return nil
        }
        if let other {
            throw KakinError(.belongsToAnotherCustomer, detail: "original transaction \(other) is linked to another customer")
        }
    }

    // MARK: Legacy app receipts

    /// Receipt lookups in one `POST …/transactions`: the newest purchase of each chain (a subscription's
    /// renewals are one chain), newest first. Older chains beyond it are left to a restore.
    public static let receiptLookupsMax = 25
    /// IDs a restore tries (newest first) until the App Store knows one: one is enough, history is per customer.
    public static let receiptRestoreAttemptsMax = 3

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
