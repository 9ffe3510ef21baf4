import Foundation
@testable import KakinKit
import Testing

/// Kakin's answers read by the contract: which ones let the app finish, and the error ID of the others.
struct KakinAnswerTests {
    static let customer = """
        {"customerId": "u1", "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138", "status": "active",
         "subscriptions": [{"groupId": "premium", "productId": "premium.monthly", "originalTransactionId": "2000000000000001",
           "state": "inGracePeriod", "expiresAt": "2026-02-08T00:00:00Z", "gracePeriodExpiresAt": "2026-02-24T00:00:00Z",
           "willAutoRenew": true, "autoRenewProductId": "premium.monthly", "ownership": "purchased",
           "offer": {"type": "introductory", "id": null}, "pendingOffer": null, "expirationReason": null, "somethingNew": 1}],
         "nonConsumables": [{"productId": "noads", "transactionId": "2000000000000002", "ownership": "purchased"}],
         "nonRenewing": [{"productId": "season.pass", "expiresAt": "2026-04-01T00:00:00Z", "active": true}],
         "wallet": {"paid": 500, "free": 50, "total": 550},
         "eligibility": {"introductoryOffer": {"premium": false}}, "version": 7}
        """

    func answer(_ status: Int, _ body: String) -> KakinAnswer { KakinAnswer(status: status, body: Data(body.utf8)) }

    @Test func theContractsCustomerStatusDecodesAndUnknownFieldsAreIgnored() throws {
        let s = try answer(200, Self.customer).decode(CustomerStatus.self)
        #expect(s.kind == .active)
        #expect(s.subscriptions.first?.isEntitled == true)
        #expect(s.subscriptions.first?.hasBillingIssue == true)
        #expect(s.nonConsumables.map(\.productId) == ["noads"])
        #expect(s.wallet == Wallet(paid: 500, free: 50, total: 550))
        #expect(s.eligibility?.introductoryOffer?["premium"] == false)
        #expect(CustomerStatus.Kind(rawValue: "vip") == nil)
        #expect(s.version == 7)
    }

    /// The status's `version` is the customer's last event sequence: the higher one is the newer read; a Kakin older
    /// than events sends none, and then neither read is called newer.
    @Test func theStatusVersionTellsWhichReadIsNewer() throws {
        let newer = try answer(200, Self.customer).decode(CustomerStatus.self)
        let older = try answer(200, Self.customer.replacingOccurrences(of: #""version": 7"#, with: #""version": 6"#)).decode(CustomerStatus.self)
        let unversioned = try answer(200, Self.customer.replacingOccurrences(of: #", "version": 7"#, with: "")).decode(CustomerStatus.self)
        #expect(older.version == 6 && unversioned.version == nil)
        #expect(newer.isNewer(than: older) && !older.isNewer(than: newer) && !newer.isNewer(than: newer))
        #expect(!newer.isNewer(than: unversioned) && !unversioned.isNewer(than: older))
    }

    @Test func created201AndAlreadyProcessed409BothLetTheAppFinish() throws {
        let body = #"{"transaction": {"transactionId": "1"}, "grant": {"coins": {"paid": 500, "free": 50}}, "customer": \#(Self.customer)}"#
        guard case .credited(let s) = try answer(201, body).submitResult(transactionID: "1") else {
            Issue.record("201 should be credited")
            return
        }
        #expect(s.grant?.coins == Grant.Coins(paid: 500, free: 50))
        #expect(s.customer?.wallet.total == 550)
        let conflict = #"{"error": {"code": "already_processed", "id": "KKN-3001", "message": "m", "requestId": "r"}, "grant": {"coins": {"paid": 500, "free": 50}}}"#
        guard case .alreadyProcessed(let again) = try answer(409, conflict).submitResult(transactionID: "1") else {
            Issue.record("409 should be already processed")
            return
        }
        #expect(again.httpStatus == 409)
        #expect(again.grant?.coins?.paid == 500)
    }

    @Test func aRevokedTransactionIsRecordedAndEverythingElseKeepsItUnfinished() {
        let revoked = #"{"error": {"code": "transaction_revoked", "id": "KKN-3003", "message": "m", "requestId": "r"}}"#
        #expect((try? answer(422, revoked).submitResult(transactionID: "1")).map { if case .revoked = $0 { true } else { false } } == true)
        let invalid = #"{"error": {"code": "invalid_signature", "id": "KKN-2004", "message": "bad", "requestId": "req_9"}}"#
        #expect(throws: KakinKitError(id: "KKN-2004", code: "invalid_signature", message: "bad", requestId: "req_9", httpStatus: 422)) {
            try answer(422, invalid).submitResult(transactionID: "1")
        }
        // A 409 that is not already_processed is not a green light.
        let other409 = #"{"error": {"code": "insufficient_balance", "id": "KKN-4001", "message": "m", "requestId": "r"}}"#
        #expect(throws: KakinKitError.self) { try answer(409, other409).submitResult(transactionID: "1") }
    }

    @Test func aProxyPageIsUnreadableButKeepsItsStatusSoA502IsRetried() {
        let e = answer(502, "<html>Bad Gateway</html>").error()
        #expect(e.id == "KKN-8002")
        #expect(e.httpStatus == 502)
        #expect(e.isRetryable)
        #expect(KakinKitError(.networkUnavailable).isRetryable)
        #expect(!KakinKitError(id: "KKN-3004", code: "belongs_to_another_customer", message: "m", httpStatus: 403).isRetryable)
    }

    @Test func aServerWithoutTheOffersRouteMeansOffersAreNotSupported() throws {
        let notFound = #"{"error": {"code": "not_found", "id": "KKN-1005", "message": "No such endpoint.", "requestId": "r"}}"#
        #expect(throws: KakinKitError(.offersNotSupported)) { try answer(404, notFound).signedOffer(offerID: "o", format: .legacy) }
        let legacy = #"{"keyIdentifier": "K1", "nonce": "0f8fad5b-d9cb-469f-a165-70867728950e", "timestamp": 1800000000000, "signature": "MEQ=", "appAccountToken": "x"}"#
        #expect(try answer(201, legacy).signedOffer(offerID: "o", format: .legacy)
            == .legacy(offerID: "o", keyID: "K1", nonce: UUID(uuidString: "0f8fad5b-d9cb-469f-a165-70867728950e")!, signature: "MEQ=", timestamp: 1_800_000_000_000))
        #expect(try answer(201, #"{"jws": "a.b.c"}"#).signedOffer(offerID: "o", format: .jws) == .jws(offerID: "o", compactJWS: "a.b.c"))
        let notEligible = #"{"error": {"code": "offer_not_eligible", "id": "KKN-5001", "message": "m", "requestId": "r"}}"#
        #expect(throws: KakinKitError(id: "KKN-5001", code: "offer_not_eligible", message: "m", requestId: "r", httpStatus: 403)) {
            try answer(403, notEligible).signedOffer(offerID: "o", format: .legacy)
        }
    }

    @Test func aKakinThatCannotSignEligibilityLeavesItToTheAppStore() throws {
        #expect(try answer(201, #"{"jws": "a.b.c"}"#).eligibility(sentAppTransactionID: true) == "a.b.c")
        let notFound = #"{"error": {"code": "route_not_found", "id": "KKN-1005", "message": "No such endpoint.", "requestId": "r"}}"#
        #expect(try answer(404, notFound).eligibility(sentAppTransactionID: true) == nil)
        let noKey = #"{"error": {"code": "offer_signing_not_configured", "id": "KKN-5005", "message": "m", "requestId": "r"}}"#
        #expect(try answer(501, noKey).eligibility(sentAppTransactionID: true) == nil)
        // A customer Kakin cannot name (never bought, and the device gave no app transaction).
        let unnamed = #"{"error": {"code": "invalid_field", "id": "KKN-1002", "message": "send appTransactionId", "requestId": "r"}}"#
        #expect(try answer(400, unnamed).eligibility(sentAppTransactionID: false) == nil)
        #expect(throws: KakinKitError.self) { try answer(400, unnamed).eligibility(sentAppTransactionID: true) }
        #expect(throws: KakinKitError.self) { try answer(503, "busy").eligibility(sentAppTransactionID: true) }
    }

    @Test func everyClientErrorHasAnIDInKakinKitsRange() {
        let ids = ClientError.allCases.map(\.id)
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.hasPrefix("KKN-80") && Int($0.dropFirst(4))! <= 8099 })
    }
}
