import KakinCore

/// The External Purchase Server API (same hosts, same JWT as the App Store Server API): reports of external
/// purchase tokens and their transactions. Each call goes to the host of the token's environment — sandbox
/// tokens (`externalPurchaseId` beginning `SANDBOX`) only to the sandbox URL, as Apple requires.
extension AppStoreServerAPIClient {
    /// Send External Purchase Report: `PUT /externalPurchase/v1/reports`. 429, 5xx and transport failures are
    /// retried like every call; a 400 is not.
    /// - Returns: the `requestIdentifier` Apple confirmed (`SendReportSuccessResponse`).
    /// - Throws: `AppStoreServerAPIError`; `isReportRejection` with `reportErrors` when Apple refused the report's
    ///   content (nothing of it was received: fix and resend with the same `requestIdentifier`), a 400 without
    ///   errors for a duplicate or malformed request.
    public func sendExternalPurchaseReport(_ report: ExternalPurchaseReport) async throws(AppStoreServerAPIError) -> String {
        let call = try APICall(method: "PUT", path: ["externalPurchase", "v1", "reports"], body: report.json)
        return try await perform(call, routing: .environment(Self.environment(ofExternalPurchaseId: report.externalPurchaseId))) {
            body, _ throws(ResponseShapeError) in
            try body.string("requestIdentifier")
        }
    }

    /// Retrieve External Purchase Report: `GET /externalPurchase/v1/reports/{requestIdentifier}` — what Apple holds
    /// of a report it accepted (`RetrieveReportSuccessResponse.report`).
    /// - Parameter environment: the environment of the report's token.
    /// - Returns: nil when Apple knows no accepted report with this identifier (400 `NotFoundError`).
    public func retrieveExternalPurchaseReport(
        requestIdentifier: String, environment: AppStoreEnvironment
    ) async throws(AppStoreServerAPIError) -> ExternalPurchaseReport? {
        let call = try APICall(method: "GET", path: ["externalPurchase", "v1", "reports", requestIdentifier])
        do {
            return try await perform(call, routing: .environment(environment)) { body, _ throws(ResponseShapeError) in
                guard let report = body.fields["report"] else { throw ResponseShapeError(reason: "report is missing") }
                do {
                    return try ExternalPurchaseReport(json: report)
                } catch {
                    throw ResponseShapeError(reason: "report: \(error)")
                }
            }
        } catch {
            if error.httpStatus == 400, error.errorCode == Self.notFoundErrorCode || error.reportErrors.contains(where: { $0.errorCode == Self.notFoundErrorCode }) {
                return nil
            }
            throw error
        }
    }

    /// `NotFoundError`'s `errorCode`.
    static let notFoundErrorCode = 3

    /// Apple: sandbox tokens' `externalPurchaseId` begins with `SANDBOX`.
    public static func environment(ofExternalPurchaseId id: String) -> AppStoreEnvironment {
        id.hasPrefix("SANDBOX") ? .sandbox : .production
    }

    /// The `errors` of a `SendReportErrorResponse`, bounded; entries that are not error objects are skipped.
    static func reportErrors(_ value: JSONValue?) -> [ExternalPurchaseReportError] {
        guard let list = value?.arrayValue else { return [] }
        return list.prefix(reportErrorsMax).compactMap { try? ExternalPurchaseReportError(json: $0) }.map { e in
            var e = e
            e.errorMessage = String(e.errorMessage.prefix(errorMessageCharactersMax))
            return e
        }
    }
}
