import KakinCore

/// Extend a Subscription Renewal Date and its mass version (§6.8): the current transaction's `expiresDate`
/// moves by whole days (the simulator keeps days as days; Apple's sandbox turns them into minutes).
extension SimulatorState {
    struct ExtendRequest: Sendable, Equatable {
        var extendByDays: Int
        var extendReasonCode: Int
        var requestIdentifier: String

        init(body: JSONValue) throws(AppStoreAPIError) {
            guard case .object = body else { throw .generalBadRequest }
            guard case .int(let days) = body["extendByDays"] ?? .null, (1...90).contains(days) else { throw .invalidExtendByDays }
            guard case .int(let code) = body["extendReasonCode"] ?? .null, (0...3).contains(code) else { throw .invalidExtendReasonCode }
            guard let rid = body["requestIdentifier"]?.stringValue, !rid.isEmpty, rid.count <= 128 else { throw .invalidRequestIdentifier }
            extendByDays = Int(days)
            extendReasonCode = Int(code)
            requestIdentifier = rid
        }
    }

    /// Why Apple would refuse to extend this instance now, if it would.
    func extensionRefusal(_ sub: SimSubscription) -> AppStoreAPIError? {
        if sub.isFamilyShared { return .familySharedSubscriptionExtensionIneligible }
        let tx = latest(sub)
        // Ineligible: ended, revoked, billing retry or grace, or inside a free offer period.
        guard status(of: sub) == 1, (tx.expiresDate ?? 0) > nowMs else { return .subscriptionExtensionIneligible }
        if tx.offer?.paymentMode == .freeTrial { return .subscriptionExtensionIneligible }
        let yearAgo = nowMs - 365 * Self.dayMs
        if sub.extensionDates.filter({ $0 > yearAgo }).count >= Self.extensionsPerYearMax { return .subscriptionMaxExtension }
        return nil
    }

    mutating func applyExtension(_ otid: String, days: Int) -> ExtensionRecord {
        let sub = store.subscriptions[otid]!
        let tid = sub.latestTransactionId
        let newExpiry = store.transactions[tid]!.expiresDate! + Int64(days) * Self.dayMs
        store.transactions[tid]!.expiresDate = newExpiry
        resign(transaction: tid)
        store.subscriptions[otid]!.extensionDates.append(nowMs)
        emit(.renewalExtended, nil, transactionId: tid, subscription: otid)
        return ExtensionRecord(originalTransactionId: otid, webOrderLineItemId: store.transactions[tid]!.webOrderLineItemId,
                               success: true, effectiveDate: newExpiry)
    }

    /// `PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`. A repeated `requestIdentifier` gets the
    /// first answer again.
    mutating func extendRenewalDate(_ otid: String, body: JSONValue) throws(AppStoreAPIError) -> JSONValue {
        guard Self.isWellFormedId(otid) else { throw .invalidOriginalTransactionId }
        let request = try ExtendRequest(body: body)
        guard let sub = store.subscriptions[otid] else { throw .originalTransactionIdNotFound }
        if let done = store.extensionRequests[request.requestIdentifier], done.originalTransactionId == otid { return Self.json(done) }
        if let refusal = extensionRefusal(sub) { throw refusal }
        let record = applyExtension(otid, days: request.extendByDays)
        if store.extensionRequests.count < Self.extensionRequestsMax { store.extensionRequests[request.requestIdentifier] = record }
        return Self.json(record)
    }

    static func json(_ r: ExtensionRecord) -> JSONValue {
        var o: [String: JSONValue] = ["originalTransactionId": .string(r.originalTransactionId), "success": .bool(r.success),
                                      "effectiveDate": .int(r.effectiveDate)]
        if let w = r.webOrderLineItemId { o["webOrderLineItemId"] = .string(w) }
        return .object(o)
    }

    /// `POST /inApps/v1/subscriptions/extend/mass`: done at once here (Apple may take hours). Each eligible
    /// active subscriber of the product gets RENEWAL_EXTENDED, each ineligible one RENEWAL_EXTENSION/FAILURE,
    /// then one RENEWAL_EXTENSION/SUMMARY closes the request.
    mutating func massExtend(body: JSONValue) throws(AppStoreAPIError) -> JSONValue {
        let request = try ExtendRequest(body: body)
        guard let productId = body["productId"]?.stringValue, let product = product(productId), product.kind == .autoRenewable else {
            throw .invalidProductId
        }
        var codes: [String]?
        if let c = body["storefrontCountryCodes"], !c.isNull {
            guard let list = c.arrayValue else { throw .invalidStorefrontCountryCode }
            guard !list.isEmpty else { throw .invalidEmptyStorefrontCountryCodeList }
            codes = try list.map { (v: JSONValue) throws(AppStoreAPIError) -> String in
                guard let s = v.stringValue, s.count == 3, s.allSatisfy({ $0.isASCII && $0.isUppercase }) else { throw .invalidStorefrontCountryCode }
                return s
            }
        }
        if store.massExtensions[request.requestIdentifier] != nil { return ["requestIdentifier": .string(request.requestIdentifier)] }
        guard store.massExtensions.count < Self.extensionRequestsMax else { throw .generalBadRequest }
        var succeeded = 0, failed = 0
        if codes?.contains(config.storefront) ?? true {
            let targets = store.subscriptions.values.filter { $0.productId == productId && !$0.isFamilyShared && status(of: $0) == 1 }
                .map(\.originalTransactionId).sorted()
            for otid in targets {
                if extensionRefusal(store.subscriptions[otid]!) == nil {
                    _ = applyExtension(otid, days: request.extendByDays)
                    succeeded += 1
                } else {
                    emit(.renewalExtension, .failure, transactionId: store.subscriptions[otid]!.latestTransactionId, subscription: otid)
                    failed += 1
                }
            }
        }
        store.massExtensions[request.requestIdentifier] = MassExtensionRecord(productId: productId, completeDate: nowMs,
                                                                             succeededCount: succeeded, failedCount: failed)
        var summary: [String: JSONValue] = [
            "requestIdentifier": .string(request.requestIdentifier), "environment": .string(config.environment.rawValue),
            "appAppleId": .int(config.appAppleId), "bundleId": .string(config.bundleId), "productId": .string(productId),
            "succeededCount": .int(Int64(succeeded)), "failedCount": .int(Int64(failed)),
        ]
        if let codes { summary["storefrontCountryCodes"] = .array(codes.map { .string($0) }) }
        _ = enqueue(.renewalExtension, .summary, body: ("summary", .object(summary)), account: nil, transactionId: nil, originalTransactionId: nil)
        return ["requestIdentifier": .string(request.requestIdentifier)]
    }

    func massExtensionStatus(productId: String, requestIdentifier: String) throws(AppStoreAPIError) -> JSONValue {
        guard let r = store.massExtensions[requestIdentifier], r.productId == productId else { throw .statusRequestNotFound }
        return ["requestIdentifier": .string(requestIdentifier), "complete": true, "completeDate": .int(r.completeDate),
                "succeededCount": .int(Int64(r.succeededCount)), "failedCount": .int(Int64(r.failedCount))]
    }
}
