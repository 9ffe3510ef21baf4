import GooglePlaySecurity
import HTTPServer
import KakinCore

/// The Developer API subset Kakin uses, at Google's paths under `/play-simulator/androidpublisher/v3/…`, with
/// Google's resource shapes and error bodies. `?alt=json` is accepted (Google's client adds it). Custom methods
/// are the last segment's `:verb` (`tokens/{token}:acknowledge`).
extension GooglePlaySimulator {
    enum Resource {
        case subscriptionV2, subscriptionV1, product, productV2, voided, order
    }

    static let unauthenticated = PlayAPIError(code: 401, status: "UNAUTHENTICATED", reason: "authError",
                                              message: "Request is missing required authentication credential. Expected OAuth 2 access token.")

    func developerAPI(_ request: HTTPRequest, _ p: PathParameters, _ resource: Resource) async -> HTTPResponse {
        guard isAuthorized(request.headers["Authorization"]) else { return Self.google(Self.unauthenticated) }
        if let alt = request.query["alt"], alt != "json" { return Self.google(.invalidArgument("Only alt=json is supported.")) }
        let packageName = p["packageName"] ?? ""
        // `{token}` or `{token}:verb`.
        let target = p["token"] ?? ""
        let parts = target.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let token = parts[0], verb = parts.count == 2 ? parts[1] : nil
        let post = request.method == "POST"
        let body = (try? JSONParser.parse(request.body, depthMax: 8)) ?? .object([:])
        do throws(PlayAPIError) {
            switch (resource, verb, post) {
            case (.subscriptionV2, nil, false):
                return Self.json(try read { (e: PlayEngine) throws(PlayAPIError) in e.subscriptionV2JSON(try e.subscription(token, packageName: packageName)) })
            case (.subscriptionV2, "cancel", true):
                let type = body["cancellationContext"]?["cancellationType"]?.stringValue
                try await act { (e: inout PlayEngine) throws(PlayAPIError) in try e.cancel(token, packageName: packageName, cancellationType: type) }
                return Self.json(.object([:]))
            case (.subscriptionV2, "revoke", true):
                try await act { (e: inout PlayEngine) throws(PlayAPIError) in try e.revoke(token, packageName: packageName, context: body["revocationContext"]) }
                return Self.json(.object([:]))
            case (.subscriptionV2, "defer", true):
                let context = body["deferralContext"]
                guard let seconds = context?["deferDuration"]?.stringValue.flatMap(Self.durationSeconds) else {
                    throw PlayAPIError.invalidArgument("deferralContext.deferDuration is required (a duration such as \"604800s\").")
                }
                let etag = context?["etag"]?.stringValue, validateOnly = context?["validateOnly"]?.boolValue ?? false
                return Self.json(try await act { (e: inout PlayEngine) throws(PlayAPIError) in
                    try e.deferExpiry(token, packageName: packageName, deferSeconds: seconds, etag: etag, validateOnly: validateOnly)
                })
            case (.subscriptionV1, "acknowledge", true), (.product, "acknowledge", true):
                let productId = p["productId"] ?? "", subscription = resource == .subscriptionV1
                let payload = body["developerPayload"]?.stringValue, account = body["externalAccountIds"]?["obfuscatedAccountId"]?.stringValue
                try await act { (e: inout PlayEngine) throws(PlayAPIError) in
                    try e.acknowledge(token, packageName: packageName, productId: productId, subscription: subscription,
                                      developerPayload: payload, accountId: account)
                }
                return HTTPResponse(status: 204)
            case (.product, nil, false):
                let productId = p["productId"]
                return Self.json(try read { (e: PlayEngine) throws(PlayAPIError) in
                    e.productPurchaseJSON(try e.oneTime(token, productId: productId, packageName: packageName))
                })
            case (.product, "consume", true):
                let productId = p["productId"] ?? ""
                try await act { (e: inout PlayEngine) throws(PlayAPIError) in try e.consume(token, productId: productId, packageName: packageName) }
                return HTTPResponse(status: 204)
            case (.productV2, nil, false):
                return Self.json(try read { (e: PlayEngine) throws(PlayAPIError) in
                    e.productPurchaseV2JSON(try e.oneTime(token, productId: nil, packageName: packageName))
                })
            case (.voided, nil, false):
                let q = request.query
                func int(_ name: String) throws(PlayAPIError) -> Int64? {
                    guard let raw = q[name] else { return nil }
                    guard let value = Int64(raw) else { throw PlayAPIError.invalidArgument("\(name) must be a number.") }
                    return value
                }
                let start = try int("startTime"), end = try int("endTime"), max = try int("maxResults"), type = try int("type") ?? 0
                let partial = q["includeQuantityBasedPartialRefund"] == "true"
                return Self.json(try read { (e: PlayEngine) throws(PlayAPIError) in
                    try e.voidedPurchases(packageName: packageName, startMs: start, endMs: end, maxResults: max.map { Int($0) }, pageToken: q["token"],
                                          type: Int(type), includePartial: partial)
                })
            case (.order, nil, false):
                return Self.json(try read { (e: PlayEngine) throws(PlayAPIError) in try e.orderJSON(token, packageName: packageName) })
            case (.order, "refund", true):
                let revoke = request.query["revoke"] == "true"
                try await act { (e: inout PlayEngine) throws(PlayAPIError) in
                    guard packageName == e.config.packageName else { throw PlayAPIError.invalidArgument("Unknown package name.") }
                    do throws(KakinError) {
                        try e.refundOrder(token, quantity: nil, revoke: revoke, source: PlayVoidedSource.developer.rawValue)
                    } catch {
                        throw error.kind == .playSimulatorUnknownOrder
                            ? PlayAPIError(code: 404, status: "NOT_FOUND", reason: "notFound", message: "The order was not found.")
                            : .invalidState(error.message)
                    }
                }
                return HTTPResponse(status: 204)
            default:
                return Self.google(PlayAPIError(code: 404, status: "NOT_FOUND", reason: "notFound", message: "No such method: \(request.method) \(request.path)."))
            }
        } catch {
            return Self.google(error)
        }
    }

    /// A protobuf `Duration` in JSON: whole seconds with an `s` (`"604800s"`).
    static func durationSeconds(_ text: String) -> Int64? {
        guard text.hasSuffix("s"), text.count <= 20 else { return nil }
        return Int64(text.dropLast())
    }

    /// `POST /play-simulator/token` (form): the JWT-bearer grant → `{"access_token", "expires_in", "token_type"}`,
    /// or OAuth's `{"error", "error_description"}` with 400.
    func tokenEndpoint(_ request: HTTPRequest) -> HTTPResponse {
        func oauthError(_ error: String, _ description: String) -> HTTPResponse {
            Self.json(["error": .string(error), "error_description": .string(description)], status: 400)
        }
        let form = Self.formFields(request.body)
        guard form["grant_type"] == ServiceAccountAssertion.grantType else {
            return oauthError("unsupported_grant_type", "grant_type must be \(ServiceAccountAssertion.grantType).")
        }
        guard let assertion = form["assertion"] else { return oauthError("invalid_request", "assertion is required.") }
        do {
            let granted = try grant(assertion: assertion, tokenURLs: [Self.ownTokenURL(request)])
            return Self.json(["access_token": .string(granted.token), "expires_in": .int(granted.expiresIn), "token_type": "Bearer"])
        } catch {
            return oauthError("invalid_grant", "Invalid JWT: \(error.reason.rawValue).")
        }
    }

    /// `application/x-www-form-urlencoded` fields (`+` is a space, `%XX` a byte); bounded by the server's body limit.
    static func formFields(_ body: [UInt8]) -> [String: String] {
        func decode(_ part: ArraySlice<UInt8>) -> String? {
            var out: [UInt8] = []
            var i = part.startIndex
            while i < part.endIndex {
                let byte = part[i]
                if byte == UInt8(ascii: "+") {
                    out.append(UInt8(ascii: " "))
                } else if byte == UInt8(ascii: "%") {
                    guard i + 2 < part.endIndex, let value = UInt8(String(decoding: part[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) else { return nil }
                    out.append(value)
                    i += 2
                } else {
                    out.append(byte)
                }
                i += 1
            }
            return String(validating: out, as: UTF8.self)
        }
        var fields: [String: String] = [:]
        for pair in body.split(separator: UInt8(ascii: "&")) {
            let kv = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2, let key = decode(kv[0]), let value = decode(kv[1]) else { continue }
            fields[key] = value
        }
        return fields
    }
}
