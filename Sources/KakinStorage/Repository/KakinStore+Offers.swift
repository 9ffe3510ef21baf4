import KakinCore

extension KakinStore {
    /// Records a signed offer in the customer's timeline, so support can see what was handed out and when
    /// (the signature itself is not kept: it is a bearer credential for 24 hours).
    /// - Parameter nonce: the signature's nonce, the event's reference.
    public func recordOfferSigned(customerId: String, nonce: String, detail: JSONValue) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            try Self.recordEvent(db, customerId: customerId, atMs: now, kind: "offer.signed", reference: nonce, detail: detail)
        }
    }
}
