import Foundation
import GooglePlayClient
import GooglePlaySecurity
@testable import GooglePlaySimulator
import KakinCore
import KakinCrypto
import StoreAPITransport
import Synchronization
import Testing

/// Kakin's own Developer API client over a real socket (URLSessionTransport) against the Play simulator, with the
/// service account the simulator hands out: every call Kakin makes, Google's refusals as typed errors.
@Suite(.serialized) struct ClientAgainstSimulatorTests {
    static let account = "0b7c57f4-4a3e-4d0e-9a64-2a61f1f0c0de"

    func client(_ play: PlayServer, transport: any HTTPTransport = URLSessionTransport()) throws -> GooglePlayDeveloperAPIClient {
        try GooglePlayDeveloperAPIClient(configuration: GooglePlayClientConfiguration(serviceAccount: try play.serviceAccount(),
                                                                                      packageName: "dev.kakin.demo", apiRoot: play.apiRoot),
                                         transport: transport, clock: play.clock)
    }

    @Test func aSubscriptionIsReadAcknowledgedCancelledDeferredAndRevoked() async throws {
        let play = try PlayServer()
        defer { Task { await play.stop() } }
        let api = try client(play)
        let bought = try await play.control("POST", "/v1/purchases", ["productId": "premium", "basePlanId": "yearly", "obfuscatedAccountId": .string(Self.account)])
        let token = try #require(bought["purchaseToken"]?.stringValue)

        let sub = try await api.subscriptionV2(token: token)
        #expect(sub.subscriptionState == .active && sub.acknowledgementState == .pending && !sub.isTestPurchase)
        #expect(sub.lineItems.first?.productId == "premium" && sub.lineItems.first?.basePlanId == "yearly" && sub.lineItems.first?.autoRenewEnabled == true)
        #expect(sub.lineItems.first?.latestSuccessfulOrderId == bought["orderId"]?.stringValue)
        #expect(sub.externalAccountIdentifiers.obfuscatedExternalAccountId == Self.account)

        try await api.acknowledgeSubscription(subscriptionId: "premium", token: token)
        #expect(try await api.subscriptionV2(token: token).acknowledgementState == .acknowledged)

        let deferred = try await api.deferSubscription(token: token, seconds: 7 * 86_400)
        #expect(deferred.first?.expiryTimeMs == (sub.expiryTimeMs ?? 0) + 7 * 86_400_000)

        try await api.cancelSubscription(token: token, type: .userRequestedStopRenewals)
        let cancelled = try await api.subscriptionV2(token: token)
        #expect(cancelled.subscriptionState == .canceled && cancelled.lineItems.first?.autoRenewEnabled == false)
        if case .user = cancelled.cancellation {} else { Issue.record("expected a user cancellation, got \(String(describing: cancelled.cancellation))") }

        try await api.revokeSubscription(token: token, revocation: .fullRefund)
        #expect(try await api.subscriptionV2(token: token).subscriptionState == .expired)
        let voided = try await api.voidedPurchases()
        #expect(voided.voidedPurchases.map(\.purchaseToken) == [token] && voided.voidedPurchases.first?.voidedSource == .developer)
        let types = try await play.control("GET", "/v1/notifications")["notifications"]?.arrayValue?.compactMap { $0["type"]?.stringValue }
        #expect(types == ["VOIDED_PURCHASE", "SUBSCRIPTION_REVOKED", "SUBSCRIPTION_CANCELED", "SUBSCRIPTION_DEFERRED", "SUBSCRIPTION_PURCHASED"])
    }

    @Test func aOneTimePurchaseIsReadInBothVersionsAcknowledgedConsumedAndRefundedInPart() async throws {
        let play = try PlayServer()
        defer { Task { await play.stop() } }
        let api = try client(play)
        let bought = try await play.control("POST", "/v1/purchases", ["productId": "coins_500", "quantity": 3, "obfuscatedAccountId": .string(Self.account)])
        let token = try #require(bought["purchaseToken"]?.stringValue)
        let orderId = try #require(bought["orderId"]?.stringValue)
        #expect(orderId.wholeMatch(of: /GPA\.\d{4}-\d{4}-\d{4}-\d{5}/) != nil)

        let v1 = try await api.productPurchase(productId: "coins_500", token: token)
        #expect(v1.purchaseState == 0 && v1.quantity == 3 && v1.refundableQuantity == 3 && v1.orderId == orderId && v1.acknowledgementState == 0)
        let v2 = try await api.productPurchaseV2(token: token)
        #expect(v2.purchaseState == .purchased && v2.lineItems.first?.quantity == 3 && v2.externalAccountIdentifiers.obfuscatedExternalAccountId == Self.account)

        try await api.acknowledgeProduct(productId: "coins_500", token: token)
        try await api.consumeProduct(productId: "coins_500", token: token)
        do throws(GooglePlayAPIError) {
            try await api.consumeProduct(productId: "coins_500", token: token)
            Issue.record("a second consume must be refused")
        } catch {
            #expect(error.kind == .refused && error.isRefused && !error.isRetryable && error.reason == "invalidPurchaseState" && error.attempts == 1)
        }
        do throws(GooglePlayAPIError) {
            _ = try await api.productPurchase(productId: "coins_1200", token: token)
            Issue.record("another product's id must be refused")
        } catch {
            #expect(error.httpStatus == 400 && error.reason == "purchaseTokenDoesNotMatchProductId")
        }

        // The order refunded through the API: all three packs.
        try await api.refundOrder(orderId: orderId, revoke: false)
        let page = try await api.voidedPurchases(includeQuantityBasedPartialRefund: true)
        #expect(page.voidedPurchases.first?.voidedQuantity == 3)
        #expect(try await api.productPurchase(productId: "coins_500", token: token).refundableQuantity == 0)
    }

    @Test func unknownTokensAreRefusedAndTokensLongExpiredAnswer410() async throws {
        let play = try PlayServer()
        defer { Task { await play.stop() } }
        let api = try client(play)
        do throws(GooglePlayAPIError) {
            _ = try await api.subscriptionV2(token: "no-such-token")
            Issue.record("an unknown token must be refused")
        } catch {
            #expect(error.kind == .refused && error.httpStatus == 400 && error.reason == "invalid" && !error.description.contains("no-such-token"))
        }
        let bought = try await play.control("POST", "/v1/purchases", ["productId": "premium"])
        let token = try #require(bought["purchaseToken"]?.stringValue)
        try await api.acknowledgeSubscription(subscriptionId: "premium", token: token)
        _ = try await play.control("POST", "/v1/subscriptions/\(token)/actions", ["action": "cancel"])
        let expired = try await api.subscriptionV2(token: token)
        // 59 days after the expiry the token still answers; past 60 days it is gone.
        play.clock.set((expired.expiryTimeMs ?? 0) + 59 * 86_400_000)
        await play.simulator.advance(toMs: play.clock.nowMs())
        #expect(try await api.subscriptionV2(token: token).subscriptionState == .expired)
        play.clock.set((expired.expiryTimeMs ?? 0) + 61 * 86_400_000)
        await play.simulator.advance(toMs: play.clock.nowMs())
        do throws(GooglePlayAPIError) {
            _ = try await api.subscriptionV2(token: token)
            Issue.record("a token 61 days past its expiry answers 410")
        } catch {
            #expect(error.kind == .tokenNoLongerValid && error.httpStatus == 410 && error.reason == "purchaseTokenNoLongerValid" && error.isRefused)
        }
    }

    @Test func voidedPurchasesArePagedByToken() async throws {
        let play = try PlayServer()
        defer { Task { await play.stop() } }
        let api = try client(play)
        for _ in 0..<5 {
            let bought = try await play.control("POST", "/v1/purchases", ["productId": "coins_1200"])
            _ = try await play.control("POST", "/v1/orders/\(bought["orderId"]!.stringValue!)/refund")
        }
        let first = try await api.voidedPurchases(maxResults: 2)
        #expect(first.voidedPurchases.count == 2 && first.nextPageToken != nil)
        let all = try await api.allVoidedPurchases()
        #expect(all.voided.count == 5 && all.nextPageToken == nil)
        let second = try await api.voidedPurchases(maxResults: 2, pageToken: first.nextPageToken)
        #expect(second.voidedPurchases.map(\.orderId) == Array(all.voided.map(\.orderId)[2..<4]))
    }

    @Test func theAccessTokenIsFetchedOnceAndCallsWithoutOneAre401() async throws {
        let play = try PlayServer()
        defer { Task { await play.stop() } }
        let counting = CountingTransport(URLSessionTransport())
        let api = try client(play, transport: counting)
        let bought = try await play.control("POST", "/v1/purchases", ["productId": "noads"])
        let token = try #require(bought["purchaseToken"]?.stringValue)
        for _ in 0..<3 { _ = try await api.productPurchaseV2(token: token) }
        #expect(counting.urls.withLock { $0.filter { $0.hasSuffix("/play-simulator/token") }.count } == 1)

        let anonymous = try await URLSessionTransport().send(
            HTTPClientRequest(method: "GET", url: play.apiRoot + "androidpublisher/v3/applications/dev.kakin.demo/purchases/productsv2/tokens/\(token)",
                              headers: [], body: nil, timeoutMs: 5000), responseBytesMax: 65536)
        #expect(anonymous.status == 401)
        #expect(GoogleAPIErrorBody(json: try JSONParser.parse(anonymous.body))?.status == "UNAUTHENTICATED")
    }
}

/// Counts what a transport sends.
final class CountingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let urls = Mutex<[String]>([])
    init(_ inner: any HTTPTransport) { self.inner = inner }
    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse {
        urls.withLock { $0.append(request.url.split(separator: "?").first.map(String.init) ?? request.url) }
        return try await inner.send(request, responseBytesMax: responseBytesMax)
    }
}
