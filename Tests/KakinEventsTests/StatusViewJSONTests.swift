import KakinCore
import Testing
@testable import KakinEvents

/// The view a change stores and compares with (`outbox_heads.status_view`) is written straight to bytes: they must be
/// the bytes the tree below (how views were stored before) serializes to, or every change would find a stored view
/// changed and write it again.
@Suite struct StatusViewJSONTests {
    @Test func aStoredViewIsWrittenAsItsJSONSerializes() {
        var view = StatusView()
        #expect(view.jsonString == view.json.jsonString)
        view.subscriptions["2000"] = .init(productId: "premium.yearly", latestTransactionId: "2003", state: .inGracePeriod, expiresAtMs: nil,
                                           willAutoRenew: false, offerType: "introductory", offerId: "intro\"1")
        view.subscriptions["1000"] = .init(productId: "premium.monthly", latestTransactionId: "1001", state: .subscribed,
                                           expiresAtMs: 1_767_225_600_000, willAutoRenew: true, offerType: nil, offerId: nil)
        view.access = ["premium": ["stripe", "appStore"], "Ärger": ["googlePlay"], "noads": []]
        #expect(view.jsonString == view.json.jsonString)
        view.access = nil  // a view read from before groups were told stores its access empty
        #expect(view.jsonString == view.json.jsonString)
    }
}

extension StatusView {
    /// The view as the tree views were stored from before they were written straight to bytes: the test's reference.
    var json: JSONValue {
        ["subscriptions": .object(subscriptions.mapValues { s in
            ["productId": .string(s.productId), "latestTransactionId": .string(s.latestTransactionId), "state": .string(s.state.rawValue),
             "expiresAtMs": s.expiresAtMs.map(JSONValue.int) ?? .null, "willAutoRenew": .bool(s.willAutoRenew),
             "offerType": .string(s.offerType), "offerId": .string(s.offerId)]
         }),
         "access": .object((access ?? [:]).mapValues { .array($0.sorted().map(JSONValue.string)) })]
    }
}
