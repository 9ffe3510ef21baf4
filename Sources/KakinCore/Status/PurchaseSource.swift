/// Where a purchase was made, as statuses, ledger entries, events and the business numbers name it: `appStore`,
/// `googlePlay`, or the provider of a purchase outside the stores (`stripe`, `web`, …: `ExternalEntitlement.source`).
/// An open set of strings, so a store or provider added later needs no new case anywhere.
public enum PurchaseSource {
    public static let appStore = "appStore"
    public static let googlePlay = "googlePlay"

    /// The stores take a commission from what they sell (the app's `commissionRate`); a provider's fee is not known.
    public static func isStore(_ source: String) -> Bool { source == appStore || source == googlePlay }
}
