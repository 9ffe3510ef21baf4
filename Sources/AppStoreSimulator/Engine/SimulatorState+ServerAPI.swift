import KakinCore

/// The App Store Server API's answers, computed from the state (the HTTP layer only parses and frames).
extension SimulatorState {
    static let historyPageSize = 20
    static let notificationHistoryPageSize = 20

    /// Apple's transaction ids are decimal strings.
    static func isWellFormedId(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 32 && id.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// The customer (Apple account) a path's `{transactionId}` points at.
    func customer(of transactionId: String) throws(AppStoreAPIError) -> SimTransaction {
        guard Self.isWellFormedId(transactionId) else { throw .invalidTransactionId }
        guard let tx = store.transactions[transactionId] else { throw .transactionIdNotFound }
        return tx
    }

    var appEnvelope: [String: JSONValue] {
        ["bundleId": .string(config.bundleId), "appAppleId": .int(config.appAppleId), "environment": .string(config.environment.rawValue)]
    }

    // MARK: Get Transaction Info

    func transactionInfo(_ transactionId: String) throws(AppStoreAPIError) -> JSONValue {
        ["signedTransactionInfo": .string(try customer(of: transactionId).jws)]
    }

    // MARK: Get Transaction History

    struct HistoryQuery: Sendable, Equatable {
        var startDate: Int64?
        var endDate: Int64?
        var productIds: Set<String> = []
        var productTypes: Set<String> = []
        var groupIds: Set<String> = []
        var ownership: String?
        var revoked: Bool?
        var descending = false

        static let productTypeNames: [String: ProductKind] = [
            "AUTO_RENEWABLE": .autoRenewable, "NON_RENEWABLE": .nonRenewing, "CONSUMABLE": .consumable, "NON_CONSUMABLE": .nonConsumable,
        ]

        /// Reads the query string's items (repeated keys allowed) with Apple's error codes.
        init(items: [(String, String)]) throws(AppStoreAPIError) {
            for (key, value) in items {
                switch key {
                case "startDate":
                    guard let v = Int64(value), v >= 0 else { throw .invalidStartDate }
                    startDate = v
                case "endDate":
                    guard let v = Int64(value), v >= 0 else { throw .invalidEndDate }
                    endDate = v
                case "productId":
                    guard !value.isEmpty, value.count <= 255 else { throw .invalidProductId }
                    productIds.insert(value)
                case "productType":
                    guard Self.productTypeNames[value] != nil else { throw .invalidProductType }
                    productTypes.insert(value)
                case "subscriptionGroupIdentifier":
                    guard !value.isEmpty, value.count <= 255 else { throw .invalidSubscriptionGroupIdentifier }
                    groupIds.insert(value)
                case "inAppOwnershipType":
                    guard value == "PURCHASED" || value == "FAMILY_SHARED" else { throw .invalidInAppOwnershipType }
                    ownership = value
                case "revoked", "excludeRevoked":
                    // Apple's Python library sends "True"/"False"; accept any case.
                    let v: Bool
                    switch value.lowercased() {
                    case "true": v = true
                    case "false": v = false
                    default: throw key == "revoked" ? AppStoreAPIError.invalidRevoked : .invalidExcludeRevoked
                    }
                    if key == "revoked" { revoked = v } else if v { revoked = false }
                case "sort":
                    switch value {
                    case "ASCENDING": descending = false
                    case "DESCENDING": descending = true
                    default: throw .invalidSort
                    }
                default:
                    continue
                }
            }
            if let s = startDate, let e = endDate, s > e { throw .startDateAfterEndDate }
        }

        func matches(_ tx: SimTransaction) -> Bool {
            if let s = startDate, tx.purchaseDate < s { return false }
            if let e = endDate, tx.purchaseDate >= e { return false }
            if !productIds.isEmpty, !productIds.contains(tx.productId) { return false }
            if !productTypes.isEmpty, !productTypes.contains(tx.productKind.historyFilterName) { return false }
            if !groupIds.isEmpty, !groupIds.contains(tx.groupId ?? "") { return false }
            if let ownership, tx.ownership != ownership { return false }
            if let revoked, tx.isRevoked != revoked { return false }
            return true
        }

        /// Binds a revision token to the filters it was issued for ("resend identical filters").
        var fingerprint: String {
            [String(startDate ?? -1), String(endDate ?? -1), productIds.sorted().joined(separator: ","),
             productTypes.sorted().joined(separator: ","), groupIds.sorted().joined(separator: ","), ownership ?? "",
             revoked.map { $0 ? "1" : "0" } ?? "", descending ? "D" : "A"].joined(separator: "|")
        }
    }

    /// Get Transaction History (v2; `version` 1 is the deprecated V1, which leaves out finished consumables —
    /// the simulator treats every consumable as finished, so V1 shows only refunded ones).
    func history(_ transactionId: String, query: HistoryQuery, revision: String?, version: Int = 2) throws(AppStoreAPIError) -> JSONValue {
        let account = try customer(of: transactionId).accountKey
        let binding = Self.fnv1a(account + "\u{1F}" + query.fingerprint + "\u{1F}v\(version)")
        var cursor: Int64? = nil
        if let revision {
            guard let parts = Self.decodeToken(revision, prefix: "h"), parts.count == 2, parts[1] == binding, let c = Int64(parts[0]) else {
                throw .invalidRequestRevision
            }
            cursor = c
        }
        var items = store.transactionsByAccount[account, default: []].compactMap { store.transactions[$0] }.filter {
            query.matches($0) && (version == 2 || $0.productKind != .consumable || $0.isRevoked)
        }
        if query.descending {
            items.sort { $0.modifiedSeq > $1.modifiedSeq }
            if let cursor { items.removeAll { $0.modifiedSeq >= cursor } }
        } else {
            items.sort { $0.modifiedSeq < $1.modifiedSeq }
            if let cursor { items.removeAll { $0.modifiedSeq <= cursor } }
        }
        let page = items.prefix(Self.historyPageSize)
        let next = page.last?.modifiedSeq ?? cursor ?? (query.descending ? Int64.max : 0)
        var o = appEnvelope
        o["revision"] = .string(Self.encodeToken(prefix: "h", [String(next), binding]))
        o["hasMore"] = .bool(items.count > page.count)
        o["signedTransactions"] = .array(page.map { .string($0.jws) })
        return .object(o)
    }

    // MARK: Get All Subscription Statuses

    func statuses(_ transactionId: String, statusFilter: [String]) throws(AppStoreAPIError) -> JSONValue {
        var wanted = Set<Int>()
        for s in statusFilter {
            guard let v = Int(s), (1...5).contains(v) else { throw .invalidStatus }
            wanted.insert(v)
        }
        let account = try customer(of: transactionId).accountKey
        let subs = store.subscriptions.values.filter { $0.accountKey == account }.sorted { $0.originalTransactionId < $1.originalTransactionId }
        var groups: [String: [JSONValue]] = [:]
        for sub in subs {
            let status = status(of: sub)
            if !wanted.isEmpty, !wanted.contains(status) { continue }
            groups[sub.groupId, default: []].append([
                "status": .int(Int64(status)), "originalTransactionId": .string(sub.originalTransactionId),
                "signedTransactionInfo": .string(latest(sub).jws), "signedRenewalInfo": .string(sub.renewalJWS),
            ])
        }
        var o = appEnvelope
        o["data"] = .array(groups.keys.sorted().map { ["subscriptionGroupIdentifier": .string($0), "lastTransactions": .array(groups[$0]!)] })
        return .object(o)
    }

    // MARK: Look Up Order ID, Refund History

    func lookUpOrder(_ orderId: String) -> JSONValue {
        guard let ids = store.orders[orderId], !ids.isEmpty else { return ["status": 1, "signedTransactions": []] }
        return ["status": 0, "signedTransactions": .array(ids.compactMap { store.transactions[$0].map { .string($0.jws) } })]
    }

    func refundHistory(_ transactionId: String, revision: String?) throws(AppStoreAPIError) -> JSONValue {
        let account = try customer(of: transactionId).accountKey
        let binding = Self.fnv1a("refunds\u{1F}" + account)
        var after: (Int64, Int64)? = nil
        if let revision {
            guard let parts = Self.decodeToken(revision, prefix: "r"), parts.count == 3, parts[2] == binding,
                  let d = Int64(parts[0]), let s = Int64(parts[1]) else { throw .invalidRequestRevision }
            after = (d, s)
        }
        var items = store.transactionsByAccount[account, default: []].compactMap { store.transactions[$0] }.filter {
            $0.isRevoked && $0.revocationType != RevocationType.familyRevoke.rawValue
        }
        items.sort { ($0.revocationDate!, $0.modifiedSeq) < ($1.revocationDate!, $1.modifiedSeq) }
        if let after { items.removeAll { ($0.revocationDate!, $0.modifiedSeq) <= after } }
        let page = items.prefix(Self.historyPageSize)
        let last = page.last.map { ($0.revocationDate!, $0.modifiedSeq) } ?? after ?? (0, 0)
        return ["signedTransactions": .array(page.map { .string($0.jws) }),
                "revision": .string(Self.encodeToken(prefix: "r", [String(last.0), String(last.1), binding])),
                "hasMore": .bool(items.count > page.count)]
    }

    // MARK: Get Notification History

    /// Subtypes each type may carry (§5.3), for validating the notification history filter.
    static let subtypesByType: [String: Set<String>] = [
        "SUBSCRIBED": ["INITIAL_BUY", "RESUBSCRIBE"], "DID_RENEW": ["BILLING_RECOVERY"], "DID_FAIL_TO_RENEW": ["GRACE_PERIOD"],
        "DID_CHANGE_RENEWAL_PREF": ["UPGRADE", "DOWNGRADE"], "DID_CHANGE_RENEWAL_STATUS": ["AUTO_RENEW_ENABLED", "AUTO_RENEW_DISABLED"],
        "OFFER_REDEEMED": ["UPGRADE", "DOWNGRADE"], "PRICE_INCREASE": ["PENDING", "ACCEPTED"],
        "EXPIRED": ["VOLUNTARY", "BILLING_RETRY", "PRICE_INCREASE", "PRODUCT_NOT_FOR_SALE"], "GRACE_PERIOD_EXPIRED": [],
        "REFUND": [], "REFUND_DECLINED": [], "REFUND_REVERSED": [], "REVOKE": [], "CONSUMPTION_REQUEST": [], "RENEWAL_EXTENDED": [],
        "RENEWAL_EXTENSION": ["SUMMARY", "FAILURE"], "ONE_TIME_CHARGE": [], "EXTERNAL_PURCHASE_TOKEN": ["UNREPORTED"], "TEST": [],
        "METADATA_UPDATE": [], "MIGRATION": [], "PRICE_CHANGE": [], "RESCIND_CONSENT": [],
    ]

    /// How far back Notification History reaches: 30 days in sandbox, 180 in production.
    var notificationHistoryDays: Int64 { config.environment == .production ? 180 : 30 }

    func notificationHistory(body: JSONValue, paginationToken: String?) throws(AppStoreAPIError) -> JSONValue {
        guard case .object = body else { throw .generalBadRequest }
        guard let start = body["startDate"]?.int64Value, body["startDate"].map({ if case .int = $0 { true } else { false } }) == true else {
            throw .invalidStartDate
        }
        guard let end = body["endDate"]?.int64Value, body["endDate"].map({ if case .int = $0 { true } else { false } }) == true else {
            throw .invalidEndDate
        }
        guard start <= end else { throw .startDateAfterEndDate }
        guard start >= nowMs - notificationHistoryDays * Self.dayMs else { throw .startDateTooFarInPast }
        let type = Self.present(body["notificationType"])
        let subtype = Self.present(body["notificationSubtype"])
        var typeName: String?
        var subtypeName: String?
        if let type {
            guard let t = type.stringValue, Self.subtypesByType[t] != nil else { throw .invalidNotificationType }
            typeName = t
        }
        if let subtype {
            guard let s = subtype.stringValue, let t = typeName, Self.subtypesByType[t]!.contains(s) else { throw .invalidNotificationType }
            subtypeName = s
        }
        var account: String?
        if let tv = Self.present(body["transactionId"]) {
            guard typeName == nil else { throw .multipleFiltersSupplied }
            guard let tid = tv.stringValue else { throw .invalidTransactionId }
            account = try customer(of: tid).accountKey
        }
        let onlyFailures = body["onlyFailures"]?.boolValue ?? false
        let binding = Self.fnv1a([String(start), String(end), typeName ?? "", subtypeName ?? "", account ?? "-", onlyFailures ? "1" : "0"].joined(separator: "|"))
        var after: Int64 = 0
        if let paginationToken {
            guard let parts = Self.decodeToken(paginationToken, prefix: "n"), parts.count == 2, parts[1] == binding, let s = Int64(parts[0]) else {
                throw .invalidPaginationToken
            }
            after = s
        }
        let matching = store.notifications.filter { n in
            n.seq > after && n.signedDate >= start && n.signedDate < end
                && (typeName == nil || n.notificationType == typeName)
                && (subtypeName == nil || n.subtype == subtypeName)
                && (account == nil || n.accountKey == account)
                && (!onlyFailures || !n.delivered)
        }
        let page = matching.prefix(Self.notificationHistoryPageSize)
        let last = page.last?.seq ?? after
        return [
            "paginationToken": .string(Self.encodeToken(prefix: "n", [String(last), binding])),
            "hasMore": .bool(matching.count > page.count),
            "notificationHistory": .array(page.map { n in
                ["signedPayload": .string(n.jws),
                 "sendAttempts": .array(n.attempts.map { ["attemptDate": .int($0.attemptDate), "sendAttemptResult": .string($0.sendAttemptResult)] })]
            }),
        ]
    }

    // MARK: Test notifications

    mutating func requestTestNotification() -> String {
        let uuid = emit(.test, nil, transactionId: nil, subscription: nil)
        let token = store.ids.uuid()
        store.testNotifications[token] = uuid
        return token
    }

    func testNotificationStatus(_ token: String) throws(AppStoreAPIError) -> JSONValue {
        guard !token.isEmpty, token.count <= 128 else { throw .invalidTestNotificationToken }
        guard let uuid = store.testNotifications[token], let n = store.notifications.first(where: { $0.notificationUUID == uuid }) else {
            throw .testNotificationNotFound
        }
        return ["signedPayload": .string(n.jws),
                "sendAttempts": .array(n.attempts.map { ["attemptDate": .int($0.attemptDate), "sendAttemptResult": .string($0.sendAttemptResult)] })]
    }

    // MARK: Send Consumption Information

    static let deliveryStatuses: Set<String> = ["DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER"]
    static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    /// Validates a `ConsumptionRequest` like Apple (§6.7) and records it; Apple answers 202 with no body.
    mutating func recordConsumption(_ transactionId: String, body: JSONValue) throws(AppStoreAPIError) {
        guard case .object = body else { throw .generalBadRequest }
        let tx = try customer(of: transactionId)
        guard case .bool(true) = body["customerConsented"] ?? .null else { throw .invalidCustomerConsented }
        guard let delivery = body["deliveryStatus"]?.stringValue, Self.deliveryStatuses.contains(delivery) else { throw .invalidDeliveryStatus }
        guard case .bool = body["sampleContentProvided"] ?? .null else { throw .invalidSampleContentProvided }
        var percentage: Int64?
        if let p = body["consumptionPercentage"], !p.isNull {
            guard case .int(let v) = p, (0...100_000).contains(v), tx.productKind != .autoRenewable else { throw .generalBadRequest }
            percentage = v
        }
        if let r = body["refundPreference"], !r.isNull {
            guard let s = r.stringValue, Self.refundPreferences.contains(s) else { throw .generalBadRequest }
            if s == "GRANT_PRORATED", tx.productKind != .autoRenewable, (percentage ?? 0) == 0 { throw .generalBadRequest }
        }
        store.consumption.append(ConsumptionRecord(transactionId: transactionId, receivedMs: nowMs, body: body.jsonString, version: 2))
        if store.consumption.count > Self.consumptionRecordsMax { store.consumption.removeFirst(store.consumption.count - Self.consumptionRecordsMax) }
    }

    /// A field that is there and not JSON null. (A bare `nil` in a `JSONValue` context is `.null`, so
    /// `flatMap { $0.isNull ? nil : $0 }` would keep nulls.)
    static func present(_ value: JSONValue?) -> JSONValue? {
        guard let value, !value.isNull else { return nil }
        return value
    }

    // MARK: Paging tokens

    /// Opaque to clients; carries a cursor and a fingerprint of the filters and customer it was issued for.
    static func encodeToken(prefix: String, _ parts: [String]) -> String {
        Base64.urlEncode(Array((prefix + "1." + parts.joined(separator: ".")).utf8))
    }

    static func decodeToken(_ token: String, prefix: String) -> [String]? {
        guard token.count <= 512, let bytes = Base64.decode(token), let text = String(validating: bytes, as: UTF8.self),
              text.hasPrefix(prefix + "1.") else { return nil }
        return text.dropFirst(prefix.count + 2).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }

    static func fnv1a(_ s: String) -> String {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in s.utf8 {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01B3
        }
        return String(h, radix: 16)
    }
}
