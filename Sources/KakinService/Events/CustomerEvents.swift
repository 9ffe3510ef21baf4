import KakinCore
import KakinEvents
import KakinStorage

/// Tells a customer's backend what changed, in the write that changed it: the facts the use case knows (coins
/// credited, spent, granted, clawed back; a refund; a transfer; the customer created; a notification given up on)
/// and the entitlement and subscription transitions the customer's status shows against what was last told
/// (`StatusEvents`), appended to the outbox with the status after the change (`data.customer`, whose `version` is
/// the last sequence). A change that tells nothing appends nothing.
public struct CustomerEvents: Sendable {
    let catalog: Catalog
    /// Wakes the webhook delivery worker once a write with events committed.
    let wake: @Sendable () -> Void

    /// Inside a write: appends `facts` and the status's transitions for `customerId`. Returns how many events.
    @discardableResult
    public func record(_ r: Records, customerId: String, facts: [EventDraft] = [], environment: String? = nil,
                       bundleId: String? = nil) throws -> Int {
        try recordKeepingSnapshot(r, customerId: customerId, facts: facts, environment: environment, bundleId: bundleId).appended
    }

    /// `record`, also answering the customer's status as the write leaves it (`version` included) and as the events
    /// evaluated it, which a caller answering with the status uses instead of reading and evaluating it again; nil for a
    /// customer that doesn't exist.
    func recordKeepingSnapshot(_ r: Records, customerId: String, facts: [EventDraft], environment: String?,
                               bundleId: String?) throws -> (appended: Int, evaluated: EvaluatedCustomer?) {
        guard let snapshot = try r.statusInputs(customerId) else {
            precondition(facts.isEmpty, "events are told about a customer that exists")
            return (0, nil)
        }
        var batch = WriteBatch()
        let recorded = try append(r, to: &batch, snapshot, facts: facts, environment: environment, bundleId: bundleId)
        try r.write(batch)
        return (recorded.appended, recorded.evaluated)
    }

    /// `recordKeepingSnapshot` for a write that read the customer's status inputs itself (`snapshot`, with the balance
    /// the change leaves) and makes its change in `batch`: the events' writes join it, so all go to the database together.
    func append(_ r: Records, to batch: inout WriteBatch, _ snapshot: CustomerSnapshot, facts: [EventDraft], environment: String?,
                bundleId: String?) throws -> (appended: Int, evaluated: EvaluatedCustomer) {
        var snapshot = snapshot
        if StatusInputs.needsWholeHistory(snapshot.history.transactions) {
            // Read from the database, where `batch`'s balance is not yet.
            let wallet = snapshot.wallet
            snapshot = try r.wholeHistory(snapshot.customer)
            snapshot.wallet = wallet
        }
        let customerId = snapshot.customer.customerId
        let status = StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: r.nowMs)
        let now = StatusView(status)
        let nowJSON = now.jsonString
        // Stored as it is now (coins moving leave it so): the view told is this one, without parsing it back.
        let unchanged = snapshot.statusView == nowJSON
        let told = unchanged
            ? now : snapshot.statusView.flatMap { try? JSONParser.parse($0) }.flatMap(StatusView.init(json:)) ?? StatusView()
        var drafts = facts + StatusEvents.drafts(previous: told, current: status)
        guard !drafts.isEmpty else { return (0, EvaluatedCustomer(snapshot, status)) }
        for i in drafts.indices where drafts[i].bundleId == nil && drafts[i].environment == nil {
            drafts[i].bundleId = bundleId
            drafts[i].environment = environment
        }
        // The status as a status read answers it after this append, written straight to bytes (no tree).
        let json = status.answerJSON(customerId: customerId, appAccountToken: snapshot.customer.appAccountToken, wallet: snapshot.wallet,
                                     version: snapshot.version + Int64(drafts.count),
                                     consentRescindedAtMs: snapshot.customer.consentRescindedAtMs)
        // Coins moving leave the transitions as they were: the view is written only when it changed.
        let view = now != told || snapshot.statusView == nil ? nowJSON : nil
        EventOutbox.append(to: &batch, customerId: customerId, lastSequence: snapshot.version, drafts: drafts, customerStatusJSON: json,
                           statusView: view, nowMs: r.nowMs, ids: r.idGenerator)
        snapshot.version += Int64(drafts.count)
        if let view { snapshot.statusView = view }
        return (drafts.count, EvaluatedCustomer(snapshot, status))
    }
}

extension EventDraft {
    /// A coin movement's event: the movement's deltas and what it was for.
    static func coins(_ type: EventType, paid: Int64, free: Int64, reference: String, _ extra: [String: JSONValue] = [:]) -> EventDraft {
        var data: [String: JSONValue] = ["paid": .int(paid), "free": .int(free), "reference": .string(reference)]
        for (k, v) in extra { data[k] = v }
        return EventDraft(type: type, data: data)
    }
}

extension CustomerEvents {
    /// An ingest's events: for each customer its changes touched (the owner, a transfer's previous owner, whoever a
    /// refund took coins from), the facts it knows and the status's transitions. A write that changed nothing (a
    /// duplicate) tells nothing.
    func record(_ r: Records, _ changes: [IngestChange], transaction: TransactionPayload?, renewalInfo: RenewalInfoPayload?,
                owner: String?) throws -> (appended: Int, owner: EvaluatedCustomer?) {
        try record(r, changes, productId: transaction?.productId, environment: transaction?.environment.rawValue ?? renewalInfo?.environment.rawValue,
                   appId: transaction?.bundleId, owner: owner)
    }

    /// The same for any store's fact: its product, environment (nil where the store has none) and app.
    func record(_ r: Records, _ changes: [IngestChange], productId: String?, environment: String?, appId: String?,
                owner: String?) throws -> (appended: Int, owner: EvaluatedCustomer?) {
        guard !changes.isEmpty else { return (0, nil) }
        var facts: [String: [EventDraft]] = [:]
        var customers: [String] = owner.map { [$0] } ?? []
        func add(_ customerId: String, _ draft: EventDraft) {
            if facts[customerId] == nil, !customers.contains(customerId) { customers.append(customerId) }
            facts[customerId, default: []].append(draft)
        }
        for (c, draft) in Self.drafts(changes, productId: productId) { add(c, draft) }
        var appended = 0
        var evaluated: EvaluatedCustomer?
        for c in customers {
            let recorded = try recordKeepingSnapshot(r, customerId: c, facts: facts[c] ?? [], environment: environment,
                                                     bundleId: appId)
            appended += recorded.appended
            if c == owner { evaluated = recorded.evaluated }
        }
        return (appended, evaluated)
    }

    /// The facts an ingest's changes tell, in order, each with the customer it is told to. A purchase outside the stores
    /// names its `source` (the provider) in its coins' event.
    static func drafts(_ changes: [IngestChange], productId: String?, source: String? = nil) -> [(customerId: String, draft: EventDraft)] {
        var drafts: [(customerId: String, draft: EventDraft)] = []
        for change in changes {
            switch change {
            case .customerCreated(let c):
                drafts.append((c, EventDraft(type: .customerCreated)))
            case .transferred(let otid, let from, let to):
                for c in [from, to] {
                    drafts.append((c, EventDraft(type: .customerTransferred, data: ["originalTransactionId": .string(otid), "from": .string(from), "to": .string(to)])))
                }
            case .purchaseApplied(let applied, let grant):
                if case .coins(let paid, let free) = grant {
                    var data: [String: JSONValue] = ["reason": "purchase", "productId": .string(productId)]
                    if let source { data["source"] = .string(source) }
                    drafts.append((applied.customerId, .coins(.coinsCredited, paid: paid, free: free, reference: applied.transactionId, data)))
                }
            case .refundReconciled(let transactionId, let c, .refund(let paid, let free, let shortfall, _)):
                drafts.append((c, .coins(.coinsClawedBack, paid: paid, free: free, reference: transactionId, ["shortfall": .int(shortfall)])))
                drafts.append((c, EventDraft(type: .purchaseRefunded, data: ["transactionId": .string(transactionId), "productId": .string(productId)])))
            case .refundReconciled(let transactionId, let c, .reverse(let paid, let free, _)):
                drafts.append((c, .coins(.coinsCredited, paid: paid, free: free, reference: transactionId, ["reason": "refundReversed"])))
            case .refundReconciled(_, _, .none), .renewalInfoStored, .transactionStored, .linked:
                break
            }
        }
        return drafts
    }
}
