import Foundation
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
