import HTTPServer
import KakinCore

/// External purchases, both sides:
/// - the device: `POST /simulator/v1/external-purchase-tokens` *(ext)* hands out a token as StoreKit's
///   `ExternalPurchase`/`ExternalPurchaseLink` (`"api": "externalPurchase"`) or `ExternalPurchaseCustomLink`
///   (`"api": "customLink"`, `tokenType`) would; `GET …/external-purchase-tokens[/{externalPurchaseId}]` lists them
///   with what was reported;
/// - the External Purchase Server API at Apple's paths (`/externalPurchase/v1/reports`, also under `/simulator/`),
///   with Apple's bearer-token check and Apple's error objects.
extension AppStoreSimulator {
    static let externalTokenKeys: Set<String> = ["api", "tokenType", "appAccountToken", "refresh", "qualifyingEvent"]

    func externalPurchaseTokens(_ request: HTTPRequest, _ s: [String]) async -> HTTPResponse {
        do throws(KakinError) {
            switch (request.method, s.count) {
            case ("POST", 0):
                let body = try Self.bodyObject(request, allowed: Self.externalTokenKeys)
                guard let apiName = body["api"]?.stringValue, let api = SimulatorState.ExternalPurchaseAPI(rawValue: apiName) else {
                    throw KakinError(.invalidField, "api must be externalPurchase (ExternalPurchase, ExternalPurchaseLink) or customLink (ExternalPurchaseCustomLink).")
                }
                let tokenType = try body.optionalString("tokenType", max: 32)
                let account = try SimulatorState.normalizedToken(try body.optionalString("appAccountToken", max: 36)) ?? ""
                let refresh = try body.optionalBool("refresh") ?? false
                let qualifying = try body.optionalBool("qualifyingEvent") ?? false
                let view = try await act { (e: inout SimulatorState) throws(KakinError) -> JSONValue in
                    e.externalTokenView(try e.issueExternalPurchaseToken(api: api, tokenType: tokenType, account: account, refresh: refresh,
                                                                         qualifyingEvent: qualifying))
                }
                return Self.json(view, status: 201)
            case ("GET", 0):
                let list = core.withLock { c -> JSONValue in
                    catchUp(&c)
                    let e = c.engine.external
                    return ["tokens": .array(e.tokenOrder.suffix(1000).compactMap { e.tokens[$0] }.map { c.engine.externalTokenView($0) })]
                }
                return Self.json(list)
            case ("GET", 1):
                let id = s[0]
                let view = core.withLock { c -> JSONValue? in
                    catchUp(&c)
                    guard let t = c.engine.external.tokens[id] else { return nil }
                    var v = c.engine.externalTokenView(t)
                    let reports = c.engine.external.reportOrder.compactMap { rid -> JSONValue? in
                        guard let text = c.engine.external.reports[rid], let r = try? JSONParser.parse(text), r["externalPurchaseId"]?.stringValue == id
                        else { return nil }
                        return r
                    }
                    if case .object(var o) = v { o["reports"] = .array(reports); v = .object(o) }
                    return v
                }
                guard let view else { throw KakinError(.simulatorUnknownExternalPurchaseToken) }
                return Self.json(view)
            case (_, 0), (_, 1):
                return Self.methodNotAllowed(request)
            default:
                return Self.failure(KakinError(.routeNotFound), request)
            }
        } catch {
            return Self.failure(error, request)
        }
    }

    /// `PUT /externalPurchase/v1/reports`, `GET /externalPurchase/v1/reports/{requestIdentifier}`.
    func externalPurchaseAPI(_ request: HTTPRequest, _ s: [String]) async -> HTTPResponse {
        let isSend = request.method == "PUT" && s == ["v1", "reports"]
        let isRetrieve = request.method == "GET" && s.count == 3 && s[0] == "v1" && s[1] == "reports"
        guard isSend || isRetrieve else {
            return Self.failure(KakinError(.routeNotFound, "No External Purchase Server API endpoint at \(request.method) \(request.path)."), request)
        }
        guard authorized(request) else { return HTTPResponse(status: 401) }
        if isRetrieve {
            let rid = s[2]
            let result = core.withLock { c -> Result<JSONValue, ExternalPurchaseReportError> in
                catchUp(&c)
                return c.engine.retrieveExternalPurchaseReport(rid)
            }
            switch result {
            case .success(let body): return Self.json(body)
            case .failure(let notFound): return Self.json(notFound.json, status: 400)  // NotFoundError, as Apple documents it
            }
        }
        let body = (try? JSONParser.parse(request.body, depthMax: 8)) ?? .null
        let outcome = await actReport { (e: inout SimulatorState) in e.sendExternalPurchaseReport(body) }
        switch outcome {
        case .accepted(let rid): return Self.json(["requestIdentifier": .string(rid)])
        case .refused(let errors): return Self.json(["errors": .array(errors.map(\.json))], status: 400)
        case .full: return HTTPResponse(status: 429)
        }
    }

    /// A report changes the engine like an App Store Server API call (under the engine lock, no gate: Kakin may
    /// report while it handles a notification the gate's holder is delivering).
    func actReport<T: Sendable>(_ body: (inout SimulatorState) -> T) async -> T {
        let result = core.withLock { (c: inout Core) -> T in
            catchUp(&c)
            return body(&c.engine)
        }
        await deliverDue()
        return result
    }
}
