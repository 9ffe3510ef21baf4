import KakinCore

/// Server API calls about an account rather than one purchase: the deprecated V1 Send Consumption
/// Information, Set App Account Token, Get App Transaction Info; and what the legacy app receipt lists.
extension SimulatorState {
    // MARK: Send Consumption Information, V1 (deprecated)

    /// Validates a `ConsumptionRequestV1` like Apple (codes 4000032–4000043; consumables only) and records it.
    mutating func recordConsumptionV1(_ transactionId: String, body: JSONValue) throws(AppStoreAPIError) {
        guard case .object = body else { throw .generalBadRequest }
        let tx = try customer(of: transactionId)
        guard tx.productKind == .consumable else { throw .invalidTransactionNotConsumable }
        func int(_ key: String, _ range: ClosedRange<Int64>, _ error: AppStoreAPIError) throws(AppStoreAPIError) {
            guard let v = Self.present(body[key]) else { return }
            guard case .int(let i) = v, range.contains(i) else { throw error }
        }
        guard case .bool(true) = body["customerConsented"] ?? .null else { throw .invalidCustomerConsented }
        try int("consumptionStatus", 0...3, .invalidConsumptionStatus)
        try int("platform", 0...2, .invalidPlatform)
        try int("deliveryStatus", 0...5, .invalidDeliveryStatus)
        try int("accountTenure", 0...7, .invalidAccountTenure)
        try int("playTime", 0...7, .invalidPlayTime)
        try int("lifetimeDollarsRefunded", 0...7, .invalidLifetimeDollarsRefunded)
        try int("lifetimeDollarsPurchased", 0...7, .invalidLifetimeDollarsPurchased)
        try int("userStatus", 0...4, .invalidUserStatus)
        try int("refundPreference", 0...3, .generalBadRequest)
        if let s = Self.present(body["sampleContentProvided"]) { guard case .bool = s else { throw .invalidSampleContentProvided } }
        if let token = Self.present(body["appAccountToken"]) {
            guard let t = token.stringValue, t.isEmpty || (try? Self.normalizedToken(t)) != nil else { throw .invalidAppAccountToken }
        }
        store.consumption.append(ConsumptionRecord(transactionId: transactionId, receivedMs: nowMs, body: body.jsonString, version: 1))
        if store.consumption.count > Self.consumptionRecordsMax { store.consumption.removeFirst(store.consumption.count - Self.consumptionRecordsMax) }
    }

    /// What the simulator received, oldest first, for `GET /simulator/v1/consumption`.
    func consumptionRecords(transactionId: String?, limit: Int) -> [JSONValue] {
        let matching = store.consumption.filter { transactionId == nil || $0.transactionId == transactionId }
        return matching.suffix(limit).map { r in
            ["transactionId": .string(r.transactionId), "receivedAt": .string(Timestamp.rfc3339(r.receivedMs)),
             "receivedAtMs": .int(r.receivedMs), "version": .int(Int64(r.version ?? 2)),
             "request": (try? JSONParser.parse(r.body)) ?? .null]
        }
    }

    // MARK: Set App Account Token

    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`: every transaction of the
    /// purchase chain carries the token from now on (re-signed, as the simulator does on every change) and
    /// so do the subscription's renewal info and future renewals. No notification (Apple documents none).
    /// The purchase stays in the Apple account it was made in.
    mutating func setAppAccountToken(_ originalTransactionId: String, body: JSONValue) throws(AppStoreAPIError) {
        guard case .object = body else { throw .generalBadRequest }
        guard let raw = body["appAccountToken"]?.stringValue, let token = try? Self.normalizedToken(raw) else {
            throw .invalidAppAccountTokenUUID
        }
        let tx = try customer(of: originalTransactionId)
        guard tx.originalTransactionId == tx.transactionId else { throw .transactionIdIsNotOriginalTransactionId }
        guard !tx.isFamilyShared else { throw .familyTransactionNotSupported }
        let chain = store.transactions.values.filter { $0.originalTransactionId == originalTransactionId }.map(\.transactionId).sorted()
        for id in chain {
            store.transactions[id]!.appAccountToken = token
            resign(transaction: id)
        }
        if store.subscriptions[originalTransactionId] != nil {
            store.subscriptions[originalTransactionId]!.appAccountToken = token
            resignRenewal(originalTransactionId)
        }
    }

    // MARK: Get App Transaction Info

    /// `JWSAppTransactionDecodedPayload` of the account a transaction (or its `appTransactionId`) belongs to.
    func appTransactionInfo(_ id: String) throws(AppStoreAPIError) -> JSONValue {
        guard Self.isWellFormedId(id) else { throw .invalidTransactionId }
        let appTransactionId: String
        if let tx = store.transactions[id] {
            appTransactionId = tx.appTransactionId
        } else if store.accounts.values.contains(where: { $0.appTransactionId == id }) {
            appTransactionId = id
        } else {
            throw .appTransactionDoesNotExist
        }
        let payload: JSONValue = [
            "receiptType": .string(config.environment.rawValue), "appAppleId": .int(config.appAppleId),
            "bundleId": .string(config.bundleId), "applicationVersion": .string(config.bundleVersion),
            "originalApplicationVersion": "1.0", "receiptCreationDate": .int(nowMs),
            // Apple's sandbox always says 2013-08-01T07:00:00Z.
            "originalPurchaseDate": .int(config.environment == .sandbox ? 1_375_340_400_000 : nowMs),
            "appTransactionId": .string(appTransactionId), "originalPlatform": "iOS",
        ]
        return ["signedAppTransactionInfo": .string(signer.sign(payload))]
    }

    // MARK: Legacy app receipt

    /// The purchases StoreKit 1's receipt would list for this account, in purchase order: every
    /// transaction, family-shared copies excluded, consumables as if not finished yet (the simulator has no
    /// `finishTransaction`). The runtime signs the receipt.
    func receiptTransactions(account: String) -> [SimTransaction] {
        (store.transactionsByAccount[account] ?? []).compactMap { store.transactions[$0] }.filter { !$0.isFamilyShared }
            // A consumable finished through Finish Transaction leaves the receipt, as finishTransaction() does.
            .filter { !($0.productKind == .consumable && $0.finishedDate != nil) }
    }
}
