import HTTPServer
import KakinCore
import KakinService

extension HTTPResponse {
    static func json(_ value: JSONValue, status: Int, headers extra: [(String, String)] = []) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json; charset=utf-8")
        for (k, v) in extra { headers.add(k, v) }
        return HTTPResponse(status: status, headers: headers, body: value.serialized())
    }

    static func error(_ error: KakinError, requestId: String, extra: [String: JSONValue] = [:]) -> HTTPResponse {
        var body = error.body(requestId: requestId)
        if case .object(var o) = body, !extra.isEmpty {
            for (k, v) in extra { o[k] = v }
            body = .object(o)
        }
        var headers: [(String, String)] = []
        if error.kind == .methodNotAllowed, let allow = error.detail { headers.append(("Allow", allow)) }
        if let seconds = retryAfterSeconds(error.kind) { headers.append(("Retry-After", String(seconds))) }
        return .json(body, status: error.httpStatus, headers: headers)
    }
}

/// How long a client should wait before retrying, for the 503s where a wait is known: an overloaded
/// server or database queue frees up within a second; a full disk needs an operator.
func retryAfterSeconds(_ kind: ErrorKind) -> Int? {
    switch kind {
    case .serviceUnavailable, .storageUnavailable, .databaseUnavailable, .writeOutcomeUnknown, .writeConflict: return 1
    case .storageFull: return 30
    default: return nil
    }
}

extension HTTPRequest {
    /// The body as a JSON object, after checking the content type. Errors are 415 / 400 with catalogue IDs.
    func jsonObject() throws(KakinError) -> StrictObject {
        let type = headers["Content-Type"]?.lowercased() ?? ""
        guard type == "application/json" || type.hasPrefix("application/json;") else {
            throw KakinError(.unsupportedMediaType)
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(body, depthMax: RequestLimits.jsonDepthMax)
        } catch {
            throw KakinError(.malformedJSON, detail: error.description)
        }
        return try field { () throws(ConfigurationError) in try StrictObject(value, path: "") }
    }

    /// A bounded header value, or nil when absent.
    func header(_ name: String, lengthMax: Int) throws(KakinError) -> String? {
        guard let v = headers[name] else { return nil }
        guard !v.isEmpty, v.utf8.count <= lengthMax else {
            throw KakinError(.invalidField, "The \(name) header must be 1 to \(lengthMax) characters.")
        }
        return v
    }
}

/// Runs field validation written against `StrictObject`, turning its path-naming errors into 400s.
func field<T>(_ body: () throws(ConfigurationError) -> T) throws(KakinError) -> T {
    do {
        return try body()
    } catch {
        let name = error.path.isEmpty ? "The request body" : "Field \(error.path)"
        throw KakinError(.invalidField, "\(name) \(error.message).")
    }
}

extension StrictObject {
    /// A required string of bounded length.
    func boundedString(_ key: String, lengthMax: Int = RequestLimits.textFieldLengthMax, required: Bool = true) throws(ConfigurationError) -> String? {
        guard let s = try string(key) else {
            if required { throw ConfigurationError(sub(key), "is required") }
            return nil
        }
        guard !s.isEmpty, s.utf8.count <= lengthMax else { throw ConfigurationError(sub(key), "must be 1 to \(lengthMax) characters") }
        return s
    }

    /// The request's fields in canonical form (sorted keys), compared when an idempotency key is replayed.
    var canonical: String { JSONValue.object(object).jsonString }
}

/// Validates the `{customerId}` path segment.
func customerID(_ params: PathParameters) throws(KakinError) -> String {
    guard let id = params["customerId"], CustomerID.isValid(id) else { throw KakinError(.invalidCustomerID) }
    return id
}
