import AppStoreSecurity
import Foundation
import HTTPServer
import KakinCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Apple's 2026 surfaces of the simulator:
// - Server API: Finish Transaction and the Retention Messaging API's configuration endpoints (Apple's paths);
// - control API: `GET|PUT /simulator/v1/retention` (the realtime URL, the calls made), the cancel flow's
//   Get Retention Message call (`disableAutoRenew`), `POST accounts/{token}/rescind-consent`,
//   `GET accounts/{token}/finished` (what a device reads to drop transactions the server finished).

/// How the simulator reaches the app's Get Retention Message endpoint: over HTTP, or (local mode) a handler
/// of the same process.
public protocol RetentionMessageTransport: Sendable {
    /// POSTs `{"signedPayload": …}`; nil when no answer came within `timeoutMs` or the call failed.
    func post(url: String, body: [UInt8], timeoutMs: Int) async -> (status: Int, body: [UInt8])?
}

/// URLSession, bounded by `timeoutMs` of real time whatever the connection does.
public struct HTTPRetentionMessageTransport: RetentionMessageTransport {
    /// Waits at least this long whatever the caller's bound (tests on a loaded machine; Apple's bound is the caller's).
    let minimumTimeoutMs: Int

    public init(minimumTimeoutMs: Int = 0) { self.minimumTimeoutMs = minimumTimeoutMs }

    public func post(url: String, body: [UInt8], timeoutMs requested: Int) async -> (status: Int, body: [UInt8])? {
        let timeoutMs = max(requested, minimumTimeoutMs)
        guard let u = URL(string: url) else { return nil }
        var request = URLRequest(url: u, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: Double(timeoutMs) / 1000)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body)
        let prepared = request
        return await withTaskGroup(of: (status: Int, body: [UInt8])?.self) { group in
            group.addTask {
                guard let (data, response) = try? await URLSession.shared.data(for: prepared), let http = response as? HTTPURLResponse,
                      data.count <= 64 * 1024 else { return nil }
                return (http.statusCode, [UInt8](data))
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(timeoutMs))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

/// Hands the call to an HTTP handler of the same process (local mode: Kakin's own), the path taken from the URL.
public struct InProcessRetentionMessageTransport: RetentionMessageTransport {
    public let handler: HTTPHandler
    public init(handler: @escaping HTTPHandler) { self.handler = handler }

    public func post(url: String, body: [UInt8], timeoutMs: Int) async -> (status: Int, body: [UInt8])? {
        guard let u = URL(string: url) else { return nil }
        let request = HTTPRequest(method: "POST", path: u.path.isEmpty ? "/" : u.path, headers: ["Content-Type": "application/json"],
                                  body: body, requestId: "req_simulator_retention", remoteAddress: "127.0.0.1")
        let response = await handler(request)
        return (response.status, response.body)
    }
}

/// What the app's endpoint answered, checked as the App Store checks it.
enum RetentionReply: Sendable, Equatable {
    case message(String)
    case alternateProduct(productId: String, messageId: String?)
    case promotionalOffer(OfferSignatureClaims, messageId: String?)
    /// Nothing usable: `timeout`, `http 500`, `error: …`; the App Store shows its default message.
    case failed(String)
}

extension AppStoreSimulator {
    /// About what Apple's performance test allows (`responseTimeThreshold`, ~700 ms).
    static let retentionTimeoutMs = 700

    /// Where Get Retention Message calls go (HTTP unless set: local mode hands Kakin's handler in).
    public func setRetentionMessageTransport(_ transport: any RetentionMessageTransport) {
        retentionTransport.withLock { $0 = transport }
    }

    /// Sets (or with nil clears) the realtime URL, as Configure Realtime URL does; for `--realtime-url`.
    public func configureRealtimeURL(_ url: String?) throws(KakinError) {
        try core.withLock { (c: inout Core) throws(KakinError) in
            do {
                try c.engine.configureRealtimeURL(url)
            } catch {
                throw KakinError(.invalidField, "realtimeURL must be an https URL of at most 256 characters (http only for 127.0.0.1, localhost or [::1]).")
            }
        }
    }

    // MARK: Server API

    /// Server API routes of Apple's 2026 additions, or nil.
    static func apple2026ServerRoute(_ method: String, _ s: [String]) -> ServerRoute? {
        let routes: [(String, String, ([String: String]) -> ServerRoute)] = [
            ("POST", "v1/transactions/:id/finish", { .finish($0["id"]!) }),
            ("GET", "v1/messaging/image/list", { _ in .retention(.imageList) }),
            ("PUT", "v1/messaging/image/:id", { .retention(.uploadImage($0["id"]!)) }),
            ("DELETE", "v1/messaging/image/:id", { .retention(.deleteImage($0["id"]!)) }),
            ("GET", "v1/messaging/message/list", { _ in .retention(.messageList) }),
            ("PUT", "v1/messaging/message/:id", { .retention(.uploadMessage($0["id"]!)) }),
            ("DELETE", "v1/messaging/message/:id", { .retention(.deleteMessage($0["id"]!)) }),
            ("PUT", "v1/messaging/default/:product/:locale", { .retention(.configureDefault($0["product"]!, $0["locale"]!)) }),
            ("GET", "v1/messaging/default/:product/:locale", { .retention(.getDefault($0["product"]!, $0["locale"]!)) }),
            ("DELETE", "v1/messaging/default/:product/:locale", { .retention(.deleteDefault($0["product"]!, $0["locale"]!)) }),
            ("PUT", "v1/messaging/realtime/url", { _ in .retention(.configureRealtimeURL) }),
            ("GET", "v1/messaging/realtime/url", { _ in .retention(.getRealtimeURL) }),
            ("DELETE", "v1/messaging/realtime/url", { _ in .retention(.deleteRealtimeURL) }),
        ]
        for (m, pattern, make) in routes where m == method {
            if let p = match(s, pattern) { return make(p) }
        }
        return nil
    }

    enum RetentionRoute: Sendable {
        case imageList, uploadImage(String), deleteImage(String), messageList, uploadMessage(String), deleteMessage(String)
        case configureDefault(String, String), getDefault(String, String), deleteDefault(String, String)
        case configureRealtimeURL, getRealtimeURL, deleteRealtimeURL
    }

    func serveFinish(_ id: String) async throws(AppStoreAPIError) -> HTTPResponse {
        try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.finishTransaction(id) }
        return HTTPResponse(status: 200)
    }

    func serveRetention(_ route: RetentionRoute, _ request: HTTPRequest) async throws(AppStoreAPIError) -> HTTPResponse {
        switch route {
        case .imageList: return Self.json(try read { (e) throws(AppStoreAPIError) in e.imageList() })
        case .messageList: return Self.json(try read { (e) throws(AppStoreAPIError) in e.messageList() })
        case .getDefault(let p, let l): return Self.json(try read { (e) throws(AppStoreAPIError) in try e.defaultMessage(productId: p, locale: l) })
        case .getRealtimeURL: return Self.json(try read { (e) throws(AppStoreAPIError) in try e.realtimeURLAnswer() })
        case .uploadImage(let id):
            let bytes = request.body, size = request.query["imageSize"]
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.uploadImage(id, bytes: bytes, size: size) }
        case .deleteImage(let id):
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.deleteImage(id) }
        case .uploadMessage(let id):
            let body = try Self.appleBody(request)
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.uploadMessage(id, body: body) }
        case .deleteMessage(let id):
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.deleteMessage(id) }
        case .configureDefault(let p, let l):
            let body = try Self.appleBody(request)
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.configureDefaultMessage(productId: p, locale: l, body: body) }
        case .deleteDefault(let p, let l):
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.deleteDefaultMessage(productId: p, locale: l) }
        case .configureRealtimeURL:
            let body = try Self.appleBody(request)
            guard let url = body["realtimeURL"]?.stringValue else { throw .generalBadRequest }
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in try e.configureRealtimeURL(url) }
        case .deleteRealtimeURL:
            try await actAPI { (e: inout SimulatorState) throws(AppStoreAPIError) in
                _ = try e.realtimeURLAnswer()
                try e.configureRealtimeURL(nil)
            }
        }
        return HTTPResponse(status: 200)
    }

    // MARK: Control API

    /// `GET|PUT /simulator/v1/retention` and `GET /simulator/v1/retention/calls`, or nil for other paths.
    func apple2026ControlRoute(_ request: HTTPRequest, _ s: [String]) async throws(KakinError) -> HTTPResponse? {
        if Self.match(s, "retention") != nil {
            if request.method == "PUT" {
                let body = try Self.bodyObject(request, allowed: ["realtimeURL"])
                let url = try body.optionalString("realtimeURL", max: 256)
                await gate.acquire()
                defer { gate.release() }
                try configureRealtimeURL(url)
            } else if request.method != "GET" {
                return Self.methodNotAllowed(request)
            }
            let view = core.withLock { c -> JSONValue in
                let r = c.engine.retention
                return ["realtimeURL": .string(r.realtimeURL), "messages": .int(Int64(r.messages.count)), "images": .int(Int64(r.images.count)),
                        "defaults": .object(r.defaults.mapValues { .string($0) }), "calls": c.engine.retentionCallsJSON(limit: 20)]
            }
            return Self.json(view)
        }
        if Self.match(s, "retention/calls") != nil {
            guard request.method == "GET" else { return Self.methodNotAllowed(request) }
            return Self.json(["calls": core.withLock { $0.engine.retentionCallsJSON(limit: 1000) }])
        }
        return nil
    }

    /// `accounts/{token}/finished` (GET) and `accounts/{token}/rescind-consent` (POST), or nil.
    func apple2026Account(_ request: HTTPRequest, _ s: [String]) async -> HTTPResponse? {
        guard s.count == 2, s[1] == "finished" || s[1] == "rescind-consent" else { return nil }
        do throws(KakinError) {
            guard let account = try SimulatorState.normalizedToken(s[0]) else { throw KakinError(.invalidField, "The account is an appAccountToken.") }
            if s[1] == "rescind-consent" {
                guard request.method == "POST" else { return Self.methodNotAllowed(request) }
                let result = try await act { (e: inout SimulatorState) throws(KakinError) -> JSONValue in
                    let outcome = e.rescindConsent(account: account)
                    return e.outcomeJSON(outcome, action: "rescindConsent")
                }
                return Self.json(result)
            }
            guard request.method == "GET" else { return Self.methodNotAllowed(request) }
            var after: Int64 = 0
            if let v = request.query["after"] {
                guard let n = Int64(v), n >= 0 else { throw KakinError(.invalidField, "after must be a seq from an earlier answer (a whole number).") }
                after = n
            }
            var limit = 100
            if let v = request.query["limit"] {
                guard let n = Int(v), (1...Self.accountPageLimitMax).contains(n) else { throw KakinError(.invalidField, "limit must be 1 to \(Self.accountPageLimitMax).") }
                limit = n
            }
            let page = core.withLock { c -> JSONValue in
                catchUp(&c)
                let (items, hasMore, head) = c.engine.finishedTransactions(account: account, after: after, limit: limit)
                return ["finished": .array(items.map { ["seq": .int($0.finishSeq!), "transactionId": .string($0.transactionId),
                                                        "finishedDate": .string(Timestamp.rfc3339($0.finishedDate!))] }),
                        "hasMore": .bool(hasMore), "headSeq": .int(head)]
            }
            return Self.json(page)
        } catch {
            return Self.failure(error, request)
        }
    }

    // MARK: The cancel flow's Get Retention Message

    /// Whether the simulated customer takes an offer shown at cancel: no by default (a customer who taps Cancel
    /// mostly goes on cancelling, and the action keeps meaning what its name says); `"acceptRetentionOffer": true`
    /// takes it. `declineRetentionOffer` (the older spelling) is accepted: `true` is the default, `false` alone
    /// accepts; both keys saying opposite things is refused.
    static func acceptsRetentionOffer(_ body: JSONValue) throws(KakinError) -> Bool {
        let accept = try body.optionalBool("acceptRetentionOffer")
        let decline = try body.optionalBool("declineRetentionOffer")
        if let accept, let decline, accept == decline {
            throw KakinError(.invalidField, "acceptRetentionOffer and declineRetentionOffer disagree: give one of them.")
        }
        return accept ?? decline.map { !$0 } ?? false
    }

    /// `disableAutoRenew` with a realtime URL configured: the App Store asks the app's Get Retention Message
    /// endpoint first (a `RealtimeRequestBody` signed by the simulator's CA like its other payloads), within
    /// `retentionTimeoutMs`, and records the answer. The customer declines by default and the cancellation goes
    /// on; with `acceptOffer` a promotional offer is redeemed (it becomes the pending offer in renewal info,
    /// exactly as `applyPromotionalOffer`; the subscription is not cancelled). A message or a switch-plan
    /// suggestion is recorded and the cancellation goes on; no answer, a timeout or an unusable answer means the
    /// cancellation goes on. Without a URL it is the plain `disableAutoRenew`.
    func disableAutoRenewAskingRetention(otid: String, userLocale: String?, acceptOffer: Bool) async throws(KakinError) -> JSONValue {
        let locale = userLocale ?? "en-US"
        guard SimulatorState.isLocale(locale) else { throw KakinError(.invalidField, "userLocale must be a BCP 47 locale such as en-US.") }
        await gate.acquire()
        let prepared = core.withLock { c -> (url: String, jws: String, requestId: String)? in
            catchUp(&c)
            guard let url = c.engine.retention.realtimeURL, let sub = c.engine.subscription(otid), sub.phase.isLive,
                  sub.commitment.map(\.renews) ?? sub.autoRenewStatus else { return nil }
            let requestId = c.engine.store.ids.uuid()
            let payload = c.engine.realtimeRequestPayload(sub, userLocale: locale, requestIdentifier: requestId)
            return (url, c.engine.signer.sign(payload), requestId)
        }
        gate.release()
        var reply: RetentionReply?
        if let prepared {
            let transport = retentionTransport.withLock { $0 }
            let answer = await transport.post(url: prepared.url, body: SendAttemptResult.requestBody(signedPayload: prepared.jws),
                                              timeoutMs: Self.retentionTimeoutMs)
            reply = checkRetentionAnswer(answer, originalTransactionId: otid)
        }
        return try await act { (e: inout SimulatorState) throws(KakinError) -> JSONValue in
            var outcome: ActionOutcome?
            var call: RetentionMessagingStore.Call?
            if let prepared, let reply, let sub = e.subscription(otid) {
                call = RetentionMessagingStore.Call(requestIdentifier: prepared.requestId, originalTransactionId: otid, productId: sub.productId,
                                                    dateMs: e.nowMs, outcome: "", cancelled: true)
                switch reply {
                case .message(let m):
                    call!.outcome = "message"
                    call!.messageIdentifier = m
                case .alternateProduct(let p, let m):
                    call!.outcome = "alternateProduct"
                    call!.alternateProductId = p
                    call!.messageIdentifier = m
                case .promotionalOffer(let claims, let m):
                    call!.outcome = "promotionalOffer"
                    call!.offerIdentifier = claims.offerId
                    call!.messageIdentifier = m
                    if acceptOffer {
                        do throws(KakinError) {
                            outcome = try e.applyPromotionalOffer(otid, offerId: claims.offerId, productId: claims.productId)
                            call!.cancelled = false
                        } catch {
                            call!.outcome = "error: \(error.message)"
                        }
                    }
                case .failed(let why):
                    call!.outcome = why
                }
            }
            if outcome == nil { outcome = try e.setAutoRenew(otid, enabled: false) }
            if let call { e.recordRetentionCall(call) }
            guard case .object(var o) = e.outcomeJSON(outcome!, action: "disableAutoRenew") else { return .null }
            if let call, case .array(let calls) = e.retentionCallsJSON(limit: 1), let last = calls.last, call.requestIdentifier == last["requestIdentifier"]?.stringValue {
                o["retentionMessage"] = last
            }
            return .object(o)
        }
    }

    /// A `RealtimeResponseBody` as the App Store takes it: exactly one of `message`, `alternateProduct`,
    /// `promotionalOffer`; a promotional offer signed by one of the app's keys — V2 JWS (its `transactionId`
    /// must be the request's `originalTransactionId`) or V1 fields — for a product of the app.
    func checkRetentionAnswer(_ answer: (status: Int, body: [UInt8])?, originalTransactionId otid: String) -> RetentionReply {
        guard let answer else { return .failed("timeout") }
        guard answer.status == 200 else { return .failed("http \(answer.status)") }
        guard let json = try? JSONParser.parse(answer.body, depthMax: 8), case .object(let o) = json else { return .failed("error: not a JSON object") }
        let present = ["message", "alternateProduct", "promotionalOffer"].filter { o[$0] != nil && !(o[$0]!.isNull) }
        guard present.count == 1 else { return .failed(present.isEmpty ? "none" : "error: more than one of message, alternateProduct, promotionalOffer") }
        func uuid(_ v: JSONValue?) -> String? {
            guard let s = v?.stringValue else { return nil }
            return UUIDText.isValid(s) ? s.lowercased() : nil
        }
        switch present[0] {
        case "message":
            guard let m = uuid(json["message"]?["messageIdentifier"]) else { return .failed("error: message.messageIdentifier must be a UUID") }
            return .message(m)
        case "alternateProduct":
            guard let p = json["alternateProduct"]?["productId"]?.stringValue, configuration.catalog[p]?.kind == .autoRenewable else {
                return .failed("error: alternateProduct.productId is not a subscription of the app")
            }
            return .alternateProduct(productId: p, messageId: uuid(json["alternateProduct"]?["messageIdentifier"]))
        default:
            let offer = json["promotionalOffer"]!
            let message = uuid(offer["messageIdentifier"])
            do throws(KakinError) {
                if let v2 = offer["promotionalOfferSignatureV2"]?.stringValue {
                    let claims = try verifyOfferJWS(v2)
                    guard claims.transactionId == otid else {
                        return .failed("error: promotionalOfferSignatureV2 must carry transactionId \(otid) (the request's originalTransactionId)")
                    }
                    return .promotionalOffer(claims, messageId: message)
                }
                if let v1 = offer["promotionalOfferSignatureV1"], case .object = v1 {
                    guard let productId = v1["productId"]?.stringValue, let offerId = v1["offerIdentifier"]?.stringValue,
                          let keyId = v1["keyId"]?.stringValue, let nonce = v1["nonce"]?.stringValue, let timestamp = v1["timestamp"]?.int64Value,
                          let signature = v1["encodedSignature"]?.stringValue else { return .failed("error: promotionalOfferSignatureV1 is incomplete") }
                    let legacy = try LegacyOfferSignature(json: ["keyIdentifier": .string(keyId), "nonce": .string(nonce), "timestamp": .int(timestamp),
                                                                 "signature": .string(signature)])
                    let claims = try verifyLegacyOffer(legacy, productId: productId, offerId: offerId, appAccountToken: v1["appAccountToken"]?.stringValue)
                    return .promotionalOffer(claims, messageId: message)
                }
                return .failed("error: promotionalOffer has no signature")
            } catch {
                return .failed("error: \(error.message)")
            }
        }
    }
}
