import AppStoreClient
import AppStoreSecurity
import KakinCore
import KakinCrypto
import KakinStorage
import StoreAPITransport
import Synchronization

/// Kakin's use of the App Store Server API: fetching a transaction by id, restoring a customer's history,
/// and recovering missed notifications from Notification History. One client per configured app (the
/// API token names the bundle). Everything it returns is verified like any other signed data.
public struct AppStoreConnection: Sendable {
    /// Clients in the config's app order, with the bundle each serves.
    public let clients: [(bundleId: String, environments: Set<AppStoreEnvironment>, client: AppStoreServerAPIClient)]

    /// - Parameter pacingClock: the real-time clock that spaces calls to Apple at its published rate limits (nil: not paced).
    public init(api: AppStoreServerAPISettings, apps: [AppSettings], clock: any Clock,
         transport: any HTTPTransport = URLSessionTransport(), pacingClock: (any Clock)? = nil) throws(KakinError) {
        let key: P256PrivateKey
        do {
            key = try P256PrivateKey(pemPKCS8: api.privateKeyPEM)
        } catch {
            throw KakinError(.invalidConfiguration, "appStoreServerAPI.privateKeyFile is not a PKCS#8 P-256 key (.p8).")
        }
        var clients: [(String, Set<AppStoreEnvironment>, AppStoreServerAPIClient)] = []
        for app in apps {
            let server: AppStoreServerAPIConfiguration.Server
            if let base = api.baseURL {
                server = .baseURL(base, environment: app.environments.contains(.production) ? .production : .sandbox)
            } else {
                server = app.environments.contains(.production) ? .apple : .appleSandbox
            }
            let configuration = AppStoreServerAPIConfiguration(issuerId: api.issuerId, keyId: api.keyId, privateKey: key,
                                                               bundleId: app.bundleId, server: server)
            do {
                clients.append((app.bundleId, app.environments,
                                try AppStoreServerAPIClient(configuration: configuration, clock: clock, transport: transport,
                                                            pacingClock: pacingClock)))
            } catch {
                throw KakinError(.invalidConfiguration, "appStoreServerAPI: \(error.reason).")
            }
        }
        self.clients = clients
    }

    /// The catalogue error for a failed API call. Never includes the token.
    public static func kakinError(_ error: AppStoreServerAPIError) -> KakinError {
        if error.kind == .httpError, error.httpStatus == 404 {
            return KakinError(.transactionNotFound, detail: error.description)
        }
        if error.kind == .httpError, let status = error.httpStatus, (400..<500).contains(status), status != 429 {
            return KakinError(.invalidField, "The App Store refused the id (\(error.errorCode.map(String.init) ?? "HTTP \(status)")).",
                              detail: error.description)
        }
        var unavailable = KakinError(.appStoreAPIUnavailable, detail: error.description)
        unavailable.retryAfterMs = error.retryAfterMs
        return unavailable
    }

    /// Get Transaction Info from the first app that knows the id.
    public func signedTransaction(_ transactionId: String) async throws(KakinError) -> String {
        var lastError = KakinError(.transactionNotFound)
        for entry in clients {
            do {
                return try await entry.client.transactionInfo(transactionId: transactionId).signedTransactionInfo
            } catch {
                lastError = Self.kakinError(error)
                if lastError.kind != .transactionNotFound { throw lastError }
            }
        }
        throw lastError
    }

    /// A customer's whole history for one of their transaction ids: every transaction (all pages) and the
    /// latest transaction and renewal info of each subscription.
    public func history(for transactionId: String) async throws(KakinError) -> (transactions: [String], statuses: [LastTransactionsItem]) {
        var lastError = KakinError(.transactionNotFound)
        for entry in clients {
            do {
                let history = try await entry.client.allTransactionHistory(transactionId: transactionId, pagesMax: AppStoreLimits.historyPagesMax)
                let statuses = try await entry.client.allSubscriptionStatuses(transactionId: transactionId)
                return (history.signedTransactions, statuses.data.flatMap(\.lastTransactions))
            } catch {
                lastError = Self.kakinError(error)
                if lastError.kind != .transactionNotFound { throw lastError }
            }
        }
        throw lastError
    }
}

public enum AppStoreLimits {
    /// How far back recovery reads when it has never run (Apple keeps 30 days in Sandbox, 180 in Production).
    public static let recoveryFirstLookBackMs: Int64 = 30 * 86_400_000
    /// Read again this much before the last run's end: history entries can appear late.
    public static let recoveryOverlapMs: Int64 = 3_600_000
}

extension AppStoreConnection {
    /// The client whose token names this app.
    public func client(for bundleId: String) throws(KakinError) -> AppStoreServerAPIClient {
        guard let entry = clients.first(where: { $0.bundleId == bundleId }) else {
            throw KakinError(.appStoreAPINotConfigured, "The App Store Server API is not configured for \(bundleId).")
        }
        return entry.client
    }
}

/// The App Store Server API once it is configured (at start, or in local mode once the simulator's port is known),
/// and the key offers are signed with. Shared by the use cases that call Apple.
public final class AppStoreAccess: Sendable {
    private let current = Mutex<AppStoreConnection?>(nil)
    private let offerSigner = Mutex<OfferSigner?>(nil)

    public init() {}

    /// The connection, or 503-style `app_store_api_not_configured`.
    public func connection() throws(KakinError) -> AppStoreConnection {
        guard let c = current.withLock({ $0 }) else { throw KakinError(.appStoreAPINotConfigured) }
        return c
    }

    public var isConfigured: Bool { current.withLock { $0 != nil } }

    /// Whether linking a purchase of this app should tell Apple the customer's token.
    public func setsAppAccountTokens(bundleId: String) -> Bool {
        current.withLock { $0?.clients.contains { $0.bundleId == bundleId } ?? false }
    }

    public func connect(_ c: AppStoreConnection) { current.withLock { $0 = c } }

    /// Replaces the connection (nil: not configured, as if Apple could not be reached); answers the one it replaced.
    @discardableResult
    public func swap(_ c: AppStoreConnection?) -> AppStoreConnection? {
        current.withLock { old in defer { old = c }; return old }
    }

    /// Uses the configured `offerSigning` key (its issuer defaulting to `appStoreServerAPI`'s).
    public func configureOfferSigning(_ signing: OfferSigningSettings, apiIssuerId: String?) throws(KakinError) {
        let signer = try OfferSigner(keyId: signing.keyId, privateKeyPEM: signing.privateKeyPEM, issuerId: signing.issuerId ?? apiIssuerId,
                                     configured: true, keyName: "offerSigning")
        offerSigner.withLock { $0 = signer }
    }

    /// Signs offers with the App Store Server API's key unless `offerSigning` named another.
    public func useAPIKeyForOffers(_ api: AppStoreServerAPISettings) throws(KakinError) {
        guard offerSigner.withLock({ $0?.configured }) != true else { return }
        let signer = try OfferSigner(keyId: api.keyId, privateKeyPEM: api.privateKeyPEM, issuerId: api.issuerId, configured: false,
                                     keyName: "appStoreServerAPI")
        offerSigner.withLock { $0 = signer }
    }

    func signer(forJWS: Bool) throws(KakinError) -> OfferSigner {
        guard let signer = offerSigner.withLock({ $0 }) else { throw KakinError(.offerSigningNotConfigured) }
        if forJWS, signer.issuerId == nil {
            throw KakinError(.offerSigningNotConfigured, "JWS offer signatures need an issuer ID: set offerSigning.issuerId.")
        }
        return signer
    }
}

/// The In-App Purchase key offers are signed with: `offerSigning` when configured, else the App Store Server
/// API's key (in local mode, the simulator's generated key, so the simulator accepts what Kakin signs).
struct OfferSigner: Sendable {
    let key: P256PrivateKey
    let keyId: String
    /// Needed for JWS signatures only.
    let issuerId: String?
    /// Came from `offerSigning`: connecting the App Store Server API later does not replace it.
    let configured: Bool

    init(keyId: String, privateKeyPEM: String, issuerId: String?, configured: Bool, keyName: String) throws(KakinError) {
        do {
            key = try P256PrivateKey(pemPKCS8: privateKeyPEM)
        } catch {
            throw KakinError(.invalidConfiguration, "\(keyName).privateKeyFile is not a PKCS#8 P-256 key (.p8).")
        }
        self.keyId = keyId
        self.issuerId = issuerId
        self.configured = configured
    }
}
