import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinKit

/// StoreKit's role played against Kakin's App Store simulator (`/simulator/v1/…`, mounted by `kakin serve`
/// in local mode or run by `kakin simulator serve`), for `kakin app`, QA scripts and tests:
/// - purchases go to `POST /simulator/v1/purchases` with the customer's `appAccountToken` (and a promotional
///   offer's signature in the shape the simulator checks);
/// - the device keeps its unfinished transactions in `<stateDirectory>/device.json` until they are
///   finished, so separate processes on one directory are one device across launches;
/// - updates (renewals, refunds, revocations, purchases made elsewhere) are pulled from
///   `GET /simulator/v1/accounts/{appAccountToken}/transactions?after=…`: every signed copy the device has not
///   seen becomes an unfinished transaction and an update.
///
/// - a transaction the server finished (App Store Server API Finish Transaction) leaves the device's queue,
///   as StoreKit's `Transaction.unfinished` follows the App Store: read from
///   `GET /simulator/v1/accounts/{appAccountToken}/finished?after=…`, and never queued again when an update
///   says `finished`.
///
/// A device that never read the updates starts at the App Store's present, like a new phone: it is not
/// handed the account's finished history (restore asks Kakin for that).
public actor SimulatedStore: Store {
    let simulator: URL
    let file: DeviceStateFile
    let session: URLSession
    let pollInterval: Duration
    var state: DeviceState

    static let pageLimit = 200
    static let pagesMax = 50

    /// - Parameters:
    ///   - simulator: the simulator's root (`http://127.0.0.1:8080` in local mode: `/simulator/v1/…` below it).
    ///   - stateDirectory: where the device keeps what survives a relaunch.
    ///   - account: the simulated Apple account (the customer's `appAccountToken`); remembered by the device.
    ///   - pollInterval: how often `updates()` asks the simulator for news.
    public init(simulator: URL, stateDirectory: URL, account: UUID? = nil, pollInterval: Duration = .seconds(5),
                session: URLSession? = nil) throws(KakinKitError) {
        self.simulator = simulator
        file = DeviceStateFile(directory: stateDirectory)
        self.pollInterval = pollInterval
        self.session = session ?? URLSession(configuration: .ephemeral)
        var loaded = try file.load()
        if let account { loaded.account = account.uuidString.lowercased() }
        state = loaded
    }

    /// The Apple account this device is signed in to, if it knows one.
    public var account: UUID? { state.account.flatMap(UUID.init(uuidString:)) }

    // MARK: Store

    public nonisolated func updates() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                for t in await self.state.unfinished { continuation.yield(t) }
                while !Task.isCancelled {
                    for t in await self.pull() { continuation.yield(t) }
                    try? await Task.sleep(for: self.pollInterval)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The device's queue, after reading what the App Store has for it (best effort: offline, the queue alone).
    public func unfinished() async -> [StoreTransaction] {
        _ = await pull()
        return state.unfinished
    }

    public func currentEntitlements() async -> [StoreTransaction] {
        guard let account = state.account else { return [] }
        var all: [(seq: Int64, t: StoreTransaction)] = []
        var after: Int64 = 0
        var nowMs: Int64 = 0
        for _ in 0..<Self.pagesMax {
            guard let page = try? await updatesPage(account: account, after: after) else { return [] }
            nowMs = page.nowMs
            all += page.transactions.compactMap { item in Self.decode(item.signedTransaction).map { (item.seq, $0.transaction) } }
            after = page.transactions.last?.seq ?? after
            if !page.hasMore { break }
        }
        let now = Date(timeIntervalSince1970: TimeInterval(nowMs) / 1000)
        var latest: [String: StoreTransaction] = [:]
        for (_, t) in all.sorted(by: { $0.seq < $1.seq }) where t.productType != .consumable {
            // The newest copy per instance (one original per subscription; a non-consumable is its own).
            latest[t.productType == .autoRenewable ? t.originalID : t.id] = t
        }
        return latest.values.filter { t in
            guard t.revocationDate == nil else { return false }
            if t.productType == .autoRenewable { return (t.expirationDate ?? .distantPast) > now }
            return true
        }.sorted { $0.id < $1.id }
    }

    public func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct] {
        struct Catalog: Decodable {
            struct Item: Decodable {
                var productId: String
                var type: String
                var displayName: String?
                var price: Double?
                var currency: String?
            }
            var products: [Item]
        }
        let (status, data) = try await http("GET", "/simulator/v1/products")
        guard status == 200, let catalog = try? JSONDecoder().decode(Catalog.self, from: data) else { throw Self.refusal(status, data) }
        let wanted = Set(ids)
        return catalog.products.filter { wanted.contains($0.productId) }.map { p in
            let price = p.price.map { ($0 == $0.rounded() ? String(Int64($0)) : String($0)) + " " + (p.currency ?? "") } ?? ""
            return StoreProduct(id: p.productId, type: Self.type(contractName: p.type), displayName: p.displayName ?? p.productId, displayPrice: price)
        }
    }

    public func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult {
        let token = options.appAccountToken.uuidString.lowercased()
        if state.account != token {
            // Signing in to another Apple account: its updates start now.
            state.account = token
            state.cursor = nil
        }
        guard state.unfinished.count < DeviceState.unfinishedMax else {
            throw KakinKitError(.storeFailed, message: "This device holds \(DeviceState.unfinishedMax) unfinished transactions; finish them first.")
        }
        await startReadingIfNew()
        var body: [String: Any] = ["productId": productID, "appAccountToken": token]
        if options.quantity > 1 { body["quantity"] = options.quantity }
        switch options.offer {
        case .legacy(let offerID, let keyID, let nonce, let signature, let timestamp):
            body["offer"] = ["type": "promotional", "id": offerID,
                             "signature": ["keyIdentifier": keyID, "nonce": nonce.uuidString.lowercased(), "timestamp": timestamp,
                                           "signature": signature] as [String: Any]] as [String: Any]
        case .jws(let offerID, let compactJWS):
            body["offer"] = ["type": "promotional", "id": offerID, "jws": compactJWS]
        case nil:
            break
        }
        if let eligibility = options.introductoryOfferEligibility { body["introductoryOfferEligibility"] = eligibility }
        let json: Data
        do {
            json = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        } catch {
            throw KakinKitError(.storeFailed)
        }
        struct Purchased: Decodable { var signedTransaction: String }
        let (status, data) = try await http("POST", "/simulator/v1/purchases", body: json)
        guard status == 201, let purchased = try? JSONDecoder().decode(Purchased.self, from: data),
              let decoded = Self.decode(purchased.signedTransaction) else {
            throw Self.refusal(status, data)
        }
        // Paid: from here the transaction survives the app being killed, as StoreKit's does.
        state.enqueue(decoded.transaction)
        if state.delivered.count >= DeviceState.deliveredMax, let oldest = state.delivered.keys.min() { state.delivered[oldest] = nil }
        state.delivered[decoded.transaction.id] = decoded.signedDateMs
        try file.save(state)
        return .purchased(decoded.transaction)
    }

    public func finish(_ transaction: StoreTransaction) async {
        state.unfinished.removeAll { $0.id == transaction.id }
        // A finish that cannot be written is like StoreKit's rare failed finish: the transaction comes back
        // at the next launch, Kakin answers 409, and it is finished then.
        try? file.save(state)
    }

    /// The account's app transaction (`GET /simulator/v1/accounts/{appAccountToken}/app-transaction`), like
    /// `AppTransaction.shared` on a device signed in to it.
    public func appTransactionID() async -> String? {
        struct Answer: Decodable { var appTransactionId: String }
        guard let account = state.account, let answer = try? await http("GET", "/simulator/v1/accounts/\(account)/app-transaction"),
              answer.0 == 200 else { return nil }
        return (try? JSONDecoder().decode(Answer.self, from: answer.1))?.appTransactionId
    }

    public func sync() async throws(KakinKitError) {
        guard let account = state.account else { return }
        _ = try await updatesPage(account: account, after: state.cursor ?? 0, limit: 1)
        _ = await pull()
    }

    // MARK: Updates

    struct Page: Decodable {
        struct Item: Decodable {
            var seq: Int64
            var transactionId: String
            var signedTransaction: String
            /// Finished by the server (absent from simulators before Finish Transaction).
            var finished: Bool?
        }
        var transactions: [Item]
        var hasMore: Bool
        var headSeq: Int64
        var nowMs: Int64
    }

    func updatesPage(account: String, after: Int64, limit: Int = pageLimit) async throws(KakinKitError) -> Page {
        let (status, data) = try await http("GET", "/simulator/v1/accounts/\(account)/transactions?after=\(after)&limit=\(limit)")
        guard status == 200, let page = try? JSONDecoder().decode(Page.self, from: data) else { throw Self.refusal(status, data) }
        return page
    }

    /// A device that never read the updates starts at the App Store's present.
    func startReadingIfNew() async {
        guard state.cursor == nil, let account = state.account,
              let page = try? await updatesPage(account: account, after: 0, limit: 1) else { return }
        state.cursor = page.headSeq
        try? file.save(state)
    }

    /// Reads what changed since the cursor; returns the signed copies this device had not seen (each now
    /// also unfinished on the device).
    func pull() async -> [StoreTransaction] {
        guard let account = state.account else { return [] }
        if state.cursor == nil {
            await startReadingIfNew()
            return []
        }
        var fresh: [StoreTransaction] = []
        for _ in 0..<Self.pagesMax {
            guard let page = try? await updatesPage(account: account, after: state.cursor ?? 0) else { break }
            for item in page.transactions {
                state.cursor = max(state.cursor ?? 0, item.seq)
                guard let d = Self.decode(item.signedTransaction) else { continue }
                if item.finished == true {
                    state.unfinished.removeAll { $0.id == d.transaction.id }
                    state.delivered[d.transaction.id] = nil
                    continue
                }
                if state.delivered[d.transaction.id] == d.signedDateMs {
                    state.delivered[d.transaction.id] = nil
                    continue
                }
                state.enqueue(d.transaction)
                fresh.append(d.transaction)
            }
            if !page.hasMore { break }
        }
        await dropFinishedByServer(account: account)
        try? file.save(state)
        let queued = Set(state.unfinished.map(\.id))
        return fresh.filter { queued.contains($0.id) }
    }

    struct FinishedPage: Decodable {
        struct Item: Decodable {
            var seq: Int64
            var transactionId: String
        }
        var finished: [Item]
        var hasMore: Bool
    }

    /// Transactions the server finished leave the queue (best effort: a simulator without the endpoint, or
    /// offline, leaves the queue as it is).
    func dropFinishedByServer(account: String) async {
        for _ in 0..<Self.pagesMax {
            let after = state.finishedCursor ?? 0
            guard let (status, data) = try? await http("GET", "/simulator/v1/accounts/\(account)/finished?after=\(after)&limit=\(Self.pageLimit)"),
                  status == 200, let page = try? JSONDecoder().decode(FinishedPage.self, from: data) else { return }
            let ids = Set(page.finished.map(\.transactionId))
            state.unfinished.removeAll { ids.contains($0.id) }
            for id in ids { state.delivered[id] = nil }
            state.finishedCursor = max(after, page.finished.map(\.seq).max() ?? after)
            if !page.hasMore { break }
        }
    }

    // MARK: HTTP and signed data

    func http(_ method: String, _ path: String, body: Data? = nil) async throws(KakinKitError) -> (Int, Data) {
        try await SimulatorHTTP(root: simulator, session: session, name: "App Store").call(method, path, body: body)
    }

    /// The simulator refuses with Kakin's error body (`KKN-6001` unknown product, …): keep its ID.
    static func refusal(_ status: Int, _ data: Data) -> KakinKitError { SimulatorHTTP.refusal(status, data, name: "App Store") }

    /// The payload of a signed transaction, read without verifying (Kakin verifies; a device only files it).
    static func decode(_ jws: String) -> (transaction: StoreTransaction, signedDateMs: Int64)? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var b64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64),
              let o = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
              let id = o["transactionId"] as? String, let productID = o["productId"] as? String else { return nil }
        func date(_ key: String) -> Date? {
            (o[key] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue / 1000) }
        }
        let t = StoreTransaction(id: id, originalID: o["originalTransactionId"] as? String ?? id, productID: productID,
                                 productType: ProductType(rawValue: o["type"] as? String ?? "") ?? .consumable,
                                 expirationDate: date("expiresDate"), revocationDate: date("revocationDate"), jwsRepresentation: jws)
        return (t, (o["signedDate"] as? NSNumber)?.int64Value ?? 0)
    }

    static func type(contractName: String) -> ProductType {
        switch contractName {
        case "nonConsumable": return .nonConsumable
        case "nonRenewing": return .nonRenewable
        case "autoRenewable": return .autoRenewable
        default: return .consumable
        }
    }
}

extension String {
    func trimmingTrailingSlashes() -> String {
        var s = self
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }
}
