import KakinCore

/// The generic source: a purchase the team's backend took through any payment provider
/// (`POST /v1/customers/{id}/external-purchases`, the contract's "Purchases outside the App Store"):
/// `{"provider", "externalId", "productId", "price": <minor units>, "currency", "purchasedAt", "expiresAt"?,
/// "externalPurchaseToken"?}`. Validated here, strictly and with limits, before anything is stored; the catalog
/// check (is `productId` the app's, does its type take `expiresAt`) and the token's app check are the caller's,
/// who knows the app.
public struct ExternalPurchaseInput: Sendable, Hashable {
    /// Purchases dated earlier than 2000-01-01 are refused (a unit mistake: seconds for milliseconds).
    public static let earliestMs: Int64 = 946_684_800_000
    /// How far in the future `purchasedAt` may be, against the caller's clock (clock skew).
    public static let futureSkewMs: Int64 = 86_400_000
    static let keys: Set<String> = ["provider", "externalId", "productId", "price", "currency", "purchasedAt", "expiresAt", "externalPurchaseToken"]

    /// Lower case `[a-z0-9._-]`, 1–32 characters, not `appstore` (the App Store's own `source` is `appStore`).
    public var provider: String
    /// The provider's id of the payment: 1–255 characters of `[A-Za-z0-9._:@~-]` (it appears in the refund URL).
    public var externalId: String
    public var productId: String
    /// What the customer paid, in minor units of `currency`.
    public var price: Int64
    public var currency: CurrencyCode
    public var purchasedAtMs: Int64
    /// A subscription period's or a pass's end; after `purchasedAtMs`.
    public var expiresAtMs: Int64?
    /// The Apple external purchase token the purchase followed, decoded but not yet checked against the app.
    public var externalPurchaseToken: ExternalPurchaseToken?

    public init(provider: String, externalId: String, productId: String, price: Int64, currency: CurrencyCode, purchasedAtMs: Int64,
                expiresAtMs: Int64? = nil, externalPurchaseToken: ExternalPurchaseToken? = nil) {
        self.provider = provider
        self.externalId = externalId
        self.productId = productId
        self.price = price
        self.currency = currency
        self.purchasedAtMs = purchasedAtMs
        self.expiresAtMs = expiresAtMs
        self.externalPurchaseToken = externalPurchaseToken
    }

    /// The ledger's and status's `source` for this purchase.
    public var source: String { provider }

    /// Reads a request body. Unknown keys, wrong types and values out of their limits are refused with
    /// KKN-3050 naming the field (a bad token with KKN-3070); nothing is changed by a refused body.
    /// - Parameter nowMs: the caller's clock; `purchasedAt` may not be more than a day ahead of it.
    public init(json: JSONValue, nowMs: Int64) throws(KakinError) {
        guard case .object(let o) = json else { throw Self.invalid("The body must be a JSON object.") }
        if let unknown = o.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw Self.invalid("Unknown field \(unknown); an external purchase takes \(Self.keys.sorted().joined(separator: ", ")).")
        }
        guard let provider = o["provider"]?.stringValue, Self.isProvider(provider) else {
            throw Self.invalid("provider is required: 1 to \(Self.providerLengthMax) characters of a-z 0-9 . _ - (not appstore).")
        }
        guard let externalId = o["externalId"]?.stringValue, Self.isExternalId(externalId) else {
            throw Self.invalid("externalId is required: 1 to \(Self.externalIdLengthMax) characters of A-Z a-z 0-9 . _ : @ ~ -.")
        }
        guard let productId = o["productId"]?.stringValue, !productId.isEmpty, productId.utf8.count <= Self.productIdLengthMax,
              !productId.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw Self.invalid("productId is required: 1 to \(Self.productIdLengthMax) bytes without control characters.")
        }
        guard case .int(let price)? = o["price"], (0...Self.priceMax).contains(price) else {
            throw Self.invalid("price is required: a whole number of minor units from 0 to \(Self.priceMax) (120 JPY is 120, 9.80 EUR is 980).")
        }
        guard let currencyText = o["currency"]?.stringValue, let currency = CurrencyCode(currencyText) else {
            throw Self.invalid("currency is required: an ISO 4217 code such as JPY.")
        }
        guard let purchasedText = o["purchasedAt"]?.stringValue, let purchasedAt = Timestamp.parseRFC3339(purchasedText) else {
            throw Self.invalid("purchasedAt is required: an RFC 3339 UTC time such as 2026-11-30T15:00:00Z.")
        }
        guard purchasedAt >= Self.earliestMs, purchasedAt <= nowMs + Self.futureSkewMs else {
            throw Self.invalid("purchasedAt must be after 2000-01-01 and not in the future.")
        }
        var expiresAt: Int64?
        if let v = o["expiresAt"], !v.isNull {
            guard let text = v.stringValue, let ms = Timestamp.parseRFC3339(text) else {
                throw Self.invalid("expiresAt must be an RFC 3339 UTC time such as 2026-12-30T15:00:00Z.")
            }
            guard ms > purchasedAt else { throw Self.invalid("expiresAt must be after purchasedAt.") }
            expiresAt = ms
        }
        var token: ExternalPurchaseToken?
        if let v = o["externalPurchaseToken"], !v.isNull {
            guard let text = v.stringValue else { throw Self.invalid("externalPurchaseToken must be the token string the app received.") }
            token = try ExternalPurchaseToken(token: text)
        }
        self.init(provider: provider, externalId: externalId, productId: productId, price: price, currency: currency,
                  purchasedAtMs: purchasedAt, expiresAtMs: expiresAt, externalPurchaseToken: token)
    }

    /// The purchase as the contract's answers show it (`"purchase"`).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "provider": .string(provider), "externalId": .string(externalId), "productId": .string(productId),
            "price": .int(price), "currency": .string(currency.code), "purchasedAt": .string(Timestamp.rfc3339(purchasedAtMs)),
            "source": .string(source),
        ]
        if let expiresAtMs { o["expiresAt"] = .string(Timestamp.rfc3339(expiresAtMs)) }
        if let externalPurchaseToken { o["externalPurchaseId"] = .string(externalPurchaseToken.externalPurchaseId) }
        return .object(o)
    }

    public static func isProvider(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= providerLengthMax, s != "appstore" else { return false }
        return s.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 46 || $0 == 95 || $0 == 45 }
    }

    public static func isExternalId(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= externalIdLengthMax else { return false }
        return s.utf8.allSatisfy {
            ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57)
                || $0 == 46 || $0 == 95 || $0 == 58 || $0 == 64 || $0 == 126 || $0 == 45
        }
    }

    static func invalid(_ message: String) -> KakinError { KakinError(.externalPurchaseInvalid, message) }
}

/// `POST …/external-purchases/{provider}/{externalId}/refund {"amount"?}`: a partial refund in minor units, or
/// (no amount) whatever remains.
public struct ExternalRefundInput: Sendable, Hashable {
    public var amount: Int64?

    public init(amount: Int64?) { self.amount = amount }

    /// An empty body is a whole refund.
    public init(body: [UInt8]) throws(KakinError) {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            self.init(amount: nil)
            return
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(body, depthMax: 4)
        } catch {
            throw KakinError(.malformedJSON, "The request body is not valid JSON (\(error.reason) at byte \(error.offset)).")
        }
        guard case .object(let o) = json, o.keys.allSatisfy({ $0 == "amount" }) else {
            throw KakinError(.externalRefundInvalid, "A refund body is {} or {\"amount\": <minor units>}.")
        }
        guard let v = o["amount"], !v.isNull else {
            self.init(amount: nil)
            return
        }
        guard case .int(let amount) = v, amount >= 1, amount <= ExternalPurchaseInput.priceMax else {
            throw KakinError(.externalRefundInvalid)
        }
        self.init(amount: amount)
    }
}

/// What a refund of an external purchase does to money and coins, as pure arithmetic over what was refunded
/// before (Kakin keeps the refunded total per purchase). Refunds only grow: a repeated or late report of a
/// smaller total changes nothing.
public struct ExternalRefundPlan: Sendable, Hashable {
    /// Minor units refunded by this step (0: nothing new).
    public var amount: Int64
    /// Minor units refunded in all after this step.
    public var refundedTotal: Int64
    /// Whether the whole price is refunded now.
    public var isFull: Bool
    /// Paid coins to take back by this step: the purchase's coins in proportion to the refunded total, rounded
    /// down, so the steps add up and a whole refund takes back all of them.
    public var coinsToClawBack: Int64

    /// A refund asked through the API: `requested` nil refunds the remainder; more than the remainder, or
    /// anything after a whole refund, is refused (nothing changes).
    public static func requested(_ requested: Int64?, price: Int64, refundedSoFar: Int64, coins: Int64 = 0) throws(KakinError) -> ExternalRefundPlan {
        precondition(price >= 0 && refundedSoFar >= 0 && refundedSoFar <= price, "refunded total outside 0…price")
        let remaining = price - refundedSoFar
        guard remaining > 0 || (price == 0 && refundedSoFar == 0) else { throw KakinError(.externalPurchaseAlreadyRefunded) }
        let amount = requested ?? remaining
        guard amount >= 0, amount <= remaining, requested == nil || amount >= 1 else {
            throw KakinError(.externalRefundInvalid, "A refund amount must be a whole number of minor units from 1 to \(remaining), what remains unrefunded.")
        }
        return plan(total: refundedSoFar + amount, price: price, refundedSoFar: refundedSoFar, coins: coins, forceFull: requested == nil)
    }

    /// A refunded total reported by a provider (Stripe's cumulative `amount_refunded`): idempotent, order-free.
    public static func reportedTotal(_ total: Int64, price: Int64, refundedSoFar: Int64, coins: Int64 = 0) -> ExternalRefundPlan {
        precondition(price >= 0 && refundedSoFar >= 0 && refundedSoFar <= price, "refunded total outside 0…price")
        let capped = min(max(total, refundedSoFar), price)
        return plan(total: capped, price: price, refundedSoFar: refundedSoFar, coins: coins, forceFull: false)
    }

    static func plan(total: Int64, price: Int64, refundedSoFar: Int64, coins: Int64, forceFull: Bool) -> ExternalRefundPlan {
        let isFull = forceFull || total >= price
        func clawed(_ refunded: Int64, full: Bool) -> Int64 {
            if full { return coins }
            guard price > 0 else { return 0 }
            return price.dividingFullWidth(coins.multipliedFullWidth(by: refunded)).quotient.clamped(to: 0...coins)
        }
        let before = clawed(refundedSoFar, full: refundedSoFar >= price && price > 0)
        let after = clawed(total, full: isFull)
        let plan = ExternalRefundPlan(amount: total - refundedSoFar, refundedTotal: total, isFull: isFull, coinsToClawBack: after - before)
        precondition(plan.amount >= 0 && plan.coinsToClawBack >= 0 && plan.refundedTotal <= price, "a refund only adds")
        return plan
    }
}

extension Int64 {
    func clamped(to range: ClosedRange<Int64>) -> Int64 { Swift.min(Swift.max(self, range.lowerBound), range.upperBound) }
}
