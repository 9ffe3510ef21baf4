import Foundation
import HTTPServer
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where the simulator sends Notifications V2: a URL over HTTP (`--notify`), or Kakin in the same process
/// (local mode). The sink reports the attempt as Apple's `sendAttemptResult`; a failed attempt is retried
/// on Apple's schedule in simulated time.
public protocol NotificationSink: Sendable {
    /// Delivers `{"signedPayload": …}` once.
    func deliver(signedPayload: String) async -> SendAttemptResult
}

extension SendAttemptResult {
    /// Apple counts HTTP 200–206 as delivered; every other status asks for a retry.
    public static func forHTTPStatus(_ status: Int) -> SendAttemptResult {
        (200...206).contains(status) ? .success : .unsuccessfulHTTPResponseCode
    }

    /// The JSON body Apple posts.
    public static func requestBody(signedPayload: String) -> [UInt8] {
        Array(#"{"signedPayload":""#.utf8) + Array(signedPayload.utf8) + Array(#""}"#.utf8)
    }
}

/// POSTs each notification to a URL, as the App Store posts to the URL set in App Store Connect.
public struct HTTPNotificationSink: NotificationSink {
    public let url: URL
    public let timeoutSeconds: Double

    /// - Parameter timeoutSeconds: how long one attempt may take (Apple's is unconfirmed; reply fast).
    public init(url: URL, timeoutSeconds: Double = 5) {
        self.url = url
        self.timeoutSeconds = timeoutSeconds
    }

    public func deliver(signedPayload: String) async -> SendAttemptResult {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeoutSeconds)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(SendAttemptResult.requestBody(signedPayload: signedPayload))
        do {
            let (_, response) = try await URLSession.shared.data(for: request)
            guard let http = response as? HTTPURLResponse else { return .invalidResponse }
            return .forHTTPStatus(http.statusCode)
        } catch let error as URLError {
            return Self.result(for: error.code)
        } catch {
            return .other
        }
    }

    static func result(for code: URLError.Code) -> SendAttemptResult {
        switch code {
        case .timedOut: return .timedOut
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
             .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            return .tlsIssue
        case .httpTooManyRedirects, .redirectToNonExistentLocation: return .circularRedirect
        case .networkConnectionLost: return .prematureClose
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet: return .noResponse
        case .badServerResponse, .cannotParseResponse: return .invalidResponse
        default: return .other
        }
    }
}

/// Delivers into an HTTP handler of the same process, as a POST of Apple's body to `path`: local mode
/// hands Kakin's own request handler here, so notifications arrive without a socket.
public struct InProcessNotificationSink: NotificationSink {
    public let path: String
    public let handler: HTTPHandler

    /// - Parameters:
    ///   - path: the notification endpoint as the handler routes it.
    ///   - handler: answers like the real server; 200–206 counts as delivered.
    public init(path: String = "/v1/notifications/appstore", handler: @escaping HTTPHandler) {
        self.path = path
        self.handler = handler
    }

    public func deliver(signedPayload: String) async -> SendAttemptResult {
        let request = HTTPRequest(method: "POST", path: path, headers: ["Content-Type": "application/json"],
                                  body: SendAttemptResult.requestBody(signedPayload: signedPayload), requestId: "req_simulator_notification",
                                  remoteAddress: "127.0.0.1")
        return .forHTTPStatus(await handler(request).status)
    }
}
