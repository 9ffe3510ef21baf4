import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinCrypto

/// `/simulator/v1/…`: what the contract fixes (ca.der, products, purchases, clock, subscription actions,
/// transaction refund) and documented extensions (subscription view, transaction actions, notification
/// log, state save/load, API keys). Needs no credentials: serve it on loopback only.
extension AppStoreSimulator {
    func control(_ request: HTTPRequest, _ s: [String]) async -> HTTPResponse {
        do {
            return try await controlRoute(request, s)
        } catch {
            return Self.failure(error, request)
        }
    }

    func controlRoute(_ request: HTTPRequest, _ s: [String]) async throws(KakinError) -> HTTPResponse {
        let m = request.method
        if Self.match(s, "ca.der") != nil {
            guard m == "GET" else { return Self.methodNotAllowed(request) }
            return HTTPResponse(status: 200, headers: ["Content-Type": "application/pkix-cert"], body: rootCertificateDER)
        }
        if Self.match(s, "products") != nil {
            guard m == "GET" else { return Self.methodNotAllowed(request) }
            let config = configuration
            return Self.json(["bundleId": .string(config.bundleId), "appAppleId": .int(config.appAppleId),
                              "environment": .string(config.environment.rawValue),
                              "products": .array(config.catalog.sortedProducts.map(\.contractJSON))])
        }
        if Self.match(s, "purchases") != nil {
            guard m == "POST" else { return Self.methodNotAllowed(request) }
            return try await purchase(request)
        }
        if Self.match(s, "clock") != nil {
            if m == "GET" { return Self.json(clockJSON(notifications: nil)) }
            guard m == "POST" else { return Self.methodNotAllowed(request) }
            return try await moveClock(request)
        }
        if let p = Self.match(s, "subscriptions/:otid") {
            guard m == "GET" else { return Self.methodNotAllowed(request) }
            let otid = p["otid"]!
            let view = core.withLock { c -> JSONValue? in
                catchUp(&c)
                return c.engine.subscription(otid).map { c.engine.view($0) }
            }
            guard let view else { throw KakinError(.simulatorUnknownSubscription, "The simulator has no subscription \(otid).") }
            return Self.json(view)
        }
        if let p = Self.match(s, "subscriptions/:otid/actions") {
            guard m == "POST" else { return Self.methodNotAllowed(request) }
            return try await subscriptionAction(request, otid: p["otid"]!)
        }
        if let p = Self.match(s, "transactions/:tid/refund") {
            guard m == "POST" else { return Self.methodNotAllowed(request) }
            let body = request.body.isEmpty ? JSONValue.object([:]) : try Self.bodyObject(request, allowed: ["revocationReason", "revocationPercentage"])
            return try await transactionAction(request, tid: p["tid"]!, action: "refund", body: body)
        }
        if let p = Self.match(s, "transactions/:tid/actions") {
            guard m == "POST" else { return Self.methodNotAllowed(request) }
            let body = try Self.bodyObject(request, allowed: ["action", "revocationReason", "revocationPercentage", "reason"])
            return try await transactionAction(request, tid: p["tid"]!, action: try body.requiredString("action"), body: body)
        }
        if Self.match(s, "notifications") != nil {
            guard m == "GET" else { return Self.methodNotAllowed(request) }
            return try notificationLog(request)
        }
        if Self.match(s, "state") != nil {
            if m == "GET" { return .json(snapshot()) }
            guard m == "PUT" else { return Self.methodNotAllowed(request) }
            try await restore(stateFile: request.body)
            return Self.json(clockJSON(notifications: nil))
        }
        if Self.match(s, "api-key") != nil {
            guard m == "GET" else { return Self.methodNotAllowed(request) }
            let key = apiKey
            return Self.json(["issuerId": .string(key.issuerId), "keyId": .string(key.keyId), "privateKeyPEM": .string(key.privateKeyPEM),
                              "bundleId": .string(configuration.bundleId), "audience": "appstoreconnect-v1"])
        }
        if Self.match(s, "api-token") != nil {
            // For curl walkthroughs: a ready-made bearer token (real time, five minutes), as Apple's library makes.
            guard m == "GET" else { return Self.methodNotAllowed(request) }
            let key = apiKey
            let expires = wall.nowMs() / 1000 + 300
            do {
                let token = try AppStoreServerAPIToken.make(key: try P256PrivateKey(pemPKCS8: key.privateKeyPEM), keyId: key.keyId, issuerId: key.issuerId,
                                                            bundleId: configuration.bundleId, issuedAtSeconds: nil, expiresAtSeconds: expires)
                return Self.json(["token": .string(token), "expiresAt": .string(Timestamp.rfc3339(expires * 1000))])
            } catch {
                throw KakinError(.internalError, "The simulator could not sign a token.", detail: error.description)
            }
        }
        if Self.match(s, "api-keys") != nil {
            guard m == "POST" else { return Self.methodNotAllowed(request) }
            return try registerKey(request)
        }
        if let response = try receiptAndConsumptionRoute(request, s) { return response }
        if let response = try await apple2026ControlRoute(request, s) { return response }
        throw KakinError(.routeNotFound)
    }

    // MARK: Purchases and clock

    /// `POST purchases`: what StoreKit's `Product.purchase(options:)` sends. A promotional offer carries its
    /// signature (legacy fields or a V2 JWS, checked here, then by the engine); `introductoryOfferEligibility`
    /// is a signed eligibility JWS; `outsideApp` is a purchase or redemption in the App Store itself.
    func purchase(_ request: HTTPRequest) async throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["productId", "appAccountToken", "quantity", "offer", "familyShared",
                                                          "introductoryOfferEligibility", "outsideApp", "billingPlanType", "notify"])
        var req = PurchaseRequest(productId: try body.requiredString("productId"), appAccountToken: try body.optionalString("appAccountToken", max: 64),
                                  quantity: Int(try body.optionalInt("quantity", 1...10) ?? 1),
                                  familyShared: try body.optionalBool("familyShared") ?? false)
        req.outsideApp = try body.optionalBool("outsideApp") ?? false
        req.notify = try body.optionalBool("notify") ?? true
        if let plan = try body.optionalString("billingPlanType", max: 32) {
            guard BillingPlanType.known.contains(BillingPlanType(rawValue: plan)) else {
                throw KakinError(.invalidField, "billingPlanType must be BILLED_UPFRONT or MONTHLY.")
            }
            req.billingPlanType = BillingPlanType(rawValue: plan)
        }
        if let o = body["offer"], !o.isNull {
            guard case .object(let fields) = o else { throw KakinError(.invalidField, "offer must be an object {\"type\", \"id\"?, …}.") }
            if let unknown = fields.keys.sorted().first(where: { !["type", "id", "signature", "jws"].contains($0) }) {
                throw KakinError(.invalidField, "Unknown field offer.\(unknown); an offer has type, id, and for a promotional offer signature or jws.")
            }
            let type = o["type"]?.stringValue
            if type != "promotional", fields["signature"] != nil || fields["jws"] != nil {
                throw KakinError(.invalidField, "Only a promotional offer carries a signature or jws.")
            }
            switch type {
            case "introductory": req.offer = .introductory
            case "promotional":
                let id = try o.requiredString("id")
                req.offer = .promotional(id: id)
                let signature = fields["signature"].flatMap { $0.isNull ? nil : $0 }, jws = fields["jws"].flatMap { $0.isNull ? nil : $0 }
                if signature != nil, jws != nil { throw KakinError(.invalidField, "Give offer.signature or offer.jws, not both.") }
                if let signature {
                    let token = try SimulatorState.normalizedToken(req.appAccountToken)
                    req.offerSignature = try verifyLegacyOffer(try LegacyOfferSignature(json: signature), productId: req.productId, offerId: id,
                                                               appAccountToken: token)
                } else if jws != nil {
                    req.offerSignature = try verifyOfferJWS(try o.requiredString("jws", max: 8192))
                }
            case "offerCode": req.offer = .offerCode(id: try o.requiredString("id"))
            case "winBack": req.offer = .winBack(id: try o.requiredString("id"))
            default: throw KakinError(.invalidField, "offer.type must be introductory, promotional, offerCode or winBack.")
            }
        }
        if let jws = try body.optionalString("introductoryOfferEligibility", max: 8192) {
            req.introductoryOfferEligibility = try verifyEligibilityJWS(jws)
        }
        let purchase = req
        let result = try await act { (e: inout SimulatorState) throws(KakinError) -> JSONValue in
            let outcome = try e.purchase(purchase)
            return e.outcomeJSON(outcome, action: nil)
        }
        return Self.json(result, status: 201)
    }

    func clockJSON(notifications: JSONValue?) -> JSONValue {
        let now = clock.nowMs()
        var o: [String: JSONValue] = ["now": .string(Timestamp.rfc3339(now)), "nowMs": .int(now), "timeRate": .double(clock.timeRate)]
        if let notifications { o["notifications"] = notifications }
        return .object(o)
    }

    func moveClock(_ request: HTTPRequest) async throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["advanceSeconds", "to", "timeRate"])
        let seconds = try body.optionalInt("advanceSeconds", 0...Self.advanceSecondsMax)
        let rate = try body.optionalNumber("timeRate", 0...SimulatedClock.timeRateMax)
        var target: Int64?
        if let to = try body.optionalString("to", max: 40) {
            guard let t = Timestamp.parseRFC3339(to) else { throw KakinError(.invalidField, "to must be an RFC 3339 UTC time such as 2026-11-30T15:00:00Z.") }
            guard t >= clock.nowMs() else { throw KakinError(.invalidField, "to is in the past: the simulated clock only moves forward.") }
            guard t - clock.nowMs() <= Self.advanceSecondsMax * 1000 else { throw KakinError(.invalidField, "to is more than ten years ahead.") }
            target = t
        }
        guard (seconds == nil) != (target == nil) || (seconds == nil && target == nil && rate != nil) else {
            throw KakinError(.invalidField, "Give advanceSeconds or to (not both), and/or timeRate.")
        }
        if let rate { clock.setTimeRate(rate) }
        var produced: [String] = []
        if let seconds { produced = await advance(seconds: seconds) }
        if let target { produced = await advance(toMs: target) }
        let summary = core.withLock { c in c.engine.notificationSummaries(produced) }
        return Self.json(clockJSON(notifications: summary))
    }

    // MARK: Actions

    func subscriptionAction(_ request: HTTPRequest, otid: String) async throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["action", "productId", "offerId", "revocationReason", "revocationPercentage",
                                                          "reason", "price", "consentRequired", "userLocale", "acceptRetentionOffer",
                                                          "declineRetentionOffer"])
        let action = try body.requiredString("action")
        if action == "disableAutoRenew" {
            // The cancel flow: the app's Get Retention Message endpoint is asked first when a realtime URL is set; the
            // customer declines an offered promotional offer unless `acceptRetentionOffer` (`declineRetentionOffer`: the default).
            return Self.json(try await disableAutoRenewAskingRetention(otid: otid, userLocale: try body.optionalString("userLocale", max: 35),
                                                                       acceptOffer: try Self.acceptsRetentionOffer(body)))
        }
        let productId = try body.optionalString("productId")
        let offerId = try body.optionalString("offerId")
        let reason = Int(try body.optionalInt("revocationReason", 0...1) ?? 0)
        let percentage = try body.optionalInt("revocationPercentage", 1...100_000).map { Int($0) }
        let refundReason = try body.optionalString("reason", max: 64)
        let price = try body.optionalNumber("price", 0.001...1_000_000)
        let consent = try body.optionalBool("consentRequired") ?? true
        let result = try await act { (e: inout SimulatorState) throws(KakinError) -> JSONValue in
            let sub = try e.liveSubscription(otid)
            let outcome: ActionOutcome
            switch action {
            case "disableAutoRenew": outcome = try e.setAutoRenew(otid, enabled: false)
            case "enableAutoRenew": outcome = try e.setAutoRenew(otid, enabled: true)
            case "failBilling": outcome = try e.failBilling(otid)
            case "recoverBilling": outcome = try e.recoverBilling(otid)
            case "changeProduct":
                guard let productId else { throw KakinError(.invalidField, "changeProduct needs productId.") }
                outcome = try e.changeProduct(otid, to: productId)
            case "applyPromotionalOffer":
                guard let offerId else { throw KakinError(.invalidField, "applyPromotionalOffer needs offerId.") }
                outcome = try e.applyPromotionalOffer(otid, offerId: offerId, productId: productId)
            case "refund": outcome = try e.refund(transactionId: sub.latestTransactionId, reason: reason, percentage: percentage)
            case "revokeFamilySharing": outcome = try e.revokeFamilySharing(otid)
            case "requestRefund": outcome = try e.requestRefund(transactionId: sub.latestTransactionId, reason: refundReason)
            case "declineRefund": outcome = try e.declineRefund(transactionId: sub.latestTransactionId)
            case "reverseRefund": outcome = try e.reverseRefund(transactionId: sub.latestTransactionId)
            case "priceIncrease":
                guard let price else { throw KakinError(.invalidField, "priceIncrease needs price (the new price, e.g. 5.99).") }
                outcome = try e.announcePriceIncrease(otid, newPriceMilli: Int64((price * 1000).rounded()), consentRequired: consent)
            case "acceptPriceIncrease": outcome = try e.acceptPriceIncrease(otid)
            case "productNotForSale": outcome = try e.removeFromSale(otid)
            default:
                throw KakinError(.invalidField, "Unknown action \(action); see GET /simulator/v1 README for the list.")
            }
            return e.outcomeJSON(outcome, action: action)
        }
        return Self.json(result)
    }

    func transactionAction(_ request: HTTPRequest, tid: String, action: String, body: JSONValue) async throws(KakinError) -> HTTPResponse {
        let reason = Int(try body.optionalInt("revocationReason", 0...1) ?? 0)
        let percentage = try body.optionalInt("revocationPercentage", 1...100_000).map { Int($0) }
        let refundReason = try body.optionalString("reason", max: 64)
        let result = try await act { (e: inout SimulatorState) throws(KakinError) -> JSONValue in
            let outcome: ActionOutcome
            switch action {
            case "refund": outcome = try e.refund(transactionId: tid, reason: reason, percentage: percentage)
            case "requestRefund": outcome = try e.requestRefund(transactionId: tid, reason: refundReason)
            case "declineRefund": outcome = try e.declineRefund(transactionId: tid)
            case "reverseRefund": outcome = try e.reverseRefund(transactionId: tid)
            case "revokeFamilySharing": outcome = try e.revokeFamilySharing(transactionId: tid)
            default: throw KakinError(.invalidField, "Unknown action \(action): refund, requestRefund, declineRefund, reverseRefund or revokeFamilySharing.")
            }
            return e.outcomeJSON(outcome, action: action)
        }
        return Self.json(result)
    }

    // MARK: Notification log, keys

    func notificationLog(_ request: HTTPRequest) throws(KakinError) -> HTTPResponse {
        let after = try request.query["after"].map { (v: String) throws(KakinError) -> Int64 in
            guard let n = Int64(v), n >= 0 else { throw KakinError(.invalidField, "after must be a notification seq (a whole number).") }
            return n
        } ?? 0
        let limit = try request.query["limit"].map { (v: String) throws(KakinError) -> Int in
            guard let n = Int(v), (1...500).contains(n) else { throw KakinError(.invalidField, "limit must be 1 to 500.") }
            return n
        } ?? 100
        let page = core.withLock { c -> JSONValue in
            let items = c.engine.notifications(after: after).prefix(limit + 1)
            return ["notifications": .array(items.prefix(limit).map { c.engine.logEntry($0) }), "hasMore": .bool(items.count > limit)]
        }
        return Self.json(page)
    }

    func registerKey(_ request: HTTPRequest) throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["keyId", "publicKeyPEM", "issuerId"])
        let record = RegisteredKeyRecord(keyId: try body.requiredString("keyId", max: 64), publicKeyPEM: try body.requiredString("publicKeyPEM", max: 4096),
                                         issuerId: try body.optionalString("issuerId", max: 64))
        _ = try Self.publicKey(pem: record.publicKeyPEM)
        try core.withLock { (c: inout Core) throws(KakinError) in
            guard c.registeredKeys.count < 100 else { throw KakinError(.simulatorInvalidAction, "At most 100 API keys can be registered.") }
            var keys = c.registeredKeys.filter { $0.keyId != record.keyId }
            keys.append(record)
            c.tokenVerifier = try Self.verifier(key: c.apiKey, registered: keys, bundleId: c.engine.config.bundleId)
            c.registeredKeys = keys
        }
        return Self.json(["keyId": .string(record.keyId)], status: 201)
    }
}

/// JSON views for the control API.
extension SimulatorState {
    func notificationSummaries(_ uuids: [String]) -> JSONValue {
        // The wanted ones are nearly always the newest: look from the end, stop once all are found.
        var wanted = Set(uuids)
        var found: [SimNotification] = []
        for n in store.notifications.reversed() where !wanted.isEmpty {
            if wanted.remove(n.notificationUUID) != nil { found.append(n) }
        }
        return .array(found.reversed().map { n in
            var o: [String: JSONValue] = ["notificationUUID": .string(n.notificationUUID), "notificationType": .string(n.notificationType),
                                          "signedDate": .string(Timestamp.rfc3339(n.signedDate))]
            if let st = n.subtype { o["subtype"] = .string(st) }
            if let otid = n.originalTransactionId { o["originalTransactionId"] = .string(otid) }
            if let tid = n.transactionId { o["transactionId"] = .string(tid) }
            return .object(o)
        })
    }

    func logEntry(_ n: SimNotification) -> JSONValue {
        var o: [String: JSONValue] = [
            "seq": .int(n.seq), "notificationUUID": .string(n.notificationUUID), "notificationType": .string(n.notificationType),
            "signedDate": .string(Timestamp.rfc3339(n.signedDate)), "signedDateMs": .int(n.signedDate), "delivered": .bool(n.delivered),
            "sendAttempts": .array(n.attempts.map { ["attemptDate": .string(Timestamp.rfc3339($0.attemptDate)), "sendAttemptResult": .string($0.sendAttemptResult)] }),
            "signedPayload": .string(n.jws),
        ]
        if let st = n.subtype { o["subtype"] = .string(st) }
        if let otid = n.originalTransactionId { o["originalTransactionId"] = .string(otid) }
        if let tid = n.transactionId { o["transactionId"] = .string(tid) }
        if let next = n.nextAttemptMs { o["nextAttempt"] = .string(Timestamp.rfc3339(next)) }
        return .object(o)
    }

    /// The StoreKit `RenewalState` name of a status.
    static func stateName(_ status: Int) -> String {
        switch status {
        case 1: return "subscribed"
        case 3: return "inBillingRetryPeriod"
        case 4: return "inGracePeriod"
        case 5: return "revoked"
        default: return "expired"
        }
    }

    func view(_ sub: SimSubscription) -> JSONValue {
        let tx = latest(sub)
        let status = status(of: sub)
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(sub.originalTransactionId), "productId": .string(sub.productId), "groupId": .string(sub.groupId),
            "ownership": .string(sub.ownership), "status": .int(Int64(status)), "state": .string(Self.stateName(status)),
            "autoRenewStatus": .bool(sub.autoRenewStatus), "autoRenewProductId": .string(sub.autoRenewProductId),
            "latestTransactionId": .string(tx.transactionId), "signedTransaction": .string(tx.jws), "signedRenewalInfo": .string(sub.renewalJWS),
            "transactionIds": .array(store.transactionsByAccount[sub.accountKey, default: []].filter {
                store.transactions[$0]?.originalTransactionId == sub.originalTransactionId }.map { .string($0) }),
        ]
        if let e = tx.expiresDate {
            o["expiresDate"] = .string(Timestamp.rfc3339(e))
            o["expiresDateMs"] = .int(e)
        }
        if case .billingRetry(_, let grace?, false) = sub.phase {
            o["gracePeriodExpiresDate"] = .string(Timestamp.rfc3339(grace))
        }
        if let offer = nextRenewalOffer(sub) {
            var p = offer.json
            p["productId"] = .string(sub.pendingOffer?.offer == offer ? sub.pendingOffer!.productId : sub.productId)
            o["nextRenewalOffer"] = .object(p)
        }
        if sub.failNextRenewal { o["nextRenewalFails"] = true }
        if let commitment = commitmentView(sub) { o["commitment"] = commitment }
        return .object(o)
    }

    func outcomeJSON(_ outcome: ActionOutcome, action: String?) -> JSONValue {
        var o: [String: JSONValue] = ["outcome": .string(outcome.kind.rawValue), "notifications": notificationSummaries(outcome.notificationUUIDs)]
        if let action { o["action"] = .string(action) }
        if let tid = outcome.transactionId, let tx = store.transactions[tid] {
            o["transactionId"] = .string(tid)
            o["signedTransaction"] = .string(tx.jws)
            // What the customer's receipt e-mail shows (support looks the purchase up by it).
            if let order = tx.orderId { o["orderId"] = .string(order) }
        }
        if let otid = outcome.originalTransactionId {
            o["originalTransactionId"] = .string(otid)
            if let sub = store.subscriptions[otid] { o["subscription"] = view(sub) }
        }
        if let e = outcome.effectiveDateMs { o["effectiveDate"] = .string(Timestamp.rfc3339(e)) }
        if let r = outcome.proratedRefund { o["proratedRefund"] = r.json }
        return .object(o)
    }
}
