import AppStoreClient
import Foundation
import HTTPServer
import KakinCore
import KakinService

/// Renewal-date extensions (admin scope), over `SubscriptionExtensions`:
/// - `POST /v1/admin/subscriptions/{originalTransactionId}/extend` `{"days", "reason", "requestIdentifier"?}`
/// - `POST /v1/admin/apps/{bundleId}/extend-all` `{"productId", "days", "reason", "storefrontCountryCodes"?, "requestIdentifier"?}`
/// - `GET /v1/admin/apps/{bundleId}/extend-all/{productId}/{requestIdentifier}`: how far Apple got.
/// The request identifier (Apple's idempotency key) is the body's, else the `Idempotency-Key` header, else new.
extension KakinApp {
    func postExtendSubscription(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        try field { () throws(ConfigurationError) in try body.check(allowedKeys: ["days", "reason", "requestIdentifier"]) }
        let answer = try await services.extensions.extend(c["originalTransactionId"], days: body.value("days"), reason: body.value("reason"),
                                                          requestIdentifier: try requestIdentifier(body, c.request), actor: apiActor(c.request))
        return .json(answer, status: 200)
    }

    /// 202 with the request identifier; Apple works through the subscribers.
    func postExtendAll(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let bundleId = c["bundleId"]
        let body = try c.request.jsonObject()
        let (productId, codes) = try field { () throws(ConfigurationError) in try Self.massExtensionTarget(body) }
        let mass = MassExtendRenewalDateRequest(extendByDays: try SubscriptionExtensions.days(body.value("days")),
                                                extendReasonCode: try SubscriptionExtensions.reason(body.value("reason")),
                                                requestIdentifier: try requestIdentifier(body, c.request), productId: productId,
                                                storefrontCountryCodes: codes)
        let id = try await services.extensions.extendAll(bundleId: bundleId, mass)
        return .json(["requestIdentifier": .string(id), "bundleId": .string(bundleId), "productId": .string(productId),
                      "days": .int(Int64(mass.extendByDays)), "reasonCode": .int(Int64(mass.extendReasonCode.rawValue))], status: 202)
    }

    func getExtendAllStatus(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let (bundleId, productId, id) = (c["bundleId"], c["productId"], c["requestIdentifier"])
        guard !productId.isEmpty, !id.isEmpty, id.utf8.count <= SubscriptionExtensions.requestIdentifierLengthMax else {
            throw KakinError(.invalidField, "The path needs a product ID and a request identifier of at most \(SubscriptionExtensions.requestIdentifierLengthMax) characters.")
        }
        let status = try await services.extensions.extendAllStatus(bundleId: bundleId, productId: productId, requestIdentifier: id)
        return .json(["requestIdentifier": .string(status.requestIdentifier ?? id), "bundleId": .string(bundleId), "productId": .string(productId),
                      "complete": .bool(status.complete), "completeDate": Timestamp.rfc3339(status.completeDateMs),
                      "completeDateMs": .int(status.completeDateMs), "succeededCount": .int(status.succeededCount),
                      "failedCount": .int(status.failedCount)], status: 200)
    }

    /// The product and storefronts of an extend-all body.
    static func massExtensionTarget(_ body: StrictObject) throws(ConfigurationError) -> (String, [String]?) {
        try body.check(allowedKeys: ["productId", "days", "reason", "storefrontCountryCodes", "requestIdentifier"])
        let productId = try body.boundedString("productId")!
        guard let list = try body.array("storefrontCountryCodes") else { return (productId, nil) }
        let key = body.sub("storefrontCountryCodes")
        let max = SubscriptionExtensions.storefrontCodesMax
        guard !list.isEmpty, list.count <= max else { throw ConfigurationError(key, "must list 1 to \(max) codes") }
        var codes: [String] = []
        for v in list {
            guard let s = v.stringValue, s.utf8.count == 3, s.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
                throw ConfigurationError(key, "must hold ISO 3166-1 alpha-3 codes such as USA or JPN")
            }
            codes.append(s)
        }
        return (productId, codes)
    }

    func requestIdentifier(_ body: StrictObject, _ request: HTTPRequest) throws(KakinError) -> String {
        let max = SubscriptionExtensions.requestIdentifierLengthMax
        let given = try field { () throws(ConfigurationError) in try body.boundedString("requestIdentifier", lengthMax: max, required: false) }
        if let given { return given }
        if let key = try request.header("Idempotency-Key", lengthMax: max) { return key }
        return UUID().uuidString.lowercased()
    }
}
