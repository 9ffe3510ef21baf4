import AppStoreSecurity
import KakinCore
import KakinStorage

/// Get Retention Message (Apple's Retention Messaging API): when a subscriber opens the cancel flow, the App Store
/// POSTs a signed `RealtimeRequestBody` to the app's realtime URL (`POST /v1/apple/retention-message/{bundleId}`).
/// Kakin verifies it (the JWS is the credential, by the same chain rules as every signed payload), reads the
/// customer the subscription is linked to (its whole history: offers count redemptions across it), lets the app's
/// `retentionMessaging` rules choose (`RetentionMessaging.choose`, pure) and answers Apple's `RealtimeResponseBody`,
/// signing the promotional offer (V2 JWS, `transactionId` = the request's `originalTransactionId`) when one is chosen.
/// Apple waits about 700 ms: the answer is one read and one signature; the timeline entry is written after.
public struct RetentionMessages: Sendable {
    let store: any PurchaseRepository
    let verifier: SignedDataVerifier
    let access: AppStoreAccess
    let apps: [String: AppSettings]
    let catalog: Catalog
    let clock: any Clock
    let metrics: Metrics
    let logger: Logger

    /// What was answered, for the route and the tests.
    public struct Answer: Sendable {
        /// Apple's `RealtimeResponseBody` (`{}` when nothing is chosen: the App Store shows its default message).
        public var body: JSONValue
        public var choice: RetentionAnswer
        public var ruleIndex: Int?
        public var customerId: String?
    }

    /// - Parameters:
    ///   - bundleId: the app the URL names.
    ///   - signedPayload: the request body's `signedPayload`.
    public func answer(bundleId: String, signedPayload: String) async throws(KakinError) -> Answer {
        guard let app = apps[bundleId] else { throw KakinError(.unknownApp) }
        guard let config = app.apple2026.retentionMessaging else { throw KakinError(.retentionMessagingNotConfigured) }
        let request: RealtimeRequestPayload
        do {
            request = try verifier.verifyRealtimeRequest(signedPayload)
        } catch {
            metrics.countVerificationFailure(error.code)
            var e = error.kakinError
            if error.code != .retryableFailure { e.httpStatus = 400 }
            throw e
        }
        if let expected = app.appAppleId, expected != request.appAppleId {
            throw KakinError(.wrongAppAppleID, httpStatus: 400)
        }
        guard app.environments.contains(request.environment) else { throw KakinError(.wrongEnvironment, httpStatus: 400) }
        let otid = request.originalTransactionId
        let snapshot = try await store.snapshot { r -> CustomerSnapshot? in
            // The one ownership rule: the chain's link, else the owner of the account token its stored copies carry.
            let owner = Ownership.currentOwner(linkOwner: try r.linkOwner(originalTransactionId: otid),
                                               tokenOwner: try r.chainAccountToken(originalTransactionId: otid).flatMap(r.customerOwning(appAccountToken:)))
            guard let owner, let customer = try r.customer(owner) else { return nil }
            return try r.wholeHistory(customer)
        }
        let history = snapshot?.history ?? CustomerHistory()
        let status = StatusEngine.evaluate(history, catalog: catalog, nowMs: clock.nowMs())
        let (choice, ruleIndex) = RetentionMessaging.choose(config, facts: .init(
            productId: request.productId, originalTransactionId: otid, status: status, history: history, catalog: app.catalog,
            offerRules: app.offerRules))
        var key: SignedRequestJWS.Key?
        if case .promotionalOffer = choice {
            let signer = try access.signer(forJWS: true)
            key = SignedRequestJWS.Key(privateKey: signer.key, keyId: signer.keyId, issuerId: signer.issuerId!)
        }
        let body: JSONValue?
        do {
            body = try RetentionMessageResponse.body(choice, request: request, bundleId: bundleId, key: key, nonce: store.ids.uuid().lowercased(),
                                                     issuedAtSeconds: clock.nowMs() / 1000)
        } catch {
            throw KakinError(.internalError, "The retention offer could not be signed.", detail: "\(error)")
        }
        metrics.increment(.retentionMessagesAnswered)
        let customerId = snapshot?.customer.customerId
        var detail: [String: JSONValue] = ["productId": .string(request.productId), "answer": .string(choice.kind),
                                           "requestIdentifier": .string(request.requestIdentifier), "userLocale": .string(request.userLocale)]
        if let ruleIndex { detail["rule"] = .int(Int64(ruleIndex)) }
        switch choice {
        case .promotionalOffer(let productId, let offerId, let messageId):
            detail["offerId"] = .string(offerId)
            detail["offerProductId"] = .string(productId)
            detail["messageId"] = .string(messageId)
        case .alternateProduct(let productId, let messageId):
            detail["alternateProductId"] = .string(productId)
            detail["messageId"] = .string(messageId)
        case .message(let messageId):
            detail["messageId"] = .string(messageId)
        case .none:
            break
        }
        logger.info("retention message answered", ["transaction.originalId": .string(otid), "detail": .object(detail)])
        if let customerId {
            let entry = JSONValue.object(detail)
            do {
                try await store.transaction { r in
                    try r.recordTimeline(customerId: customerId, kind: "retention.answered", reference: otid, detail: entry)
                }
            } catch {
                logger.warning("retention answer not recorded in the timeline", ["error.detail": .string(error.description)])
            }
        }
        return Answer(body: body ?? [:], choice: choice, ruleIndex: ruleIndex, customerId: customerId)
    }
}
