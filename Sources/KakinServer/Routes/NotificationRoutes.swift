import HTTPServer
import KakinCore
import KakinService

extension KakinApp {
    /// `POST /v1/notifications/appstore`: 200 once the notification is durably stored (the inbox applies it after).
    func postNotification(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        let jws = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["signedPayload"])
            return try body.boundedString("signedPayload", lengthMax: Self.signedPayloadBytesMax)!
        }
        try await services.notifications.receive(jws, source: "push")
        return .json([:], status: 200)
    }
}
