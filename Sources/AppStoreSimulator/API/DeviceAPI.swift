import HTTPServer
import KakinCore

/// `GET /simulator/v1/accounts/{appAccountToken}/transactions?after=SEQ&limit=N` *(ext)*: what devices signed
/// in to one Apple account receive through StoreKit's `Transaction.updates`. Every signed copy of the
/// account's transactions — new purchases, renewals, and re-signed copies after a refund, a revocation, a
/// reversal or an upgrade — in the order they were signed, after a cursor. KakinKit's simulator adapter
/// (`kakin app`) pulls it to play a device's updates.
///
/// `GET /simulator/v1/accounts/{appAccountToken}/app-transaction` *(ext)*: `{"appTransactionId"}`, what
/// StoreKit's `AppTransaction.shared` tells a device signed in to that account (one per account and app, made
/// on first use like the app's download), so the app can name a customer who never bought.
extension AppStoreSimulator {
    func accounts(_ request: HTTPRequest, _ s: [String]) async -> HTTPResponse {
        if let response = await apple2026Account(request, s) { return response }
        guard s.count == 2, s[1] == "transactions" || s[1] == "app-transaction" else { return Self.failure(KakinError(.routeNotFound), request) }
        guard request.method == "GET" else { return Self.methodNotAllowed(request) }
        do {
            if s[1] == "app-transaction" { return try await appTransaction(token: s[0]) }
            return try accountTransactions(request, token: s[0])
        } catch {
            return Self.failure(error, request)
        }
    }

    func appTransaction(token: String) async throws(KakinError) -> HTTPResponse {
        guard let account = try SimulatorState.normalizedToken(token) else { throw KakinError(.invalidField, "The account is an appAccountToken.") }
        let id = try await act { (engine: inout SimulatorState) throws(KakinError) in engine.appTransactionId(for: account) }
        return Self.json(["appTransactionId": .string(id)])
    }

    func accountTransactions(_ request: HTTPRequest, token: String) throws(KakinError) -> HTTPResponse {
        guard let account = try SimulatorState.normalizedToken(token) else { throw KakinError(.invalidField, "The account is an appAccountToken.") }
        var after: Int64 = 0
        if let v = request.query["after"] {
            guard let n = Int64(v), n >= 0 else { throw KakinError(.invalidField, "after must be a seq from an earlier answer (a whole number).") }
            after = n
        }
        var limit = 100
        if let v = request.query["limit"] {
            guard let n = Int(v), (1...Self.accountPageLimitMax).contains(n) else {
                throw KakinError(.invalidField, "limit must be 1 to \(Self.accountPageLimitMax).")
            }
            limit = n
        }
        let page = core.withLock { c -> JSONValue in
            catchUp(&c)
            let all = c.engine.store.transactionsByAccount[account, default: []].compactMap { c.engine.store.transactions[$0] }
            let newer = all.filter { $0.modifiedSeq > after }.sorted { $0.modifiedSeq < $1.modifiedSeq }
            let items = newer.prefix(limit).map { t -> JSONValue in
                // `finished`: the server finished it (Finish Transaction): a device no longer queues it.
                ["seq": .int(t.modifiedSeq), "transactionId": .string(t.transactionId),
                 "originalTransactionId": .string(t.originalTransactionId), "productId": .string(t.productId), "signedTransaction": .string(t.jws),
                 "finished": .bool(t.finishedDate != nil)]
            }
            return ["transactions": .array(Array(items)), "hasMore": .bool(newer.count > limit),
                    "headSeq": .int(all.map(\.modifiedSeq).max() ?? 0), "nowMs": .int(c.engine.nowMs)]
        }
        return Self.json(page)
    }
}
