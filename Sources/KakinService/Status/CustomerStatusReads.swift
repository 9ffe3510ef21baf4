import KakinCore
import KakinEvents
import KakinStorage

/// A customer's status as the engine evaluated it, with what the answer needs beside it.
public struct EvaluatedCustomer: Sendable {
    public var customer: KakinStore.Customer
    public var history: CustomerHistory
    public var status: CustomerStatus
    public var wallet: WalletBalance
    /// The customer's last event sequence: what the status is as of, to compare with the events a backend received.
    public var version: Int64

    init(_ snapshot: CustomerSnapshot, _ status: CustomerStatus) {
        customer = snapshot.customer
        history = snapshot.history
        self.status = status
        wallet = snapshot.wallet
        version = snapshot.version
    }

    /// The contract's `GET /v1/customers/{id}` body.
    public var json: JSONValue {
        guard case .object(var o) = status.json(customerId: customer.customerId, appAccountToken: customer.appAccountToken, wallet: wallet)
        else { preconditionFailure("a status is an object") }
        o["version"] = .int(version)
        return ConsentStatus.adding(customer, to: .object(o))
    }

    /// `json` serialized, written without building it (what a status read answers).
    public var answerJSON: [UInt8] {
        status.answerJSON(customerId: customer.customerId, appAccountToken: customer.appAccountToken, wallet: wallet, version: version,
                          consentRescindedAtMs: customer.consentRescindedAtMs)
    }
}

/// Status reads: a bounded handful of rows (the customer's status inputs, whose decoded fields were stored at
/// ingest, so no JWS is decoded), evaluated by the core's `StatusEngine` on the injected clock. A customer seen for
/// the first time is created (the app needs its `appAccountToken` before it buys).
public struct CustomerStatusReads: Sendable {
    let store: any PurchaseRepository
    let catalog: Catalog
    let clock: any Clock
    let events: CustomerEvents

    /// The status from the status inputs, or from the whole history when they can't stand for it.
    public func status(_ customerId: String) async throws(KakinError) -> EvaluatedCustomer {
        var snapshot: CustomerSnapshot
        if let inputs = try await store.customerStatusInputs(customerId) {
            snapshot = inputs
        } else {
            snapshot = try await create(customerId)
        }
        if StatusInputs.needsWholeHistory(snapshot.history.transactions), let whole = try await store.customerSnapshot(customerId) {
            snapshot = whole
        }
        return evaluate(snapshot)
    }

    /// The status from the whole history (offers count redemptions across it).
    public func statusFromWholeHistory(_ customerId: String) async throws(KakinError) -> EvaluatedCustomer {
        if let whole = try await store.customerSnapshot(customerId) { return evaluate(whole) }
        return evaluate(try await create(customerId))
    }

    /// A customer seen for the first time: created (with its `customer.created` event) and read in the same write.
    func create(_ customerId: String) async throws(KakinError) -> CustomerSnapshot {
        let events = events
        let snapshot = try await store.transaction { r in
            if try r.ensureCustomer(customerId).created { try events.record(r, customerId: customerId, facts: [EventDraft(type: .customerCreated)]) }
            guard let snapshot = try r.statusInputs(customerId) else { preconditionFailure("a customer just ensured exists") }
            return snapshot
        }
        events.wake()
        return snapshot
    }

    /// The status of rows already read (an ingest's write read them).
    public func evaluate(_ snapshot: CustomerSnapshot) -> EvaluatedCustomer {
        EvaluatedCustomer(snapshot, StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: clock.nowMs()))
    }
}
