import AppStoreSecurity
import KakinCore
import KakinEvents
import KakinStorage

/// What Apple's 2026 additions add to the ingest, beside its core sequence: extras registered per path in the path
/// table (`IngestRegistry`), which `Ingest` carries out in the same database transaction as the purchase they follow:
/// - the server-finish job (`IngestExtra.serverFinish`): a consumable credited from a notification or a restore is
///   scheduled to be finished at the App Store `serverFinish.afterSeconds` later (business time); the app's own send
///   (`.serverFinishAppSent`, 409) ends it as `appSent`;
/// - app transactions (`.appTransactionLink`): the customer of a signed transaction carrying `appTransactionId` owns
///   that app transaction (how a RESCIND_CONSENT finds its customer); a rescission that waited for it is placed now.
/// And RESCIND_CONSENT itself, applied by the notification inbox (`applyRescindConsent`).
public struct Apple2026Ingest: Sendable {
    let store: any PurchaseRepository
    let verifier: SignedDataVerifier
    let apps: [String: AppSettings]
    let events: CustomerEvents
    let metrics: Metrics

    /// `IngestExtra.serverFinish`: a credited consumable is finished at the App Store later, when the app asks for it.
    func scheduleServerFinish(_ r: Records, _ tx: TransactionPayload, customerId: String) throws {
        guard tx.type == .consumable, let policy = apps[tx.bundleId]?.apple2026.serverFinish else { return }
        try r.scheduleServerFinish(transactionId: tx.transactionId, customerId: customerId, bundleId: tx.bundleId,
                                   environment: tx.environment.rawValue, productId: tx.productId, dueMs: r.nowMs + policy.afterSeconds * 1000)
    }

    /// `IngestExtra.appTransactionLink`: the owner of a transaction naming `appTransactionId` owns that app transaction.
    /// A `consent.rescinded` event it appends (when the write tells its events: `tellsEvents`) is delivered at the webhook
    /// worker's next poll (every second), as nothing may be woken from inside a write.
    func linkAppTransaction(_ r: Records, _ tx: TransactionPayload, owner: String?, tellsEvents: Bool) throws {
        guard let appTransactionId = tx.appTransactionId, let owner else { return }
        for placed in try r.linkAppTransaction(appTransactionId, customerId: owner) where tellsEvents {
            try events.record(r, customerId: owner, facts: [Self.draft(placed)], environment: placed.environment, bundleId: placed.bundleId)
        }
    }

    static func draft(_ r: ConsentRescission) -> EventDraft {
        EventDraft(type: .consentRescinded, data: [
            "at": .string(Timestamp.rfc3339(r.rescindedAtMs)), "notificationUUID": .string(r.notificationUUID),
            "appTransactionId": .string(r.appTransactionId),
        ])
    }

    /// RESCIND_CONSENT (`appData`): the signed app transaction is verified, the rescission stored once per
    /// notification and placed at the app transaction's customer when Kakin knows them (else it waits for the first
    /// signed transaction that names that app transaction), with a `consent.rescinded` event; the notification is
    /// applied in the same write. Returns the customer, if known.
    @discardableResult
    public func applyRescindConsent(_ n: NotificationPayload) async throws(KakinError) -> String? {
        let appData = n.appData
        var appTransactionId: String?
        if let jws = appData?.signedAppTransactionInfo {
            do {
                appTransactionId = try verifier.verifyAppTransaction(jws).raw["appTransactionId"]?.idString
            } catch {
                metrics.countVerificationFailure(error.code)
                throw error.kakinError
            }
        }
        let rescission = ConsentRescission(
            notificationUUID: n.notificationUUID, appTransactionId: appTransactionId, bundleId: n.bundleId ?? "",
            environment: (n.environment ?? .production).rawValue, rescindedAtMs: n.signedDate, customerId: nil)
        let events = events
        let named = appTransactionId
        let (customerId, appended) = try await store.transaction { r -> (String?, Int) in
            var placed = rescission
            placed.customerId = try named.flatMap(r.appTransactionOwner)
            var appended = 0
            if let stored = try r.storeConsentRescission(placed), let c = stored.customerId {
                appended = try events.record(r, customerId: c, facts: [Self.draft(stored)], environment: stored.environment,
                                             bundleId: stored.bundleId)
            }
            try r.markNotification(rescission.notificationUUID, state: .applied, customerId: placed.customerId, originalTransactionId: nil)
            return (placed.customerId, appended)
        }
        metrics.increment(.consentRescinded)
        if appended > 0 { events.wake() }
        return customerId
    }
}

/// `consentRescinded` in the customer's status: `{"at"}` once a RESCIND_CONSENT was placed at them (absent otherwise).
public enum ConsentStatus {
    public static func adding(_ customer: KakinStore.Customer, to status: JSONValue) -> JSONValue {
        guard let at = customer.consentRescindedAtMs, case .object(var o) = status else { return status }
        o["consentRescinded"] = ["at": .string(Timestamp.rfc3339(at))]
        return .object(o)
    }
}
