import HTTPServer
import KakinCore
import KakinService

/// Apple's realtime calls to the app's server (Retention Messaging API): thin, the use case is
/// `KakinService.RetentionMessages`.
extension KakinApp {
    func registerAppleRealtimeRoutes(_ r: inout RouteTable) {
        // Apple's signed request is the credential (like a notification's).
        r.add("POST", "/v1/apple/retention-message/{bundleId}", .open) { [unowned self] c throws(KakinError) in try await postRetentionMessage(c) }
    }

    /// `POST /v1/apple/retention-message/{bundleId}` `{"signedPayload"}` → 200 with Apple's `RealtimeResponseBody`
    /// (`{}`: nothing chosen, the App Store shows its default message); 400 when the request fails verification.
    func postRetentionMessage(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        let jws = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["signedPayload"])
            return try body.boundedString("signedPayload", lengthMax: Self.signedPayloadBytesMax)!
        }
        let answer = try await services.retentionMessages.answer(bundleId: c["bundleId"], signedPayload: jws)
        return .json(answer.body, status: 200)
    }
}
