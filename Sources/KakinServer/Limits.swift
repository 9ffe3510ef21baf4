// KakinServer's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

import AppStoreSecurity
import HTTPServer
import KakinAdmin
import KakinEvents
import KakinEventsListener
import KakinExternal
import KakinOfferings
import KakinService
import KakinStorage
extension Configuration {
    /// Exchange rates configured.
    static let ratesMax = 300
}

enum RequestLimits {
/// Bounds on what a request may carry, beyond the HTTP server's own body and header limits.
    /// Room for the JSON around the largest field of a request body (its key, quotes, the other fields), in bytes.
    static let bodyEnvelopeBytes = 8 * 1024
    /// JSON nesting of a request body.
    static let jsonDepthMax = 32
    /// Bytes of a `signedTransaction` (or another JWS field) in a request.
    static let jwsBytesMax = 64 * 1024
    /// Characters of an `Idempotency-Key`.
    static let idempotencyKeyLengthMax = 255
    /// Characters of a free text field (item, recipient, reason).
    static let textFieldLengthMax = 255
    /// Characters of `X-Purchase-Process-Id`.
    static let purchaseProcessIdLengthMax = 128
    /// Ledger entries of one page, at most (`limit`).
    static let ledgerPageMax = 200
    /// Supporters of a recipient listed, at most (`top`).
    static let topSupportersMax = 100
}

extension Authenticator {
    /// Characters of a bearer token (a customer's JWT or an API key).
    static let tokenLengthMax = 4096
}

extension KakinApp {
    /// Bytes of an App Store notification's `signedPayload`.
    static let signedPayloadBytesMax = 256 * 1024
    /// Characters of an `appReceipt` (base64): the largest receipt `AppReceipt` reads, with the JSON around it, within a request body.
    static let appReceiptLengthMax = 1_040_000
}

extension Exporter {
    /// Customers an export filtered by experiment variant keeps at most (held in memory as a set).
    static let cohortCustomersMax = 2_000_000
}

extension ImportCommand {
    /// Rejects printed at the end (the rest are at the rejects URL).
    static let rejectsShownMax = 10
}

/// How limits of different targets must relate, asserted when a server starts (`KakinRuntime.start`), as TigerBeetle's
/// constants.zig asserts its constants: a field below the body that carries it, a token below the header, a batch
/// below what its table takes. `declared` reads each limit where it is declared; a relation that does not hold names
/// itself with its figures (`violations`), so a test can break one limit and see it caught.
struct LimitRelations {
    var bodyBytesMax: Int
    var headerBytesMax: Int
    var targetBytesMax: Int
    var bodyEnvelopeBytes: Int
    var appReceiptLengthMax: Int
    var appReceiptDERBytesMax: Int
    var requestJWSBytesMax: Int
    var verifierJWSBytesMax: Int
    var notificationPayloadBytesMax: Int
    var stripeBodyBytesMax: Int
    var deskFormBodyBytesMax: Int
    var adminKeyLengthMax: Int
    var adminNameLengthMax: Int
    var bearerTokenLengthMax: Int
    var apiTokenBytesMax: Int
    var searchQueryLengthMax: Int
    var eventPayloadBytesMax: Int
    var listenerBodyBytesMax: Int
    var recentErrorsBufferMax: Int
    var recentErrorsRowsMax: Int
    var deskReplayDeadMax: Int
    var replayEventIdsMax: Int
    var feedPageMax: Int
    var feedScanRowsMax: Int
    var offeringObjectsMax: Int
    var offeringObjectsReadMax: Int
    var rollupPassCustomersMax: Int
    var rollupPassEventsMax: Int
    var metricFactsCustomersMax: Int
    /// Kakin's HTTP limits: `HTTPServerConfiguration`'s defaults, which `kakin serve` keeps.
    static let declared: LimitRelations = {
        let http = HTTPServerConfiguration()
        return LimitRelations(
            bodyBytesMax: http.bodyBytesMax, headerBytesMax: http.headerBytesMax, targetBytesMax: http.targetBytesMax,
            bodyEnvelopeBytes: RequestLimits.bodyEnvelopeBytes, appReceiptLengthMax: KakinApp.appReceiptLengthMax,
            appReceiptDERBytesMax: AppReceipt.derBytesMax, requestJWSBytesMax: RequestLimits.jwsBytesMax,
            verifierJWSBytesMax: SignedDataVerifier.jwsBytesMax, notificationPayloadBytesMax: KakinApp.signedPayloadBytesMax,
            stripeBodyBytesMax: StripeEvent.bodyBytesMax, deskFormBodyBytesMax: FormFields.bodyBytesMax,
            adminKeyLengthMax: SupportDesk.keyLengthMax, adminNameLengthMax: SupportDesk.actorNameLengthMax,
            bearerTokenLengthMax: Authenticator.tokenLengthMax, apiTokenBytesMax: AppStoreServerAPITokenVerifier.tokenBytesMax,
            searchQueryLengthMax: SearchQuery.lengthMax, eventPayloadBytesMax: KakinStore.eventPayloadBytesMax,
            listenerBodyBytesMax: WebhookListener.bodyBytesMax, recentErrorsBufferMax: RecentErrorLog.bufferMax,
            recentErrorsRowsMax: RecentErrorLog.rowsMax, deskReplayDeadMax: WebhookPage.replayDeadMax,
            replayEventIdsMax: KakinStore.replayEventIdsMax, feedPageMax: KakinStore.feedLimitRange.upperBound,
            feedScanRowsMax: KakinStore.feedScanRowsMax,
            offeringObjectsMax: OfferingLimits.offeringsMax + OfferingLimits.placementsMax + OfferingLimits.experimentsMax,
            offeringObjectsReadMax: OfferingsRecords.objectsReadMax, rollupPassCustomersMax: BusinessMetrics.passCustomersMax,
            rollupPassEventsMax: BusinessMetrics.passEventsMax, metricFactsCustomersMax: KakinStore.metricFactsCustomersMax)
    }()
    static func base64Length(_ bytes: Int) -> Int { (bytes + 2) / 3 * 4 }
    var relations: [(statement: String, holds: Bool)] {
        let bearer = "Authorization: Bearer ".utf8.count
        let search = "/admin/search?q=".utf8.count
        return [
            ("appReceiptLengthMax \(appReceiptLengthMax) + bodyEnvelopeBytes \(bodyEnvelopeBytes) <= bodyBytesMax \(bodyBytesMax): an app receipt the field takes fits a request",
             appReceiptLengthMax + bodyEnvelopeBytes <= bodyBytesMax),
            ("base64 of AppReceipt.derBytesMax \(Self.base64Length(appReceiptDERBytesMax)) <= appReceiptLengthMax \(appReceiptLengthMax): the largest receipt Kakin reads can be sent",
             Self.base64Length(appReceiptDERBytesMax) <= appReceiptLengthMax),
            ("RequestLimits.jwsBytesMax \(requestJWSBytesMax) + bodyEnvelopeBytes <= bodyBytesMax \(bodyBytesMax): a signed transaction fits a request",
             requestJWSBytesMax + bodyEnvelopeBytes <= bodyBytesMax),
            ("RequestLimits.jwsBytesMax \(requestJWSBytesMax) <= SignedDataVerifier.jwsBytesMax \(verifierJWSBytesMax): a JWS a request carries is one the verifier reads",
             requestJWSBytesMax <= verifierJWSBytesMax),
            ("signedPayloadBytesMax \(notificationPayloadBytesMax) <= SignedDataVerifier.jwsBytesMax \(verifierJWSBytesMax): a notification the route takes is one the verifier reads",
             notificationPayloadBytesMax <= verifierJWSBytesMax),
            ("signedPayloadBytesMax \(notificationPayloadBytesMax) + bodyEnvelopeBytes <= bodyBytesMax \(bodyBytesMax): a notification fits a request",
             notificationPayloadBytesMax + bodyEnvelopeBytes <= bodyBytesMax),
            ("StripeEvent.bodyBytesMax \(stripeBodyBytesMax) <= bodyBytesMax \(bodyBytesMax): a Stripe event the webhook reads passes the HTTP server",
             stripeBodyBytesMax <= bodyBytesMax),
            ("FormFields.bodyBytesMax \(deskFormBodyBytesMax) <= bodyBytesMax \(bodyBytesMax): a desk form the desk reads passes the HTTP server",
             deskFormBodyBytesMax <= bodyBytesMax),
            ("keyLengthMax \(adminKeyLengthMax) + actorNameLengthMax \(adminNameLengthMax) encoded + bodyEnvelopeBytes <= FormFields.bodyBytesMax \(deskFormBodyBytesMax): the sign-in form fits",
             3 * (adminKeyLengthMax + adminNameLengthMax) + bodyEnvelopeBytes <= deskFormBodyBytesMax),
            ("Authenticator.tokenLengthMax \(bearerTokenLengthMax) + \"Authorization: Bearer \" <= headerBytesMax \(headerBytesMax): a token Kakin reads fits a header",
             bearerTokenLengthMax + bearer <= headerBytesMax),
            ("AppStoreServerAPITokenVerifier.tokenBytesMax \(apiTokenBytesMax) + \"Authorization: Bearer \" <= headerBytesMax \(headerBytesMax): an API token the simulator reads fits a header",
             apiTokenBytesMax + bearer <= headerBytesMax),
            ("SearchQuery.lengthMax \(searchQueryLengthMax) percent-encoded UTF-8 (12 bytes each) + the search path <= targetBytesMax \(targetBytesMax): a search fits a URL",
             searchQueryLengthMax * 12 + search <= targetBytesMax),
            ("eventPayloadBytesMax \(eventPayloadBytesMax) + bodyEnvelopeBytes <= WebhookListener.bodyBytesMax \(listenerBodyBytesMax): kakin events listen takes every event Kakin sends",
             eventPayloadBytesMax + bodyEnvelopeBytes <= listenerBodyBytesMax),
            ("RecentErrorLog.bufferMax \(recentErrorsBufferMax) <= rowsMax \(recentErrorsRowsMax): a buffer's worth of errors fits the table",
             recentErrorsBufferMax <= recentErrorsRowsMax),
            ("WebhookPage.replayDeadMax \(deskReplayDeadMax) <= replayEventIdsMax \(replayEventIdsMax): the desk's replay of dead deliveries is one replay",
             deskReplayDeadMax <= replayEventIdsMax),
            ("feedLimitRange.upperBound \(feedPageMax) <= feedScanRowsMax \(feedScanRowsMax): a full feed page fits one scan",
             feedPageMax <= feedScanRowsMax),
            ("offerings + placements + experiments at their limits \(offeringObjectsMax) <= OfferingsRecords.objectsReadMax \(offeringObjectsReadMax): a full configuration is read whole",
             offeringObjectsMax <= offeringObjectsReadMax),
            ("BusinessMetrics.passCustomersMax \(rollupPassCustomersMax) <= passEventsMax \(rollupPassEventsMax): a rollup pass can fill its customers",
             rollupPassCustomersMax <= rollupPassEventsMax),
            ("BusinessMetrics.passCustomersMax \(rollupPassCustomersMax) a multiple of metricFactsCustomersMax \(metricFactsCustomersMax): a full pass reads its facts in full pages",
             rollupPassCustomersMax % metricFactsCustomersMax == 0),
        ]
    }
    var violations: [String] { relations.filter { !$0.holds }.map(\.statement) }
    static func check(_ limits: LimitRelations) {
        let broken = limits.violations
        precondition(broken.isEmpty, "limits that do not relate as they must: " + broken.joined(separator: "; "))
    }
}
