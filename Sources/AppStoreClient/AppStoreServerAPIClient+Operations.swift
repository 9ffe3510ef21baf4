import KakinCore

/// The App Store Server API calls that change something at Apple or read app-level data (reference
/// §6.7–6.9). Calls that name a transaction go to the given environment's host, or (with `.apple` and no
/// environment) to production and then sandbox when production does not know the ID, like the lookups.
extension AppStoreServerAPIClient {
    // MARK: Consumption information

    /// Send Consumption Information (answers a CONSUMPTION_REQUEST; Apple wants it within 12 hours).
    /// Apple answers 202 with no body.
    /// - Parameters:
    ///   - transactionId: the `transactionId` of the CONSUMPTION_REQUEST.
    ///   - environment: the notification's environment; nil to look the transaction up.
    public func sendConsumptionInformation(
        transactionId: String, _ request: ConsumptionRequest, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "PUT", path: ["inApps", "v2", "transactions", "consumption", transactionId], body: request.json)
        _ = try await send(call, routing: Self.routing(environment))
    }

    /// The deprecated V1 Send Consumption Information, whose body also carries the customer's lifetime
    /// figures and account age.
    public func sendConsumptionData(
        transactionId: String, _ request: ConsumptionRequestV1, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "transactions", "consumption", transactionId], body: request.json)
        _ = try await send(call, routing: Self.routing(environment))
    }

    // MARK: Renewal-date extensions

    /// Extend a Subscription Renewal Date: 1–90 days, at most twice in 365 days; refused (403) in a free
    /// offer period, billing retry, grace period, after expiry, and for family-shared copies.
    public func extendSubscriptionRenewalDate(
        originalTransactionId: String, _ request: ExtendRenewalDateRequest, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> ExtendRenewalDateResponse {
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "subscriptions", "extend", originalTransactionId], body: request.json)
        return try await perform(call, routing: Self.routing(environment)) { body, _ throws(ResponseShapeError) in
            try ExtendRenewalDateResponse(body)
        }
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers of a product. Apple may take hours;
    /// poll `renewalDateExtensionStatus` or watch RENEWAL_EXTENSION notifications.
    /// - Returns: the request's `requestIdentifier`.
    public func extendRenewalDateForAllActiveSubscribers(
        _ request: MassExtendRenewalDateRequest, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> String {
        let call = try APICall(method: "POST", path: ["inApps", "v1", "subscriptions", "extend", "mass"], body: request.json)
        return try await perform(call, routing: environment.map(Routing.environment) ?? .primary) { body, _ throws(ResponseShapeError) in
            try body.string("requestIdentifier")
        }
    }

    /// Get Status of Subscription Renewal Date Extensions (404 4040009 for an unknown request).
    public func renewalDateExtensionStatus(
        requestIdentifier: String, productId: String, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) -> MassExtendRenewalDateStatusResponse {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "subscriptions", "extend", "mass", productId, requestIdentifier])
        return try await perform(call, routing: environment.map(Routing.environment) ?? .primary) { body, _ throws(ResponseShapeError) in
            try MassExtendRenewalDateStatusResponse(body)
        }
    }

    // MARK: App account token, app transaction

    /// Set App Account Token: attaches (or replaces) the app's account UUID on a purchase made outside the
    /// app. Needs an original transaction ID (4000187), no family-shared copy (4000185), a UUID (4000183).
    public func setAppAccountToken(
        originalTransactionId: String, appAccountToken: String, environment: AppStoreEnvironment? = nil
    ) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "transactions", originalTransactionId, "appAccountToken"],
                               body: ["appAccountToken": .string(appAccountToken)])
        _ = try await send(call, routing: Self.routing(environment))
    }

    /// Get App Transaction Info: the customer's signed app transaction (404 4040019 when there is none).
    /// - Parameter transactionId: any transaction ID of the customer (or their `appTransactionId`).
    public func appTransactionInfo(transactionId: String) async throws(AppStoreServerAPIError) -> AppTransactionInfoResponse {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "transactions", "appTransactions", transactionId])
        return try await perform(call, routing: .lookup) { body, host throws(ResponseShapeError) in
            AppTransactionInfoResponse(signedAppTransactionInfo: try body.string("signedAppTransactionInfo"),
                                       answeringEnvironment: host.environment)
        }
    }

    static func routing(_ environment: AppStoreEnvironment?) -> Routing {
        environment.map(Routing.environment) ?? .lookup
    }
}
