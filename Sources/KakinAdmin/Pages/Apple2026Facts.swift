import KakinCore

/// What the customer page shows of Apple's 2026 additions, read from the status the app sees (so the desk and
/// `GET /v1/customers/{id}` never disagree): consent rescinded by a parent or guardian, a 12-month commitment
/// billed monthly, win-back offers the App Store lists.
enum Apple2026Facts {
    /// Customer-level facts: `consentRescinded`.
    static func customer(_ status: JSONValue) -> [Fact] {
        guard let at = status["consentRescinded"]?["at"]?.stringValue else { return [] }
        return [Fact("consent", "rescinded by a parent or guardian at \(at) (RESCIND_CONSENT): restrict per your policy")]
    }

    /// A subscription's facts: its `commitment` and `eligibleWinBackOfferIds`.
    static func subscription(_ st: JSONValue) -> [Fact] {
        var facts: [Fact] = []
        if let c = st["commitment"], !c.isNull {
            let period = c["billingPeriod"]?.int64Value.map(String.init) ?? "?"
            let total = c["totalBillingPeriods"]?.int64Value.map(String.init) ?? "?"
            let ends = c["endsAt"]?.stringValue ?? "?"
            let price = c["price"]?.int64Value.map { " · commitment price \($0) (milliunits)" } ?? ""
            let renews = c["willRenew"]?.boolValue == true ? "renews at its end" : "cancelled: ends then (every month until then is billed)"
            facts.append(Fact("commitment", "billed monthly, month \(period) of \(total), until \(ends)\(price) · \(renews)"))
        }
        let winBack = (st["eligibleWinBackOfferIds"]?.arrayValue ?? []).compactMap(\.stringValue)
        if !winBack.isEmpty { facts.append(Fact("win-back offers", winBack.joined(separator: ", "))) }
        return facts
    }
}
