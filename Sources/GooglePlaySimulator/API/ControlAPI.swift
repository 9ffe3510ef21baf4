import Foundation
import HTTPServer
import KakinCore

/// `/play-simulator/v1/…`: purchases as Play Billing makes them, subscription actions a customer (or Play) takes,
/// order refunds, the RTDN log, the push settings. No credentials: serve it on loopback only.
extension GooglePlaySimulator {
    /// `POST v1/purchases` → 201 `{purchaseToken, orderId, productId, packageName, notifications}`.
    func purchase(_ request: HTTPRequest) async throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["productId", "basePlanId", "offerId", "obfuscatedAccountId", "quantity", "test"])
        guard let productId = try body.text("productId") else { throw KakinError(.invalidField, "productId is required.") }
        let req = PlayEngine.PurchaseRequest(productId: productId, basePlanId: try body.text("basePlanId"), offerId: try body.text("offerId"),
                                             accountId: try body.text("obfuscatedAccountId"), quantity: try body.number("quantity", in: 1...10) ?? 1,
                                             test: try body.flag("test") ?? false)
        let (record, sent) = try await act { (e: inout PlayEngine) throws(KakinError) -> (PurchaseRecord, [String]) in
            let before = e.notifications.count
            let record = try e.purchase(req)
            return (record, e.notifications.dropFirst(before).map(\.summary))
        }
        var answer: [String: JSONValue] = ["purchaseToken": .string(record.token), "orderId": .string(record.orderBase),
                                           "productId": .string(record.productId), "packageName": .string(configuration.packageName),
                                           "notifications": .array(sent.map(JSONValue.string))]
        if let plan = record.basePlanId { answer["basePlanId"] = .string(plan) }
        if let offer = record.offerId { answer["offerId"] = .string(offer) }
        if record.isSubscription { answer["expiryTime"] = .string(Timestamp.rfc3339(record.expiryMs)) }
        return Self.json(.object(answer), status: 201)
    }

    /// `POST v1/subscriptions/{purchaseToken}/actions`.
    func subscriptionAction(_ request: HTTPRequest, token: String) async throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["action", "productId", "basePlanId", "replacementMode"])
        guard let name = try body.text("action"), let action = PlayEngine.Action(rawValue: name) else {
            throw KakinError(.invalidField, "action must be one of \(PlayEngine.Action.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        var mode: PlayReplacementMode? = nil
        if let raw = try body.text("replacementMode") {
            guard PlayReplacementMode.known.contains(PlayReplacementMode(rawValue: raw)) else {
                throw KakinError(.invalidField, "replacementMode must be one of \(PlayReplacementMode.known.map(\.rawValue).joined(separator: ", ")).")
            }
            mode = PlayReplacementMode(rawValue: raw)
        }
        let productId = try body.text("productId"), basePlanId = try body.text("basePlanId")
        let (current, state, sent) = try await act { (e: inout PlayEngine) throws(KakinError) -> (String, String, [String]) in
            let before = e.notifications.count
            let current = try e.act(action, token: token, productId: productId, basePlanId: basePlanId, replacementMode: mode)
            return (current, e.purchases[current]?.state ?? "", e.notifications.dropFirst(before).map(\.summary))
        }
        var answer: [String: JSONValue] = ["purchaseToken": .string(current), "subscriptionState": .string(state),
                                           "notifications": .array(sent.map(JSONValue.string))]
        if current != token { answer["linkedPurchaseToken"] = .string(token) }
        return Self.json(.object(answer))
    }

    /// `POST v1/orders/{orderId}/refund` `{"quantity"?, "revoke"?}`: Google refunds the order (the customer asked).
    func refund(_ request: HTTPRequest, orderId: String) async throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["quantity", "revoke"])
        let quantity = try body.number("quantity", in: 1...10), revoke = try body.flag("revoke") ?? true
        let sent = try await act { (e: inout PlayEngine) throws(KakinError) -> [String] in
            let before = e.notifications.count
            try e.refundOrder(orderId, quantity: quantity, revoke: revoke, source: PlayVoidedSource.user.rawValue)
            return e.notifications.dropFirst(before).map(\.summary)
        }
        return Self.json(["orderId": .string(orderId), "notifications": .array(sent.map(JSONValue.string))])
    }

    /// `GET v1/notifications?limit=N` (1–500, default 50): the RTDNs published, newest first, with each push attempt.
    func notificationLog(_ request: HTTPRequest) throws(KakinError) -> HTTPResponse {
        var limit = 50
        if let raw = request.query["limit"] {
            guard let n = Int(raw), (1...500).contains(n) else { throw KakinError(.invalidField, "limit must be 1 to 500.") }
            limit = n
        }
        let items = read { (e: PlayEngine) -> [JSONValue] in
            e.notifications.suffix(limit).reversed().map { n in
                var o: [String: JSONValue] = [
                    "messageId": .string(n.messageId), "type": .string(n.summary), "publishTime": .string(Timestamp.rfc3339(n.publishTimeMs)),
                    "developerNotification": (try? JSONParser.parse(n.data)) ?? .null, "delivered": .bool(n.delivered),
                    "attempts": .array(n.attempts.map { ["at": .string(Timestamp.rfc3339($0.atMs)), "status": .int(Int64($0.status))] }),
                ]
                if let token = n.purchaseToken { o["purchaseToken"] = .string(token) }
                if let next = n.nextAttemptMs { o["nextAttemptAt"] = .string(Timestamp.rfc3339(next)) }
                return .object(o)
            }
        }
        return Self.json(["notifications": .array(items)])
    }

    var pushJSON: JSONValue {
        let p = pushSettings
        var o: [String: JSONValue] = ["audience": .string(p.audience), "serviceAccountEmail": .string(p.serviceAccountEmail),
                                      "subscription": .string(p.subscription), "pushing": .bool(p.sink != nil)]
        if let http = p.sink as? HTTPPlayPushSink { o["url"] = .string(http.url.absoluteString) }
        return .object(o)
    }

    /// `PUT v1/push` `{"url"?, "audience"?, "serviceAccountEmail"?}`: where RTDNs are pushed (an http(s) URL; null
    /// stops pushing) and what the push token says (`audience` defaults to the URL, as Pub/Sub's does).
    func configurePush(_ request: HTTPRequest) throws(KakinError) -> HTTPResponse {
        let body = try Self.bodyObject(request, allowed: ["url", "audience", "serviceAccountEmail"])
        var settings = pushSettings
        if body["url"] != nil {
            if let text = try body.text("url") {
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                    throw KakinError(.invalidField, "url must be an absolute http:// or https:// URL.")
                }
                settings.sink = HTTPPlayPushSink(url: url)
                settings.audience = text
            } else {
                settings.sink = nil
            }
        }
        if let audience = try body.text("audience") { settings.audience = audience }
        if let email = try body.text("serviceAccountEmail") { settings.serviceAccountEmail = email }
        setPush(settings)
        return Self.json(pushJSON)
    }
}
