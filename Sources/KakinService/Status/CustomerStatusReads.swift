import KakinCore
import KakinStorage

/// A customer's status as the engine evaluated it, with what the answer needs beside it.
public struct EvaluatedCustomer: Sendable {
    public var customer: KakinStore.Customer
    public var history: CustomerHistory
    public var status: CustomerStatus
    public var wallet: WalletBalance

    /// The contract's `GET /v1/customers/{id}` body.
    public var json: JSONValue {
        status.json(customerId: customer.customerId, appAccountToken: customer.appAccountToken, wallet: wallet)
    }
}

/// Status reads: a bounded handful of rows (the customer's status inputs, whose decoded fields were stored at
/// ingest, so no JWS is decoded), evaluated by the core's `StatusEngine` on the injected clock. A customer seen for
/// the first time is created (the app needs its `appAccountToken` before it buys).
public struct CustomerStatusReads: Sendable {
    let store: KakinStore
    let catalog: Catalog
    let clock: any Clock

    /// The status from the status inputs, or from the whole history when they can't stand for it.
    public func status(_ customerId: String) async throws(KakinError) -> EvaluatedCustomer {
        var snapshot: CustomerSnapshot
        if let inputs = try await store.customerStatusInputs(customerId) {
            snapshot = inputs
        } else {
            snapshot = try await store.customerSnapshot(customerId)
        }
        if StatusInputs.needsWholeHistory(snapshot.history.transactions) {
            snapshot = try await store.customerSnapshot(customerId)
        }
        return evaluate(snapshot)
    }

    /// The status from the whole history (offers count redemptions across it).
    public func statusFromWholeHistory(_ customerId: String) async throws(KakinError) -> EvaluatedCustomer {
        evaluate(try await store.customerSnapshot(customerId))
    }

    func evaluate(_ snapshot: CustomerSnapshot) -> EvaluatedCustomer {
        EvaluatedCustomer(customer: snapshot.customer, history: snapshot.history,
                          status: StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: clock.nowMs()), wallet: snapshot.wallet)
    }
}
