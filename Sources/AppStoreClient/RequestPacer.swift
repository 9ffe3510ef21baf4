import KakinCore
import Synchronization

/// Apple's published rate limits of the App Store Server API ("Identifying rate limits"): requests per second per app
/// in production, enforced over an hour; the sandbox allows 10 % of them. Endpoints not listed are not paced.
public enum AppStoreRateLimits {
    /// Requests per second in production, by endpoint (the names Apple's table uses).
    public static let productionPerSecond: [String: Int] = [
        "Get Transaction Info": 50, "Get Transaction History": 50, "Get All Subscription Statuses": 50,
        "Send Consumption Information": 50, "Get Notification History": 50, "Finish Transaction": 50,
        "Get App Transaction Info": 50, "Extend a Subscription Renewal Date": 20, "Set App Account Token": 20,
        "Look Up Order ID": 10, "Get Refund History": 10, "Extend Subscription Renewal Dates for All Active Subscribers": 1,
        "Request a Test Notification": 1, "Get Test Notification Status": 1,
    ]

    /// The sandbox's share of the production limits, in percent.
    public static let sandboxPercent = 10

    /// Which of Apple's rate-limited endpoints a call is (nil: not paced).
    static func endpoint(method: String, path: String) -> String? {
        let s = path.split(separator: "/").map(String.init)
        guard s.count >= 3, s[0] == "inApps" else { return nil }
        switch (method, s[1], s[2]) {
        case ("GET", "v1", "transactions"): return s.count >= 5 && s[3] == "appTransactions" ? "Get App Transaction Info" : "Get Transaction Info"
        case ("POST", "v1", "transactions"): return "Finish Transaction"
        case ("PUT", "v1", "transactions") where s.last == "appAccountToken": return "Set App Account Token"
        case ("PUT", _, "transactions"): return "Send Consumption Information"
        case ("GET", _, "history"): return "Get Transaction History"
        case ("GET", "v1", "subscriptions"): return s.count >= 4 && s[3] == "extend" ? nil : "Get All Subscription Statuses"
        case ("PUT", "v1", "subscriptions"): return "Extend a Subscription Renewal Date"
        case ("POST", "v1", "subscriptions"): return "Extend Subscription Renewal Dates for All Active Subscribers"
        case ("GET", "v1", "lookup"): return "Look Up Order ID"
        case ("GET", _, "refund"): return "Get Refund History"
        case ("POST", "v1", "notifications"): return s.count >= 4 && s[3] == "test" ? "Request a Test Notification" : "Get Notification History"
        case ("GET", "v1", "notifications"): return "Get Test Notification Status"
        default: return nil
        }
    }

    /// The smallest spacing of two calls to `endpoint` in `environment`, in milliseconds.
    static func intervalMs(endpoint: String, environment: AppStoreEnvironment) -> Int64? {
        guard let perSecond = productionPerSecond[endpoint] else { return nil }
        let percent = environment == .production ? 100 : sandboxPercent
        return (100_000 + Int64(perSecond * percent) - 1) / Int64(perSecond * percent)
    }
}

/// Spaces one app's calls to each endpoint at Apple's published rate, on a real-time clock, whatever task makes them:
/// a restore, the notification history recovery and an import share one budget per endpoint. A call reserves the next
/// free slot and waits for it; a 429 that still comes is handled by the client's `Retry-After` wait.
final class RequestPacer: Sendable {
    let clock: any Clock
    private let next = Mutex<[String: Int64]>([:])

    init(clock: any Clock) { self.clock = clock }

    /// Reserves a slot for a call and answers how long to wait for it (0: now).
    func reserve(method: String, path: String, environment: AppStoreEnvironment) -> Int64 {
        guard let endpoint = AppStoreRateLimits.endpoint(method: method, path: path),
              let interval = AppStoreRateLimits.intervalMs(endpoint: endpoint, environment: environment) else { return 0 }
        let now = clock.nowMs()
        let key = endpoint + "|" + environment.rawValue
        return next.withLock { slots in
            let slot = max(now, slots[key] ?? now)
            slots[key] = slot + interval
            return slot - now
        }
    }
}
