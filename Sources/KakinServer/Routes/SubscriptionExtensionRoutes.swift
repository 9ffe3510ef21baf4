import AppStoreClient
import Foundation
import HTTPServer
import KakinCore
import KakinStorage

/// Renewal-date extensions for support (admin scope), through the App Store Server API (reference §6.8):
/// - `POST /v1/admin/subscriptions/{originalTransactionId}/extend` `{"days", "reason", "requestIdentifier"?}`
/// - `POST /v1/admin/apps/{bundleId}/extend-all` `{"productId", "days", "reason", "storefrontCountryCodes"?, "requestIdentifier"?}`
/// - `GET /v1/admin/apps/{bundleId}/extend-all/{productId}/{requestIdentifier}`: how far Apple got.
/// `days` 1–90, `reason` Apple's code 0–3 or its name. The request identifier (Apple's idempotency key: the
/// same one answers the same and extends once) is the body's, else the `Idempotency-Key` header, else new.
extension KakinApp {
    static let extendReasons: [String: ExtendReasonCode] = [
        "undeclared": .undeclared, "customerSatisfaction": .customerSatisfaction, "other": .other, "serviceIssueOrOutage": .serviceIssueOrOutage,
    ]
    static let requestIdentifierLengthMax = 128
    static let storefrontCodesMax = 250

    /// `POST /v1/admin/subscriptions/{originalTransactionId}/extend`.
    func postExtendSubscription(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .admin)
            let body = try request.jsonObject()
            try field { () throws(ConfigurationError) in try body.check(allowedKeys: ["days", "reason", "requestIdentifier"]) }
            let answer = try await extendSubscription(params["originalTransactionId"] ?? "", days: body.value("days"), reason: body.value("reason"),
                                                      requestIdentifier: try requestIdentifier(body, request), actor: apiActor(request))
            return .json(answer, status: 200)
        }
    }

    /// Extends one subscription: the one path behind the JSON endpoint and the support desk's form. Validates
    /// the days (1–90) and Apple's reason, asks the App Store, stores the extended copies and records the
    /// extension in the customer's timeline with who asked (`actor`). Answers the endpoint's JSON.
    func extendSubscription(_ otid: String, days: JSONValue?, reason: JSONValue?, requestIdentifier: String,
                            actor: String) async throws(KakinError) -> JSONValue {
        guard !otid.isEmpty, otid.utf8.count <= 64 else {
            throw KakinError(.invalidField, "The original transaction ID must be 1 to 64 characters.")
        }
        let extension_ = ExtendRenewalDateRequest(extendByDays: try Self.extensionDays(days), extendReasonCode: try Self.extensionReason(reason),
                                                  requestIdentifier: requestIdentifier)
        let connection = try appStoreConnection()
        let origin = try await store.subscriptionOrigin(originalTransactionId: otid)
        // The app the subscription was seen in, else each configured app in turn.
        let candidates = origin.flatMap { o in connection.clients.first { $0.bundleId == o.bundleId }.map { [$0] } } ?? connection.clients
        var lastError = KakinError(.transactionNotFound, "The App Store knows no subscription with this original transaction ID.")
        for entry in candidates {
            let environment = origin.map { AppStoreEnvironment(rawValue: $0.environment) }
            let answer: ExtendRenewalDateResponse
            do throws(AppStoreServerAPIError) {
                answer = try await entry.client.extendSubscriptionRenewalDate(originalTransactionId: otid, extension_, environment: environment)
            } catch {
                lastError = Self.extensionError(error)
                if lastError.kind == .transactionNotFound { continue }
                throw lastError
            }
            return try await extended(otid, answer, extension_, client: entry.client, customerId: origin?.customerId, actor: actor)
        }
        throw lastError
    }

    /// After Apple extended: the newest signed copies are stored at once (the RENEWAL_EXTENDED notification
    /// brings them too), the customer's timeline records it, and the answer carries the customer's status.
    func extended(_ otid: String, _ answer: ExtendRenewalDateResponse, _ request: ExtendRenewalDateRequest, client: AppStoreServerAPIClient,
                  customerId: String?, actor: String) async throws(KakinError) -> JSONValue {
        do {
            try await refreshSubscription(otid, client: client)
        } catch {
            logger.warning("extended subscription not refreshed; the notification will bring it", [
                "subscription.originalTransactionId": .string(otid), "error.id": .string(error.kind.id), "error.detail": .string(error.detail),
            ])
        }
        var json: [String: JSONValue] = [
            "originalTransactionId": .string(answer.originalTransactionId ?? otid), "webOrderLineItemId": .string(answer.webOrderLineItemId),
            "success": .bool(answer.success), "effectiveDate": Timestamp.rfc3339(answer.effectiveDateMs), "effectiveDateMs": .int(answer.effectiveDateMs),
            "requestIdentifier": .string(request.requestIdentifier), "customerId": .string(customerId),
        ]
        if let customerId {
            try await store.recordEvent(customerId: customerId, kind: "subscription.extended", reference: otid, detail: [
                "days": .int(Int64(request.extendByDays)), "reasonCode": .int(Int64(request.extendReasonCode.rawValue)),
                "requestIdentifier": .string(request.requestIdentifier), "effectiveDate": Timestamp.rfc3339(answer.effectiveDateMs),
                "by": .string(actor),
            ])
            json["customer"] = try await customerStatusJSON(customerId)
        }
        return .object(json)
    }

    /// Stores the subscription's latest transaction and renewal info as Get All Subscription Statuses has them.
    func refreshSubscription(_ otid: String, client: AppStoreServerAPIClient) async throws(KakinError) {
        let statuses: StatusResponse
        do {
            statuses = try await client.allSubscriptionStatuses(transactionId: otid)
        } catch {
            throw AppStoreConnection.kakinError(error)
        }
        for item in statuses.data.flatMap(\.lastTransactions) where item.originalTransactionId == otid {
            let info: RenewalInfoPayload
            do {
                info = try verifier.verifyRenewalInfo(item.signedRenewalInfo)
            } catch {
                throw error.kakinError
            }
            try await store.storeRenewalInfo(info, jws: item.signedRenewalInfo)
            try await store.storeUnclaimedTransaction(try verifyTransaction(item.signedTransactionInfo), jws: item.signedTransactionInfo)
        }
    }

    /// `POST /v1/admin/apps/{bundleId}/extend-all`: 202 with the request identifier; Apple works through the
    /// subscribers (RENEWAL_EXTENDED per subscriber, RENEWAL_EXTENSION when done).
    func postExtendAll(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .admin)
            let (bundleId, client) = try extensionClient(params)
            let body = try request.jsonObject()
            let (productId, codes) = try field { () throws(ConfigurationError) in try Self.massExtensionTarget(body) }
            guard appsByBundle[bundleId]?.catalog[productId]?.kind == .autoRenewable else {
                throw KakinError(.unknownProduct, "\(productId) is not an auto-renewable subscription of \(bundleId).")
            }
            let mass = MassExtendRenewalDateRequest(extendByDays: try Self.extensionDays(body.value("days")),
                                                    extendReasonCode: try Self.extensionReason(body.value("reason")),
                                                    requestIdentifier: try requestIdentifier(body, request), productId: productId,
                                                    storefrontCountryCodes: codes)
            let id: String
            do throws(AppStoreServerAPIError) {
                id = try await client.extendRenewalDateForAllActiveSubscribers(mass)
            } catch {
                throw Self.extensionError(error)
            }
            logger.info("renewal dates extended for all active subscribers", [
                "app.bundleId": .string(bundleId), "product.id": .string(productId), "extension.requestIdentifier": .string(id),
                "extension.days": .int(Int64(mass.extendByDays)),
            ])
            return .json(["requestIdentifier": .string(id), "bundleId": .string(bundleId), "productId": .string(productId),
                          "days": .int(Int64(mass.extendByDays)), "reasonCode": .int(Int64(mass.extendReasonCode.rawValue))], status: 202)
        }
    }

    /// `GET /v1/admin/apps/{bundleId}/extend-all/{productId}/{requestIdentifier}`.
    func getExtendAllStatus(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try authenticator.authorize(request, customerId: nil, needs: .admin)
            let (bundleId, client) = try extensionClient(params)
            guard let productId = params["productId"], let id = params["requestIdentifier"], !productId.isEmpty, !id.isEmpty,
                  id.utf8.count <= Self.requestIdentifierLengthMax else {
                throw KakinError(.invalidField, "The path needs a product ID and a request identifier of at most \(Self.requestIdentifierLengthMax) characters.")
            }
            let status: MassExtendRenewalDateStatusResponse
            do throws(AppStoreServerAPIError) {
                status = try await client.renewalDateExtensionStatus(requestIdentifier: id, productId: productId)
            } catch {
                throw Self.extensionError(error)
            }
            return .json(["requestIdentifier": .string(status.requestIdentifier ?? id), "bundleId": .string(bundleId), "productId": .string(productId),
                          "complete": .bool(status.complete), "completeDate": Timestamp.rfc3339(status.completeDateMs),
                          "completeDateMs": .int(status.completeDateMs), "succeededCount": .int(status.succeededCount),
                          "failedCount": .int(status.failedCount)], status: 200)
        }
    }

    // MARK: Validation and errors

    /// The product and storefronts of an extend-all body.
    static func massExtensionTarget(_ body: StrictObject) throws(ConfigurationError) -> (String, [String]?) {
        try body.check(allowedKeys: ["productId", "days", "reason", "storefrontCountryCodes", "requestIdentifier"])
        let productId = try body.boundedString("productId")!
        guard let list = try body.array("storefrontCountryCodes") else { return (productId, nil) }
        let key = body.sub("storefrontCountryCodes")
        guard !list.isEmpty, list.count <= storefrontCodesMax else { throw ConfigurationError(key, "must list 1 to \(storefrontCodesMax) codes") }
        var codes: [String] = []
        for v in list {
            guard let s = v.stringValue, s.utf8.count == 3, s.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
                throw ConfigurationError(key, "must hold ISO 3166-1 alpha-3 codes such as USA or JPN")
            }
            codes.append(s)
        }
        return (productId, codes)
    }

    func extensionClient(_ params: PathParameters) throws(KakinError) -> (String, AppStoreServerAPIClient) {
        guard let bundleId = params["bundleId"], appsByBundle[bundleId] != nil else { throw KakinError(.unknownApp) }
        return (bundleId, try appStoreConnection().client(for: bundleId))
    }

    static func extensionDays(_ value: JSONValue?) throws(KakinError) -> Int {
        guard case .int(let days)? = value, (1...90).contains(days) else {
            throw KakinError(.invalidExtension, "days must be a whole number from 1 to 90.")
        }
        return Int(days)
    }

    static func extensionReason(_ value: JSONValue?) throws(KakinError) -> ExtendReasonCode {
        switch value {
        case .string(let name)?:
            if let code = extendReasons[name] { return code }
        case .int(let code)?:
            if (0...3).contains(code) { return ExtendReasonCode(rawValue: Int(code)) }
        default:
            break
        }
        throw KakinError(.invalidExtension, "reason must be undeclared, customerSatisfaction, other or serviceIssueOrOutage (or Apple's code 0–3).")
    }

    func requestIdentifier(_ body: StrictObject, _ request: HTTPRequest) throws(KakinError) -> String {
        let given = try field { () throws(ConfigurationError) in
            try body.boundedString("requestIdentifier", lengthMax: Self.requestIdentifierLengthMax, required: false)
        }
        if let given { return given }
        if let key = try request.header("Idempotency-Key", lengthMax: Self.requestIdentifierLengthMax) { return key }
        return UUID().uuidString.lowercased()
    }

    /// Apple's refusals of an extension, as the catalogue's errors.
    static func extensionError(_ error: AppStoreServerAPIError) -> KakinError {
        switch error.errorCode {
        case AppStoreAPIErrorCode.subscriptionExtensionIneligible?:
            return KakinError(.extensionNotAllowed, detail: error.description)
        case AppStoreAPIErrorCode.familySharedSubscriptionExtensionIneligible?:
            return KakinError(.extensionNotAllowed, "A family-shared copy cannot be extended; extend the purchaser's subscription.",
                              detail: error.description)
        case AppStoreAPIErrorCode.subscriptionMaxExtension?:
            return KakinError(.extensionLimitReached, detail: error.description)
        case AppStoreAPIErrorCode.statusRequestNotFound?:
            return KakinError(.extensionRequestNotFound, detail: error.description)
        case AppStoreAPIErrorCode.originalTransactionIdNotFound?, AppStoreAPIErrorCode.transactionIdNotFound?:
            return KakinError(.transactionNotFound, "The App Store knows no subscription with this original transaction ID.", detail: error.description)
        default:
            return AppStoreConnection.kakinError(error)
        }
    }
}
