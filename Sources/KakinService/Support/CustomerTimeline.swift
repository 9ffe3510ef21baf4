import KakinCore
import KakinStorage

/// A customer's timeline for the desk and `GET /v1/admin/customers/{id}/events`: the stored rows of every source
/// (transactions as first seen, notifications as received, ledger entries, recorded events — purchases applied,
/// refunds, transfers, support actions — and errors answered), projected here for display.
public struct CustomerTimeline: Sendable {
    let store: any SupportRepository

    /// One page, newest first.
    public func page(customerId: String, limit: Int, after cursor: TimelineCursor?) async throws(KakinError) -> TimelinePage {
        let page = try await store.timelineRows(customerId: customerId, limit: limit, after: cursor)
        return TimelinePage(items: page.rows.map(Self.item), nextCursor: page.nextCursor)
    }

    static func item(_ row: TimelineRow) -> TimelineItem {
        switch row.content {
        case .transaction(let tx):
            // Transactions' signed payloads stay out of the timeline (the pages show them per transaction).
            return TimelineItem(position: row.position, kind: "transaction.seen", reference: tx.transactionId, detail: [
                "productId": .string(tx.productId), "type": .string(tx.productType),
                "originalTransactionId": .string(tx.originalTransactionId),
                "purchaseDate": .string(Timestamp.rfc3339(tx.purchaseDateMs)),
                "expiresDate": Timestamp.rfc3339(tx.expiresDateMs),
                "revocationDate": Timestamp.rfc3339(tx.revocationDateMs),
                "environment": .string(tx.environment)])
        case .notification(let n):
            // Apple's subscription status as of the notification (1 active … 5 revoked): the status changes.
            let status = StoredJWS.payload(n.jws)?["data"]?["status"]?.int64Value
            return TimelineItem(position: row.position, kind: n.notificationType + (n.subtype.map { "/\($0)" } ?? ""),
                                reference: n.notificationUUID,
                                detail: ["state": .string(n.state.rawValue), "attempts": .int(Int64(n.attempts)),
                                         "signedDate": .string(Timestamp.rfc3339(n.signedDateMs)), "appStoreStatus": .int(status),
                                         "originalTransactionId": .string(n.originalTransactionId), "lastError": .string(n.lastError)])
        case .ledger(let e):
            var detail: [String: JSONValue] = [
                "entryId": .string(e.id), "paid": .int(e.paid), "free": .int(e.free), "balanceAfter": e.balanceAfter.json]
            if let item = e.item { detail["item"] = .string(item) }
            if let recipient = e.recipient { detail["recipient"] = .string(recipient) }
            return TimelineItem(position: row.position, kind: e.kind, reference: e.reference, detail: .object(detail))
        case .recorded(let kind, let reference, let detail):
            return TimelineItem(position: row.position, kind: kind, reference: reference,
                                detail: (try? JSONParser.parse(detail ?? "null")) ?? .null)
        case .error(let e):
            return TimelineItem(position: row.position, kind: e.errorId, reference: e.requestId,
                                detail: ["code": .string(e.code), "httpStatus": .int(Int64(e.httpStatus)), "message": .string(e.message),
                                         "method": .string(e.method), "path": .string(e.path),
                                         "purchaseProcessId": .string(e.purchaseProcessId), "transactionId": .string(e.transactionId)])
        }
    }
}
