import HTTPServer
import KakinCore

/// One HTTP entry point for the whole simulator:
/// - `/simulator/v1/…`: the control API (the contract's simulator section, plus documented extensions);
/// - `/inApps/…` and `/simulator/inApps/…`: the App Store Server API at Apple's paths, bearer JWT required;
///   `/externalPurchase/…` (and under `/simulator/`): the External Purchase Server API, the same way.
/// Local mode mounts it under `/simulator/`; `kakin simulator serve` serves it at the root, where both
/// Server API spellings work so a client's base URL is the same in either mode.
extension AppStoreSimulator {
    /// Answers one request. Never throws and never crashes on bad input: errors use the contract's error
    /// body on the control API and Apple's `{errorCode, errorMessage}` on the Server API.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if segments.count >= 3, segments[0] == "simulator", segments[1] == "v1", segments[2] == "accounts" {
            return await accounts(request, Array(segments.dropFirst(3)))
        }
        if segments.count >= 3, segments[0] == "simulator", segments[1] == "v1", segments[2] == "external-purchase-tokens" {
            return await externalPurchaseTokens(request, Array(segments.dropFirst(3)))
        }
        if segments.first == "externalPurchase" { return await externalPurchaseAPI(request, Array(segments.dropFirst())) }
        if segments.count >= 2, segments[0] == "simulator", segments[1] == "externalPurchase" {
            return await externalPurchaseAPI(request, Array(segments.dropFirst(2)))
        }
        if segments.count >= 2, segments[0] == "simulator", segments[1] == "v1" {
            return await control(request, Array(segments.dropFirst(2)))
        }
        if segments.first == "inApps" { return await serverAPI(request, Array(segments.dropFirst())) }
        if segments.count >= 2, segments[0] == "simulator", segments[1] == "inApps" {
            return await serverAPI(request, Array(segments.dropFirst(2)))
        }
        return Self.failure(KakinError(.routeNotFound), request)
    }

    // MARK: Framing helpers

    static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse { .json(value.serialized(), status: status) }

    static func failure(_ error: KakinError, _ request: HTTPRequest) -> HTTPResponse {
        .json(error.body(requestId: request.requestId).serialized(), status: error.httpStatus)
    }

    static func apple(_ error: AppStoreAPIError) -> HTTPResponse { .json(error.json.serialized(), status: error.httpStatus) }

    static func methodNotAllowed(_ request: HTTPRequest) -> HTTPResponse {
        failure(KakinError(.methodNotAllowed, "\(request.method) is not allowed on \(request.path)."), request)
    }

    /// Matches path segments against a pattern whose `:name` parts capture one segment each.
    static func match(_ segments: [String], _ pattern: String) -> [String: String]? {
        let parts = pattern.split(separator: "/").map(String.init)
        guard parts.count == segments.count else { return nil }
        var captured: [String: String] = [:]
        for (p, s) in zip(parts, segments) {
            if p.hasPrefix(":") {
                captured[String(p.dropFirst())] = s
            } else if p != s {
                return nil
            }
        }
        return captured
    }

    /// The JSON object a control request must carry, with only the keys the endpoint knows.
    static func bodyObject(_ request: HTTPRequest, allowed: Set<String>) throws(KakinError) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONParser.parse(request.body)
        } catch {
            throw KakinError(.malformedJSON, "The request body is not valid JSON (\(error.reason) at byte \(error.offset)).")
        }
        guard case .object(let o) = value else { throw KakinError(.invalidField, "The request body must be a JSON object.") }
        if let unknown = o.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw KakinError(.invalidField, "Unknown field \(unknown); this endpoint takes \(allowed.sorted().joined(separator: ", ")).")
        }
        return value
    }
}

/// Typed reads of request fields, each error naming its field.
extension JSONValue {
    func requiredString(_ key: String, max: Int = 255) throws(KakinError) -> String {
        guard let s = self[key]?.stringValue, !s.isEmpty, s.count <= max else {
            throw KakinError(.invalidField, "\(key) is required: a string of 1 to \(max) characters.")
        }
        return s
    }

    func optionalString(_ key: String, max: Int = 255) throws(KakinError) -> String? {
        guard let v = self[key], !v.isNull else { return nil }
        guard let s = v.stringValue, !s.isEmpty, s.count <= max else {
            throw KakinError(.invalidField, "\(key) must be a string of 1 to \(max) characters.")
        }
        return s
    }

    func optionalInt(_ key: String, _ range: ClosedRange<Int64>) throws(KakinError) -> Int64? {
        guard let v = self[key], !v.isNull else { return nil }
        guard case .int(let i) = v, range.contains(i) else {
            throw KakinError(.invalidField, "\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
        }
        return i
    }

    func optionalBool(_ key: String) throws(KakinError) -> Bool? {
        guard let v = self[key], !v.isNull else { return nil }
        guard case .bool(let b) = v else { throw KakinError(.invalidField, "\(key) must be true or false.") }
        return b
    }

    func optionalNumber(_ key: String, _ range: ClosedRange<Double>) throws(KakinError) -> Double? {
        guard let v = self[key], !v.isNull else { return nil }
        guard let d = v.doubleValue, range.contains(d) else {
            throw KakinError(.invalidField, "\(key) must be a number from \(range.lowerBound) to \(range.upperBound).")
        }
        return d
    }
}
