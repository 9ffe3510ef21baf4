import KakinCore

/// An external purchase token the simulated App Store issued (StoreKit's `ExternalPurchase`,
/// `ExternalPurchaseLink` or `ExternalPurchaseCustomLink`), and what was reported of it.
struct SimExternalToken: Codable, Sendable, Equatable {
    var externalPurchaseId: String
    /// `externalPurchase` (notice sheet or link: no type, no expiry) or `customLink`.
    var api: String
    var tokenType: String?
    var accountKey: String
    var creationMs: Int64
    var expirationMs: Int64?
    /// The Base64URL string handed to the app.
    var token: String
    /// Accepted report statuses, in order (LINE_ITEM once any line item was accepted).
    var reportedStatuses: [String] = []
    var unreportedNotified = false

    var isReported: Bool { !reportedStatuses.isEmpty }

    /// The token's JSON: what the app decodes and what EXTERNAL_PURCHASE_TOKEN carries.
    func fields(_ config: SimulatorConfiguration) -> JSONValue {
        var o: [String: JSONValue] = [
            "appAppleId": .int(config.appAppleId), "bundleId": .string(config.bundleId), "tokenCreationDate": .int(creationMs),
            "externalPurchaseId": .string(externalPurchaseId),
        ]
        if let tokenType { o["tokenType"] = .string(tokenType) }
        if let expirationMs { o["tokenExpirationDate"] = .int(expirationMs) }
        return .object(o)
    }
}

/// A line item Apple accepted, as the validation of later reports needs it.
struct SimLineItem: Codable, Sendable, Equatable {
    var externalPurchaseId: String
    var eventType: String
    var subscriptionEvent: String?
    var amountTaxExclusive: Int64
    var netAmountTaxExclusive: Int64
    var referenceLineItemId: String?
}

/// The External Purchase Server API's memory: tokens, accepted reports (by requestIdentifier) and line items,
/// and request identifiers of refused reports (which may be resubmitted).
struct ExternalPurchaseStore: Codable, Sendable, Equatable {
    var tokens: [String: SimExternalToken] = [:]
    var tokenOrder: [String] = []
    /// Accepted reports: requestIdentifier → the report's JSON text.
    var reports: [String: String] = [:]
    var reportOrder: [String] = []
    var lineItems: [String: SimLineItem] = [:]
    /// Refused requestIdentifiers → the token they were for (a refused report may be resubmitted, fixed, with its
    /// requestIdentifier — even when the fix is the token).
    var refused: [String: String] = [:]
}

extension SimulatorState {
    /// Custom link tokens expire an hour after creation (Apple's sandbox; production's span is undocumented).
    static let customLinkTokenLifetimeMs: Int64 = hourMs
    /// Apple notifies UNREPORTED 10 days after creating a token without an expiration date…
    static let unreportedAfterMs: Int64 = 10 * dayMs
    /// …and "soon after" a custom link token expires: an hour here (ours).
    static let unreportedAfterExpiryMs: Int64 = hourMs

    /// Reads; writes go to `store.externalPurchases!` in place after `ensureExternal()` (no copy of the maps).
    var external: ExternalPurchaseStore { store.externalPurchases ?? ExternalPurchaseStore() }

    mutating func ensureExternal() {
        if store.externalPurchases == nil { store.externalPurchases = ExternalPurchaseStore() }
    }

    enum ReportOutcome: Sendable {
        case accepted(requestIdentifier: String)
        case refused([ExternalPurchaseReportError])
        /// The simulator holds as many reports as it keeps.
        case full
    }

    // MARK: Issuing tokens (the device side)

    enum ExternalPurchaseAPI: String, Sendable { case externalPurchase, customLink }

    /// A token as StoreKit hands it to the app. `externalPurchase`: a new token per call (no type, no expiry).
    /// `customLink` ACQUISITION/SERVICES (EU): the account's active token of that type (a refreshed copy — new
    /// id, same dates — with `refresh`); a new one only on the account's first install (both types) or, for
    /// SERVICES, on a qualifying event (update or redownload); none once ACQUISITION expired. IN_APP/LINK_OUT
    /// (Japan, Brazil): a new token per call.
    mutating func issueExternalPurchaseToken(api: ExternalPurchaseAPI, tokenType: String?, account: String, refresh: Bool,
                                             qualifyingEvent: Bool) throws(KakinError) -> SimExternalToken {
        ensureExternal()
        guard external.tokens.count < Self.externalTokensMax else {
            throw KakinError(.simulatorInvalidAction, "The simulator holds \(Self.externalTokensMax) external purchase tokens; load a fresh state.")
        }
        var expiration: Int64?
        switch api {
        case .externalPurchase:
            guard tokenType == nil else { throw KakinError(.invalidField, "tokenType is only for the customLink API.") }
        case .customLink:
            guard let tokenType, ["ACQUISITION", "SERVICES", "IN_APP", "LINK_OUT"].contains(tokenType) else {
                throw KakinError(.invalidField, "tokenType must be ACQUISITION, SERVICES, IN_APP or LINK_OUT for the customLink API.")
            }
            expiration = nowMs + Self.customLinkTokenLifetimeMs
            if tokenType == "ACQUISITION" || tokenType == "SERVICES" {
                let mine = external.tokenOrder.compactMap { external.tokens[$0] }.filter { $0.accountKey == account && $0.tokenType == tokenType }
                if let active = mine.last(where: { ($0.expirationMs ?? .max) > nowMs }) {
                    guard refresh else { return active }
                    return record(SimExternalToken(externalPurchaseId: newExternalPurchaseId(), api: api.rawValue, tokenType: tokenType,
                                                   accountKey: account, creationMs: active.creationMs, expirationMs: active.expirationMs, token: ""))
                }
                // The first install makes both types for one period; an ACQUISITION token asked later in that
                // period shares the SERVICES token's dates.
                let known = external
                let install = known.tokenOrder.lazy.compactMap { known.tokens[$0] }
                    .first { $0.accountKey == account && ($0.tokenType == "SERVICES" || $0.tokenType == "ACQUISITION") }
                let installPeriodOpen = install.map { ($0.expirationMs ?? .max) > nowMs } ?? true
                let allowed = tokenType == "ACQUISITION" ? mine.isEmpty && installPeriodOpen : mine.isEmpty || qualifyingEvent
                if allowed, tokenType == "ACQUISITION", let install {
                    return record(SimExternalToken(externalPurchaseId: newExternalPurchaseId(), api: api.rawValue, tokenType: tokenType,
                                                   accountKey: account, creationMs: install.creationMs, expirationMs: install.expirationMs, token: ""))
                }
                guard allowed else {
                    throw KakinError(.simulatorNoExternalPurchaseToken,
                                     "The account has no active \(tokenType) token" + (tokenType == "ACQUISITION"
                                        ? " (an ACQUISITION token has one period, at first install)."
                                        : "; a new SERVICES token comes with a qualifying event (an update or redownload: qualifyingEvent)."))
                }
            }
        }
        return record(SimExternalToken(externalPurchaseId: newExternalPurchaseId(), api: api.rawValue, tokenType: tokenType,
                                       accountKey: account, creationMs: nowMs, expirationMs: expiration, token: ""))
    }

    mutating func newExternalPurchaseId() -> String {
        let id = store.ids.uuid()
        return config.environment == .sandbox ? "SANDBOX_" + id : id
    }

    mutating func record(_ token: SimExternalToken) -> SimExternalToken {
        var t = token
        t.token = Base64.urlEncode(t.fields(config).serialized())
        store.externalPurchases!.tokens[t.externalPurchaseId] = t
        store.externalPurchases!.tokenOrder.append(t.externalPurchaseId)
        return t
    }

    // MARK: The UNREPORTED notification

    func unreportedNotificationMs(_ t: SimExternalToken) -> Int64 {
        if let expiration = t.expirationMs { return expiration + Self.unreportedAfterExpiryMs }
        return t.creationMs + Self.unreportedAfterMs
    }

    /// The next moment a token goes unreported past its deadline.
    func nextExternalPurchaseEventMs() -> Int64? {
        guard let e = store.externalPurchases else { return nil }
        return e.tokens.values.lazy.filter { !$0.isReported && !$0.unreportedNotified }.map { unreportedNotificationMs($0) }.min()
    }

    /// Sends EXTERNAL_PURCHASE_TOKEN/UNREPORTED for every token whose deadline is `t` or earlier and that no
    /// accepted report names, once per token.
    mutating func processExternalPurchaseDeadlines(atMs t: Int64) {
        guard store.externalPurchases != nil else { return }
        for id in external.tokenOrder {
            guard var token = external.tokens[id], !token.isReported, !token.unreportedNotified, unreportedNotificationMs(token) <= t else { continue }
            token.unreportedNotified = true
            store.externalPurchases!.tokens[id] = token
            _ = enqueue(.externalPurchaseToken, .unreported, body: ("externalPurchaseToken", token.fields(config)),
                        account: token.accountKey, transactionId: nil, originalTransactionId: nil)
        }
    }

    // MARK: Send and Retrieve External Purchase Report

    /// Send External Purchase Report with Apple's validation: every error found is listed (Apple's error objects,
    /// codes in the order of its documentation); a refused report changes nothing but may be resubmitted with
    /// its requestIdentifier.
    mutating func sendExternalPurchaseReport(_ body: JSONValue) -> ReportOutcome {
        ensureExternal()
        var errors: [ExternalPurchaseReportError] = []
        func fail(_ code: Int, _ field: String?, _ lineItemId: String? = nil) {
            errors.append(Self.reportError(code, field, lineItemId))
        }
        guard case .object(let o) = body else { return .refused([Self.reportError(4, "requestIdentifier")]) }
        guard let rid = o["requestIdentifier"]?.stringValue, UUIDText.isValid(rid) else { return .refused([Self.reportError(4, "requestIdentifier")]) }
        if external.reports[rid] != nil { return .refused([Self.reportError(1, "requestIdentifier")]) }
        guard let epid = o["externalPurchaseId"]?.stringValue, !epid.isEmpty else { return .refused([Self.reportError(4, "externalPurchaseId")]) }
        guard let token = external.tokens[epid] else {
            store.externalPurchases!.refused[rid] = epid
            return .refused([Self.reportError(3, "externalPurchaseId")])
        }
        guard let status = o["status"]?.stringValue else { return .refused([Self.reportError(4, "status")]) }
        let items = o["lineItems"]?.arrayValue
        switch status {
        case "LINE_ITEM":
            if items?.isEmpty ?? true { fail(9, "status") }
        case "NO_LINE_ITEM", "UNRECOGNIZED_TOKEN", "DUPLICATE_TOKEN":
            if items != nil { fail(10, "status") }
            if token.reportedStatuses.contains("LINE_ITEM") { fail(8, "status") }
            if status == "DUPLICATE_TOKEN", token.tokenType != "SERVICES", token.tokenType != "ACQUISITION" { fail(37, "status") }
        default:
            fail(7, "status")
        }
        var accepted: [String: SimLineItem] = [:]
        if status == "LINE_ITEM", let items {
            if items.count > Self.lineItemsPerReportMax { fail(19, "lineItems") }
            for item in items.prefix(Self.lineItemsPerReportMax) {
                validateLineItem(item, token: token, accepted: &accepted, fail: fail)
            }
        }
        guard errors.isEmpty else {
            store.externalPurchases!.refused[rid] = epid
            return .refused(errors)
        }
        guard external.reports.count < Self.externalReportsMax else { return .full }
        var t = token
        t.reportedStatuses.append(status)
        store.externalPurchases!.tokens[epid] = t
        store.externalPurchases!.reports[rid] = String(decoding: body.serialized(), as: UTF8.self)
        store.externalPurchases!.reportOrder.append(rid)
        store.externalPurchases!.refused[rid] = nil
        for (id, item) in accepted { store.externalPurchases!.lineItems[id] = item }
        return .accepted(requestIdentifier: rid)
    }

    /// One line item's checks; a valid one joins `accepted` (later items of the report may reference it).
    func validateLineItem(_ item: JSONValue, token: SimExternalToken, accepted: inout [String: SimLineItem],
                          fail: (Int, String?, String?) -> Void) {
        guard case .object(let f) = item else { return fail(4, "lineItemId", nil) }
        guard let id = f["lineItemId"]?.stringValue, !id.isEmpty else { return fail(4, "lineItemId", nil) }
        var ok = true
        func bad(_ code: Int, _ field: String) {
            ok = false
            fail(code, field, id)
        }
        if id.utf8.count > 128 { bad(19, "lineItemId") }
        let restatement = f["restatement"]?.boolValue ?? false
        if f["erroneouslySubmitted"]?.boolValue == true, !restatement { bad(20, "erroneouslySubmitted") }
        if accepted[id] != nil || (external.lineItems[id] != nil && !restatement) { bad(1, "lineItemId") }
        if restatement, external.lineItems[id] == nil { bad(3, "lineItemId") }
        func int(_ field: String) -> Int64? {
            guard let v = f[field], !v.isNull else { bad(4, field); return nil }
            guard case .int(let i) = v else { bad(4, field); return nil }
            return i
        }
        let creation = int("creationDate")
        if let creation, creation > nowMs { bad(6, "creationDate") }
        if let creation, let expiration = token.expirationMs, creation >= expiration, f["eventType"]?.stringValue == "BUY",
           f["subscriptionEvent"]?.stringValue ?? "SUBSCRIPTION_START" == "SUBSCRIPTION_START" {
            bad(36, "creationDate")  // a new purchase under a token that had expired
        }
        let exclusive = int("amountTaxExclusive"), inclusive = int("amountTaxInclusive"), tax = int("taxAmount"), net = int("netAmountTaxExclusive")
        for (field, value) in [("amountTaxExclusive", exclusive), ("amountTaxInclusive", inclusive), ("taxAmount", tax), ("netAmountTaxExclusive", net)] {
            if let value, value < 0 { bad(15, field) }
        }
        if let exclusive, let inclusive, let tax, exclusive + tax != inclusive { bad(11, "amountTaxInclusive") }
        for field in ["reportingCurrency", "pricingCurrency", "taxCountry"] {
            guard let s = f[field]?.stringValue else { bad(4, field); continue }
            if s.utf8.count != 3 || !s.utf8.allSatisfy({ $0 >= 65 && $0 <= 90 }) { bad(field == "pricingCurrency" ? 19 : 7, field) }
        }
        let reference = f["referenceLineItemId"]?.stringValue
        let referenced = reference.flatMap { accepted[$0] ?? external.lineItems[$0] }
        var subscriptionEvent: String?
        switch f["eventType"]?.stringValue {
        case "REFUND":
            for field in ["productType", "productIdentifier", "quantity", "subscriptionEvent", "subscriptionStartDate", "subscriptionEndDate",
                          "subscriptionDaysOfPaidService"] where f[field] != nil { bad(5, field) }
            guard let reference else { bad(4, "referenceLineItemId"); break }
            if reference == id { bad(13, "referenceLineItemId"); break }
            guard let referenced, referenced.externalPurchaseId == token.externalPurchaseId else { bad(3, "referenceLineItemId"); break }
            guard referenced.eventType == "BUY" else { bad(21, "referenceLineItemId"); break }
            // The net after this refund: the purchase's net so far, less this refund's tax-exclusive amount.
            let before = ([referenced] + accepted.values.filter { $0.referenceLineItemId == reference && $0.eventType == "REFUND" }
                + external.lineItems.values.filter { $0.referenceLineItemId == reference && $0.eventType == "REFUND" }).map(\.netAmountTaxExclusive).min()!
            if let exclusive, let net, net != before - exclusive { bad(12, "netAmountTaxExclusive") }
        case "BUY":
            guard let product = f["productIdentifier"]?.stringValue, !product.isEmpty else { bad(4, "productIdentifier"); break }
            if product.utf8.count > 255 { bad(19, "productIdentifier") }
            if let q = int("quantity"), q < 1 { bad(16, "quantity") }
            if let exclusive, let net, net != exclusive, !restatement { bad(12, "netAmountTaxExclusive") }
            switch f["productType"]?.stringValue {
            case "ONE_TIME_BUY":
                for field in ["subscriptionEvent", "subscriptionStartDate", "subscriptionEndDate", "subscriptionDaysOfPaidService", "referenceLineItemId"]
                where f[field] != nil { bad(5, field) }
            case "SUBSCRIPTION":
                let event = f["subscriptionEvent"]?.stringValue
                subscriptionEvent = event
                guard let event else { bad(4, "subscriptionEvent"); break }
                guard ExternalPurchaseSubscriptionEvent.known.map(\.rawValue).contains(event) else { bad(7, "subscriptionEvent"); break }
                let start = int("subscriptionStartDate"), end = int("subscriptionEndDate"), days = int("subscriptionDaysOfPaidService")
                if let start, let end, start > end { bad(17, "subscriptionStartDate") }
                if let days, days < 0 { bad(15, "subscriptionDaysOfPaidService") }
                if event == "SUBSCRIPTION_START" {
                    if let days, days != 0 { bad(34, "subscriptionDaysOfPaidService") }
                    if reference != nil { bad(5, "referenceLineItemId") }
                } else {
                    guard let reference else { bad(4, "referenceLineItemId"); break }
                    if reference == id { bad(13, "referenceLineItemId"); break }
                    guard let referenced else { bad(3, "referenceLineItemId"); break }
                    if referenced.subscriptionEvent != "SUBSCRIPTION_START" { bad(29, "lineItemId") }
                }
            case nil:
                bad(4, "productType")
            default:
                bad(7, "productType")
            }
        case nil:
            bad(4, "eventType")
        default:
            bad(7, "eventType")
        }
        if ok, let exclusive, let net, let type = f["eventType"]?.stringValue {
            accepted[id] = SimLineItem(externalPurchaseId: token.externalPurchaseId, eventType: type, subscriptionEvent: subscriptionEvent,
                                       amountTaxExclusive: exclusive, netAmountTaxExclusive: net, referenceLineItemId: reference)
        }
    }

    /// Retrieve External Purchase Report: an accepted report, or Apple's NotFoundError.
    func retrieveExternalPurchaseReport(_ requestIdentifier: String) -> Result<JSONValue, ExternalPurchaseReportError> {
        guard let text = external.reports[requestIdentifier], let report = try? JSONParser.parse(text) else {
            return .failure(Self.reportError(3, "requestIdentifier"))
        }
        return .success(["report": report])
    }

    /// Apple's error objects: fixed `errorCode` and `errorMessage` per object (the messages of Apple's
    /// documentation where it gives one).
    static func reportError(_ code: Int, _ field: String?, _ lineItemId: String? = nil) -> ExternalPurchaseReportError {
        let messages: [Int: String] = [
            1: "The field's value is already submitted and a duplicate value is not expected.",
            3: "The referenced value was not found.",
            4: "A required field is missing.",
            5: "The provided field is not allowed.",
            6: "The provided date field is in the future and future values are not allowed.",
            7: "The provided value is unknown for an enumeration.",
            8: "Cannot mark status as NO_LINE_ITEM or UNRECOGNIZED_TOKEN after previously reporting as LINE_ITEM.",
            9: "A line item is required for an external purchase ID that has a LINE_ITEM status.",
            10: "A line item was provided for an external purchase ID that has a NO_LINE_ITEM or UNRECOGNIZED_TOKEN status.",
            11: "The tax exclusive amount plus the tax amount does not equal the tax inclusive amount.",
            12: "The net amount value does not match the expected value.",
            13: "The line item references itself.",
            15: "This field doesn't allow a negative value.",
            16: "This field requires a positive value.",
            17: "The start date is after the end date.",
            19: "The field's maximum length is exceeded.",
            20: "Expecting restatement for an erroneously submitted line item, but line item is not a restatement.",
            21: "The referenced line item is not a buy.",
            29: "The line item does not have subscription event INITIAL_BUY but it is referenced by a subscription line item with event type BUY.",
            34: "The subscriptionDaysOfPaidService field must be zero for a line item with subscription event SUBSCRIPTION_START.",
            36: "The line item's creation date is outside the token's active period.",
            37: "The DUPLICATE_TOKEN status is only for SERVICES and ACQUISITION tokens.",
        ]
        return ExternalPurchaseReportError(errorCode: code, errorMessage: messages[code] ?? "Invalid value.", fieldName: field, lineItemId: lineItemId)
    }

    /// The control API's view of a token.
    func externalTokenView(_ t: SimExternalToken) -> JSONValue {
        var o: [String: JSONValue] = [
            "token": .string(t.token), "externalPurchaseId": .string(t.externalPurchaseId), "api": .string(t.api),
            "tokenCreationDate": .int(t.creationMs), "environment": .string(config.environment.rawValue),
            "reportedStatuses": .array(t.reportedStatuses.map { .string($0) }), "unreportedNotified": .bool(t.unreportedNotified),
        ]
        if let type = t.tokenType { o["tokenType"] = .string(type) }
        if let e = t.expirationMs { o["tokenExpirationDate"] = .int(e) }
        if !t.isReported, !t.unreportedNotified { o["unreportedNotificationDate"] = .int(unreportedNotificationMs(t)) }
        return .object(o)
    }
}
