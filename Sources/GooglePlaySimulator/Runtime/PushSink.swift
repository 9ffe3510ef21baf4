import Foundation
import HTTPServer
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where RTDN pushes go: a URL over HTTP, or an HTTP handler in the same process (local mode hands Kakin's).
/// A push is the wrapped Pub/Sub body with `Authorization: Bearer <OIDC token>`; the answer's status decides
/// (102, 200, 201, 202, 204 acknowledge; anything else, or no answer (0), is redelivered).
public protocol PlayPushSink: Sendable {
    func push(body: [UInt8], authorization: String) async -> Int
}

/// POSTs each push to a URL, as Pub/Sub's push subscription does.
public struct HTTPPlayPushSink: PlayPushSink {
    public let url: URL
    public let timeoutSeconds: Double

    public init(url: URL, timeoutSeconds: Double = 10) {
        self.url = url
        self.timeoutSeconds = timeoutSeconds
    }

    public func push(body: [UInt8], authorization: String) async -> Int {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeoutSeconds)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        request.httpBody = Data(body)
        guard let (_, response) = try? await URLSession.shared.data(for: request), let http = response as? HTTPURLResponse else { return 0 }
        return http.statusCode
    }
}

/// Posts into a handler of this process at `path` (local mode: Kakin's `/v1/notifications/googleplay`).
public struct InProcessPlayPushSink: PlayPushSink {
    public let path: String
    public let handler: HTTPHandler

    public init(path: String, handler: @escaping HTTPHandler) {
        self.path = path
        self.handler = handler
    }

    public func push(body: [UInt8], authorization: String) async -> Int {
        let request = HTTPRequest(method: "POST", path: path, headers: ["Content-Type": "application/json", "Authorization": authorization],
                                  body: body, requestId: "req_play_simulator_push", remoteAddress: "127.0.0.1")
        return await handler(request).status
    }
}
