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

    /// `POST /v1/notifications/googleplay`: a Pub/Sub push of a Play RTDN. 401 `push_token_invalid` for a bad bearer
    /// (nothing stored), 422 for a package this server does not serve, 200 once stored (the worker applies it after).
    func postGooglePlayNotification(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        try await services.googlePlayNotifications.receive(authorization: c.request.headers["Authorization"], body: .object(body.object))
        return .json([:], status: 200)
    }
}
