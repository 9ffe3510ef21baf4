import AppStoreClient
import Foundation
import KakinCore
import KakinStorage

/// Renewal-date extensions for support, through the App Store Server API (reference §6.8): one subscription, or
/// every active subscriber of a product, and how far a mass extension got. `days` 1–90, `reason` Apple's code 0–3
/// or its name. The request identifier is Apple's idempotency key: the same one answers the same and extends once.
public struct SubscriptionExtensions: Sendable {
    let store: any PurchaseRepository & SupportRepository
    let access: AppStoreAccess
    let ingest: Ingest
    let statusReads: CustomerStatusReads
    let apps: [String: AppSettings]
    let logger: Logger

    public static let reasons: [String: ExtendReasonCode] = [
        "undeclared": .undeclared, "customerSatisfaction": .customerSatisfaction, "other": .other, "serviceIssueOrOutage": .serviceIssueOrOutage,
    ]

    /// Extends one subscription: the path behind the JSON endpoint and the support desk's form. Asks the App Store,
    /// stores the extended copies at once (`IngestPath.refresh`; the RENEWAL_EXTENDED notification brings them too),
    /// records the extension in the customer's timeline with who asked (`actor`). Answers the endpoint's JSON.
    public func extend(_ otid: String, days: JSONValue?, reason: JSONValue?, requestIdentifier: String,
                       actor: String) async throws(KakinError) -> JSONValue {
        guard !otid.isEmpty, otid.utf8.count <= 64 else {
            throw KakinError(.invalidField, "The original transaction ID must be 1 to 64 characters.")
        }
        let request = ExtendRenewalDateRequest(extendByDays: try Self.days(days), extendReasonCode: try Self.reason(reason),
                                               requestIdentifier: requestIdentifier)
        let connection = try access.connection()
        let origin = try await store.subscriptionOrigin(originalTransactionId: otid)
        // The app the subscription was seen in, else each configured app in turn.
        let candidates = origin.flatMap { o in connection.clients.first { $0.bundleId == o.bundleId }.map { [$0] } } ?? connection.clients
        var lastError = KakinError(.transactionNotFound, "The App Store knows no subscription with this original transaction ID.")
        for entry in candidates {
            let environment = origin.map { AppStoreEnvironment(rawValue: $0.environment) }
            let answer: ExtendRenewalDateResponse
            do throws(AppStoreServerAPIError) {
                answer = try await entry.client.extendSubscriptionRenewalDate(originalTransactionId: otid, request, environment: environment)
            } catch {
                lastError = Self.error(error)
                if lastError.kind == .transactionNotFound { continue }
                throw lastError
            }
            return try await extended(otid, answer, request, client: entry.client, customerId: origin?.customerId, actor: actor)
        }
        throw lastError
    }

    func extended(_ otid: String, _ answer: ExtendRenewalDateResponse, _ request: ExtendRenewalDateRequest, client: AppStoreServerAPIClient,
                  customerId: String?, actor: String) async throws(KakinError) -> JSONValue {
        do {
            try await refresh(otid, client: client)
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
            json["customer"] = try await statusReads.status(customerId).json
        }
        return .object(json)
    }

    /// Ingests the subscription's latest transaction and renewal info as Get All Subscription Statuses has them.
    func refresh(_ otid: String, client: AppStoreServerAPIClient) async throws(KakinError) {
        let statuses: StatusResponse
        do {
            statuses = try await client.allSubscriptionStatuses(transactionId: otid)
        } catch {
            throw AppStoreConnection.kakinError(error)
        }
        for item in statuses.data.flatMap(\.lastTransactions) where item.originalTransactionId == otid {
            _ = try await ingest.apply(transaction: try ingest.verifyTransaction(item.signedTransactionInfo),
                                       renewalInfo: try ingest.verifyRenewalInfo(item.signedRenewalInfo, for: .refresh), path: .refresh)
        }
    }

    /// Extend a Subscription Renewal Date for All Active Subscribers: Apple works through the subscribers
    /// (RENEWAL_EXTENDED per subscriber, RENEWAL_EXTENSION when done). Answers Apple's request identifier.
    public func extendAll(bundleId: String, _ mass: MassExtendRenewalDateRequest) async throws(KakinError) -> String {
        let client = try client(bundleId)
        guard apps[bundleId]?.catalog[mass.productId]?.kind == .autoRenewable else {
            throw KakinError(.unknownProduct, "\(mass.productId) is not an auto-renewable subscription of \(bundleId).")
        }
        let id: String
        do throws(AppStoreServerAPIError) {
            id = try await client.extendRenewalDateForAllActiveSubscribers(mass)
        } catch {
            throw Self.error(error)
        }
        logger.info("renewal dates extended for all active subscribers", [
            "app.bundleId": .string(bundleId), "product.id": .string(mass.productId), "extension.requestIdentifier": .string(id),
            "extension.days": .int(Int64(mass.extendByDays)),
        ])
        return id
    }

    /// How far a mass extension got.
    public func extendAllStatus(bundleId: String, productId: String, requestIdentifier id: String) async throws(KakinError) -> MassExtendRenewalDateStatusResponse {
        let client = try client(bundleId)
        do throws(AppStoreServerAPIError) {
            return try await client.renewalDateExtensionStatus(requestIdentifier: id, productId: productId)
        } catch {
            throw Self.error(error)
        }
    }

    func client(_ bundleId: String) throws(KakinError) -> AppStoreServerAPIClient {
        guard apps[bundleId] != nil else { throw KakinError(.unknownApp) }
        return try access.connection().client(for: bundleId)
    }

    // MARK: Validation and errors

    public static func days(_ value: JSONValue?) throws(KakinError) -> Int {
        guard case .int(let days)? = value, (1...90).contains(days) else {
            throw KakinError(.invalidExtension, "days must be a whole number from 1 to 90.")
        }
        return Int(days)
    }

    public static func reason(_ value: JSONValue?) throws(KakinError) -> ExtendReasonCode {
        switch value {
        case .string(let name)?:
            if let code = reasons[name] { return code }
        case .int(let code)?:
            if (0...3).contains(code) { return ExtendReasonCode(rawValue: Int(code)) }
        default:
            break
        }
        throw KakinError(.invalidExtension, "reason must be undeclared, customerSatisfaction, other or serviceIssueOrOutage (or Apple's code 0–3).")
    }

    /// Apple's refusals of an extension, as the catalogue's errors.
    static func error(_ error: AppStoreServerAPIError) -> KakinError {
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
