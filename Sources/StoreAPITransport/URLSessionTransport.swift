import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The real transport: one ephemeral URLSession (no cookies, no cache). Bodies arrive through a delegate so
/// that an answer over the limit is cancelled as it arrives instead of being buffered whole, and each attempt
/// has a deadline for the whole exchange (`URLRequest.timeoutInterval` only bounds the gaps between packets).
/// On Linux URLSession trusts the system CA store only, which is what Apple's and Google's hosts need; local fakes and
/// the simulator are plain HTTP on loopback. Redirects are not followed.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let exchanges: ExchangeDelegate

    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let exchanges = ExchangeDelegate()
        self.exchanges = exchanges
        session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    public func send(
        _ request: HTTPClientRequest, responseBytesMax: Int
    ) async throws(HTTPTransportError) -> HTTPClientResponse {
        guard let url = URL(string: request.url) else { throw .connectionFailed(reason: "invalid URL") }
        let timeoutMs = min(max(1, request.timeoutMs), Int64(Int32.max))
        var urlRequest = URLRequest(
            url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: Double(timeoutMs) / 1000)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
        if let body = request.body { urlRequest.httpBody = Data(body) }

        let task = session.dataTask(with: urlRequest)
        let id = task.taskIdentifier
        let exchanges = self.exchanges
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ExchangeDelegate.Outcome, Never>) in
                exchanges.begin(id, bytesMax: max(0, responseBytesMax), continuation: continuation)
                exchanges.attach(id, deadline: Task {
                    guard (try? await Task.sleep(nanoseconds: UInt64(timeoutMs) * 1_000_000)) != nil else { return }
                    if exchanges.fail(id, with: .timedOut) { task.cancel() }
                })
                task.resume()
                // The cancellation handler may have run before `begin` registered the exchange.
                if Task.isCancelled, exchanges.fail(id, with: .cancelled) { task.cancel() }
            }
        } onCancel: {
            if exchanges.fail(id, with: .cancelled) { task.cancel() }
        }
        return try result.get()
    }
}

/// Per-task state of the session's exchanges, keyed by task identifier. Every exchange ends in
/// `didCompleteWithError`, which resumes its continuation exactly once.
final class ExchangeDelegate: NSObject, URLSessionDataDelegate, Sendable {
    typealias Outcome = Result<HTTPClientResponse, HTTPTransportError>

    private struct Exchange {
        var continuation: CheckedContinuation<Outcome, Never>
        var bytesMax: Int
        var deadline: Task<Void, Never>? = nil
        var body: [UInt8] = []
        /// Set by the deadline, cancellation or the size limit before cancelling the task: it wins over
        /// the `URLError.cancelled` that the cancellation produces.
        var failure: HTTPTransportError? = nil
    }

    private let exchanges = Mutex<[Int: Exchange]>([:])

    func begin(_ id: Int, bytesMax: Int, continuation: CheckedContinuation<Outcome, Never>) {
        exchanges.withLock { $0[id] = Exchange(continuation: continuation, bytesMax: bytesMax) }
    }

    /// Keeps the attempt's deadline so that the end of the exchange cancels it.
    func attach(_ id: Int, deadline: Task<Void, Never>) {
        let attached = exchanges.withLock { all -> Bool in
            guard all[id] != nil else { return false }
            all[id]?.deadline = deadline
            return true
        }
        if !attached { deadline.cancel() }
    }

    /// Records why the exchange is being abandoned. Returns false when it already ended or already failed.
    func fail(_ id: Int, with failure: HTTPTransportError) -> Bool {
        exchanges.withLock { all in
            guard all[id] != nil, all[id]?.failure == nil else { return false }
            all[id]?.failure = failure
            return true
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let id = dataTask.taskIdentifier
        let announced = response.expectedContentLength
        let tooLarge = exchanges.withLock { all -> Bool in
            guard let bytesMax = all[id]?.bytesMax else { return false }
            if announced > Int64(bytesMax) {
                if all[id]?.failure == nil { all[id]?.failure = .responseTooLarge }
                return true
            }
            if announced > 0 { all[id]?.body.reserveCapacity(Int(announced)) }
            return false
        }
        completionHandler(tooLarge ? .cancel : .allow)
    }

    /// Redirects are answered as they are (a 3xx error), never followed: following one would send the bearer
    /// token wherever the `Location` points. Neither Apple's API nor Google's redirects.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let id = dataTask.taskIdentifier
        let overLimit = exchanges.withLock { all -> Bool in
            guard var exchange = all[id], exchange.failure == nil else { return false }
            all[id] = nil  // avoid a copy of the body while appending
            if exchange.body.count + data.count > exchange.bytesMax {
                exchange.failure = .responseTooLarge
                exchange.body = []
                all[id] = exchange
                return true
            }
            exchange.body.append(contentsOf: data)
            all[id] = exchange
            return false
        }
        if overLimit { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let exchange = exchanges.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        exchange.deadline?.cancel()
        let outcome: Outcome
        if let failure = exchange.failure {
            outcome = .failure(failure)
        } else if let error {
            outcome = .failure(Self.transportError(error))
        } else if let http = task.response as? HTTPURLResponse {
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            outcome = .success(HTTPClientResponse(status: http.statusCode, headers: headers, body: exchange.body))
        } else {
            outcome = .failure(.connectionFailed(reason: "no HTTP response"))
        }
        exchange.continuation.resume(returning: outcome)
    }

    /// A short reason without the URL's query or any header.
    static func transportError(_ error: any Error) -> HTTPTransportError {
        guard let urlError = error as? URLError else { return .connectionFailed(reason: "network error") }
        switch urlError.code {
        case .timedOut: return .timedOut
        case .cancelled: return .cancelled
        case .cannotConnectToHost: return .connectionFailed(reason: "cannot connect to host")
        case .cannotFindHost, .dnsLookupFailed: return .connectionFailed(reason: "cannot find host")
        case .networkConnectionLost: return .connectionFailed(reason: "connection lost")
        case .notConnectedToInternet: return .connectionFailed(reason: "not connected")
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid:
            return .connectionFailed(reason: "TLS failure")
        case .badServerResponse: return .connectionFailed(reason: "bad server response")
        default: return .connectionFailed(reason: "URLError \(urlError.code.rawValue)")
        }
    }
}
