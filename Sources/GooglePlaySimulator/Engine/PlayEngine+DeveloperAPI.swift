import KakinCore

/// An answer of the Developer API that is not 2xx, in Google's shape (`GoogleAPIErrorBody`).
struct PlayAPIError: Error, Sendable, Equatable {
    var code: Int
    var status: String
    var reason: String
    var message: String

    var json: JSONValue { GoogleAPIErrorBody.json(code: code, status: status, reason: reason, message: message) }

    static let invalidToken = PlayAPIError(code: 400, status: "INVALID_ARGUMENT", reason: "invalid", message: "Invalid Value")
    static let noLongerValid = PlayAPIError(code: 410, status: "FAILED_PRECONDITION", reason: "purchaseTokenNoLongerValid",
                                            message: "The purchase token is no longer valid.")
    static func invalidState(_ message: String) -> PlayAPIError {
        PlayAPIError(code: 400, status: "FAILED_PRECONDITION", reason: "invalidPurchaseState", message: message)
    }
    static func invalidArgument(_ message: String) -> PlayAPIError {
        PlayAPIError(code: 400, status: "INVALID_ARGUMENT", reason: "invalid", message: message)
    }
}

/// The Developer API's reads and writes over the engine: Google's resource shapes and refusals.
extension PlayEngine {
    /// The purchase a call names: the app must be this one, the token known and not 60 days past its end.
    func lookup(_ token: String, packageName: String) throws(PlayAPIError) -> PurchaseRecord {
        guard packageName == config.packageName else {
            throw PlayAPIError(code: 404, status: "NOT_FOUND", reason: "applicationNotFound", message: "No application was found for the given package name.")
        }
        guard let p = purchases[token] else { throw .invalidToken }
        if let ended = p.endedMs, nowMs - ended > Self.tokenLifetimeAfterEndMs { throw .noLongerValid }
        return p
    }

    func subscription(_ token: String, packageName: String) throws(PlayAPIError) -> PurchaseRecord {
        let p = try lookup(token, packageName: packageName)
        guard p.isSubscription else {
            throw PlayAPIError(code: 400, status: "INVALID_ARGUMENT", reason: "subscriptionInvalidArgument", message: "The purchase token is not a subscription's.")
        }
        return p
    }

    func oneTime(_ token: String, productId: String?, packageName: String) throws(PlayAPIError) -> PurchaseRecord {
        let p = try lookup(token, packageName: packageName)
        guard !p.isSubscription, productId == nil || productId == p.productId else {
            throw PlayAPIError(code: 400, status: "INVALID_ARGUMENT", reason: "purchaseTokenDoesNotMatchProductId",
                               message: "The purchase token does not match the product ID.")
        }
        return p
    }

    // MARK: Resources

    /// `SubscriptionPurchaseV2`.
    func subscriptionV2JSON(_ s: PurchaseRecord) -> JSONValue {
        let product = config.product(s.productId)
        let plan = product?.basePlan(s.basePlanId ?? "")
        var item: [String: JSONValue] = ["productId": .string(s.productId), "expiryTime": .string(Timestamp.rfc3339(s.expiryMs)),
                                         "latestSuccessfulOrderId": .string(s.latestOrderId)]
        var renewing: [String: JSONValue] = ["autoRenewEnabled": .bool(s.autoRenew)]
        if let plan { renewing["recurringPrice"] = PlayProduct.money(plan.priceMicros, plan.currency) }
        item["autoRenewingPlan"] = .object(renewing)
        var offer: [String: JSONValue] = ["basePlanId": .string(s.basePlanId), "offerTags": .array([])]
        if let offerId = s.offerId { offer["offerId"] = .string(offerId) }
        item["offerDetails"] = .object(offer)
        item["offerPhase"] = s.inTrial ? ["freeTrial": .object([:])] : ["basePrice": .object([:])]
        if let r = s.replacement {
            var replacement: [String: JSONValue] = ["productId": .string(r.productId), "replacementMode": .string(r.mode)]
            if let b = r.basePlanId { replacement["basePlanId"] = .string(b) }
            if let o = r.offerId { replacement["offerId"] = .string(o) }
            item["itemReplacement"] = .object(replacement)
        }
        var o: [String: JSONValue] = ["kind": "androidpublisher#subscriptionPurchaseV2", "regionCode": .string(config.regionCode),
                                      "startTime": .string(Timestamp.rfc3339(s.purchaseTimeMs)), "subscriptionState": .string(s.state),
                                      "acknowledgementState": .string((s.acknowledged ? PlayAcknowledgementState.acknowledged : .pending).rawValue),
                                      "etag": .string(etag(s)), "lineItems": [.object(item)]]
        if let linked = s.linkedPurchaseToken { o["linkedPurchaseToken"] = .string(linked) }
        if let account = s.accountId { o["externalAccountIdentifiers"] = ["obfuscatedExternalAccountId": .string(account)] }
        if s.test { o["testPurchase"] = .object([:]) }
        if let pause = s.pause, pause.started { o["pausedStateContext"] = ["autoResumeTime": .string(Timestamp.rfc3339(pause.resumeMs))] }
        switch s.cancellation {
        case "user"?:
            o["canceledStateContext"] = ["userInitiatedCancellation": ["cancelTime": .string(Timestamp.rfc3339(s.cancelTimeMs ?? s.purchaseTimeMs))]]
        case "system"?: o["canceledStateContext"] = ["systemInitiatedCancellation": .object([:])]
        case "developer"?: o["canceledStateContext"] = ["developerInitiatedCancellation": .object([:])]
        case "replacement"?: o["canceledStateContext"] = ["replacementCancellation": .object([:])]
        default: break
        }
        if s.subscriptionState == .inGracePeriod || s.subscriptionState == .onHold {
            let pending: JSONValue = ["renewalDeclined": ["pendingOrderId": .string("\(s.orderBase)..\(s.renewals)")]]
            o[s.subscriptionState == .inGracePeriod ? "inGracePeriodStateContext" : "onHoldStateContext"] = pending
        }
        return .object(o)
    }

    /// Changes whenever the subscription does (`defer` may require it).
    func etag(_ s: PurchaseRecord) -> String {
        Base64.urlEncode(Array("\(s.state)|\(s.expiryMs)|\(s.renewals)|\(s.autoRenew)|\(s.acknowledged)".utf8))
    }

    /// `ProductPurchase` (v1).
    func productPurchaseJSON(_ p: PurchaseRecord) -> JSONValue {
        var o: [String: JSONValue] = ["kind": "androidpublisher#productPurchase", "purchaseTimeMillis": .string(String(p.purchaseTimeMs)),
                                      "purchaseState": p.voided ? 1 : 0, "consumptionState": p.consumed ? 1 : 0,
                                      "acknowledgementState": p.acknowledged ? 1 : 0, "orderId": .string(p.orderBase),
                                      "productId": .string(p.productId), "purchaseToken": .string(p.token), "quantity": .int(Int64(p.quantity)),
                                      "refundableQuantity": .int(Int64(p.refundableQuantity)), "regionCode": .string(config.regionCode),
                                      "developerPayload": .string(p.developerPayload ?? "")]
        if p.test { o["purchaseType"] = 0 }
        if let account = p.accountId { o["obfuscatedExternalAccountId"] = .string(account) }
        return .object(o)
    }

    /// `ProductPurchaseV2`.
    func productPurchaseV2JSON(_ p: PurchaseRecord) -> JSONValue {
        let details: JSONValue = ["quantity": .int(Int64(p.quantity)), "refundableQuantity": .int(Int64(p.refundableQuantity)),
                                  "consumptionState": .string((p.consumed ? PlayConsumptionState.consumed : .yetToBeConsumed).rawValue)]
        var o: [String: JSONValue] = ["kind": "androidpublisher#productPurchaseV2", "orderId": .string(p.orderBase),
                                      "purchaseCompletionTime": .string(Timestamp.rfc3339(p.purchaseTimeMs)),
                                      "purchaseStateContext": ["purchaseState": .string((p.voided ? PlayProductPurchaseState.cancelled : .purchased).rawValue)],
                                      "acknowledgementState": .string((p.acknowledged ? PlayAcknowledgementState.acknowledged : .pending).rawValue),
                                      "regionCode": .string(config.regionCode),
                                      "productLineItem": [["productId": .string(p.productId), "productOfferDetails": details]]]
        if p.test { o["testPurchaseContext"] = ["fopType": "TEST"] }
        if let account = p.accountId { o["obfuscatedExternalAccountId"] = .string(account) }
        return .object(o)
    }

    /// `orders.get`'s `Order`: what the buyer paid (`total`, tax included; the simulator charges no tax), the developer's
    /// share after Google's 15% service fee (`developerRevenueInBuyerCurrency`), the line item's listing price, and the
    /// state a refund left.
    func orderJSON(_ orderId: String, packageName: String) throws(PlayAPIError) -> JSONValue {
        guard packageName == config.packageName else { throw PlayAPIError.invalidArgument("Unknown package name.") }
        guard let order = orders[orderId], let p = purchases[order.token] else {
            throw PlayAPIError(code: 404, status: "NOT_FOUND", reason: "notFound", message: "The order was not found.")
        }
        let currency = order.currency ?? "USD", total = order.priceMicros ?? 0
        let state = order.refundedQuantity >= order.quantity || (p.isSubscription && order.refundedQuantity > 0) ? "REFUNDED"
            : order.refundedQuantity > 0 ? "PARTIALLY_REFUNDED" : "PROCESSED"
        let item: JSONValue = ["productId": .string(p.productId), "listingPrice": PlayProduct.money(total / Int64(max(order.quantity, 1)), currency),
                               "total": PlayProduct.money(total, currency), "tax": PlayProduct.money(0, currency)]
        return ["orderId": .string(orderId), "purchaseToken": .string(p.token), "state": .string(state),
                "createTime": .string(Timestamp.rfc3339(order.timeMs)), "lastEventTime": .string(Timestamp.rfc3339(nowMs)),
                "lineItems": [item], "total": PlayProduct.money(total, currency), "tax": PlayProduct.money(0, currency),
                "developerRevenueInBuyerCurrency": PlayProduct.money(total - total * 15 / 100, currency)]
    }

    // MARK: Writes

    /// `purchases.subscriptions.acknowledge` (and `products.acknowledge`): once acknowledged, again is a no-op.
    mutating func acknowledge(_ token: String, packageName: String, productId: String, subscription: Bool,
                              developerPayload: String?, accountId: String?) throws(PlayAPIError) {
        let p = subscription ? try self.subscription(token, packageName: packageName) : try oneTime(token, productId: productId, packageName: packageName)
        guard !subscription || p.productId == productId else {
            throw PlayAPIError(code: 400, status: "INVALID_ARGUMENT", reason: "purchaseTokenDoesNotMatchSubscriptionId",
                               message: "The purchase token does not match the subscription ID.")
        }
        guard !p.voided else { throw .invalidState("The purchase was refunded or revoked and cannot be acknowledged.") }
        purchases[token]?.acknowledged = true
        if let developerPayload { purchases[token]?.developerPayload = developerPayload }
        if let accountId, p.accountId == nil { purchases[token]?.accountId = accountId }
    }

    /// `purchases.products.consume`: the item can be bought again; consuming also acknowledges.
    mutating func consume(_ token: String, productId: String, packageName: String) throws(PlayAPIError) {
        let p = try oneTime(token, productId: productId, packageName: packageName)
        guard !p.consumed, !p.voided else { throw .invalidState("The purchase is already consumed or was refunded.") }
        purchases[token]?.consumed = true
        purchases[token]?.acknowledged = true
    }

    /// `subscriptionsv2.cancel`: auto-renew off (RTDN 3); `DEVELOPER_REQUESTED_STOP_PAYMENTS` is recorded as the developer's.
    mutating func cancel(_ token: String, packageName: String, cancellationType: String?) throws(PlayAPIError) {
        _ = try subscription(token, packageName: packageName)
        do {
            try act(.cancel, token: token)
        } catch {
            throw .invalidState(error.message)
        }
        if cancellationType == "DEVELOPER_REQUESTED_STOP_PAYMENTS" { purchases[token]?.cancellation = "developer" }
    }

    /// `subscriptionsv2.revoke`: ends the entitlement now with a refund (RTDN 12, voided, source developer).
    mutating func revoke(_ token: String, packageName: String, context: JSONValue?) throws(PlayAPIError) {
        let s = try subscription(token, packageName: packageName)
        guard let context, context["fullRefund"] != nil || context["proratedRefund"] != nil || context["itemBasedRefund"] != nil else {
            throw .invalidArgument("revocationContext needs fullRefund, proratedRefund or itemBasedRefund.")
        }
        guard !s.voided, s.subscriptionState != .expired else { throw .invalidState("The subscription has already ended.") }
        revokeSubscription(token, source: PlayVoidedSource.developer.rawValue, reason: PlayVoidedReason.other.rawValue)
    }

    /// `subscriptionsv2.defer`: moves the expiry later by `deferSeconds` (RTDN 9) and answers `itemExpiryTimeDetails`.
    mutating func deferExpiry(_ token: String, packageName: String, deferSeconds: Int64, etag: String?, validateOnly: Bool) throws(PlayAPIError) -> JSONValue {
        let s = try subscription(token, packageName: packageName)
        guard s.subscriptionState == .active || s.subscriptionState == .canceled, s.expiryMs > nowMs else {
            throw .invalidState("Only an active subscription can be deferred.")
        }
        guard (86_400...365 * 86_400).contains(deferSeconds) else { throw .invalidArgument("deferDuration must be 1 day to 1 year.") }
        if let etag, etag != self.etag(s) { throw PlayAPIError(code: 409, status: "ABORTED", reason: "etagMismatch", message: "The etag does not match the subscription's.") }
        let newExpiry = s.expiryMs + deferSeconds * 1000
        if !validateOnly {
            purchases[token]?.expiryMs = newExpiry
            if let pause = s.pause, !pause.started {
                purchases[token]?.pause = .init(startMs: newExpiry, resumeMs: ISOPeriod(months: config.pauseMonths).added(to: newExpiry), started: false)
            }
            publishSubscription(.deferred, token)
        }
        return ["itemExpiryTimeDetails": [["productId": .string(s.productId), "expiryTime": .string(Timestamp.rfc3339(newExpiry))]]]
    }

    /// `voidedpurchases.list`: voided in [start, end] (start at most 30 days back), type 0 one-time only / 1 with
    /// subscriptions, quantity-based partial refunds only when asked, oldest first, paged by an opaque token.
    func voidedPurchases(packageName: String, startMs: Int64?, endMs: Int64?, maxResults: Int?, pageToken: String?, type: Int,
                         includePartial: Bool) throws(PlayAPIError) -> JSONValue {
        guard packageName == config.packageName else {
            throw PlayAPIError(code: 404, status: "NOT_FOUND", reason: "applicationNotFound", message: "No application was found for the given package name.")
        }
        let end = endMs ?? nowMs
        let start = startMs ?? (nowMs - 30 * 86_400_000)
        guard start >= nowMs - 30 * 86_400_000, start <= end else { throw .invalidArgument("startTime must be within the last 30 days and before endTime.") }
        guard type == 0 || type == 1 else { throw .invalidArgument("type must be 0 or 1.") }
        let limit = min(max(maxResults ?? 1000, 1), 1000)
        let offset: Int
        if let pageToken {
            guard let bytes = Base64.decode(pageToken), let n = Int(String(decoding: bytes, as: UTF8.self)), n >= 0 else {
                throw .invalidArgument("The page token is invalid.")
            }
            offset = n
        } else {
            offset = 0
        }
        let matching = voided.filter { v in
            (start...end).contains(v.voidedTimeMs) && (type == 1 || v.productType == 2) && (includePartial || v.quantity == nil || isWholeRefund(v))
        }
        let page = matching.dropFirst(offset).prefix(limit)
        var o: [String: JSONValue] = ["voidedPurchases": .array(page.map(\.json))]
        if offset + page.count < matching.count {
            o["tokenPagination"] = ["nextPageToken": .string(Base64.urlEncode(Array(String(offset + page.count).utf8)))]
        }
        o["pageInfo"] = ["totalResults": .int(Int64(matching.count)), "resultPerPage": .int(Int64(limit)), "startIndex": .int(Int64(offset))]
        return .object(o)
    }

    /// A refund of every item of a multi-quantity order (listed even without `includeQuantityBasedPartialRefund`).
    private func isWholeRefund(_ v: VoidedRecord) -> Bool {
        purchases[v.token].map { $0.quantity == (v.quantity ?? $0.quantity) } ?? true
    }
}
