import Foundation
@testable import KakinServer
import Testing

/// Limits are declared once per target (`Sources/*/Limits.swift`) and how they relate is asserted when a server
/// starts (`LimitRelations`, as TigerBeetle's constants.zig does): a broken relation is named, and stops the process.
@Suite struct LimitRelationsTests {
    @Test func everyDeclaredLimitRelatesAsItMust() {
        let declared = LimitRelations.declared
        #expect(declared.violations.isEmpty, "\(declared.violations)")
        #expect(declared.relations.count >= 15)
        // The app receipt: the largest receipt Kakin reads can be sent, and the field fits the 1 MiB body.
        #expect(declared.bodyBytesMax == 1 << 20)
        #expect(LimitRelations.base64Length(declared.appReceiptDERBytesMax) <= declared.appReceiptLengthMax)
        #expect(declared.appReceiptLengthMax < declared.bodyBytesMax)
    }

    @Test func aBrokenRelationIsCaughtAndNamedWithItsFigures() {
        var receipt = LimitRelations.declared
        receipt.appReceiptLengthMax = 1_100_000   // the value before the fourth release: past the body limit, never reached
        #expect(receipt.violations == [
            "appReceiptLengthMax 1100000 + bodyEnvelopeBytes 8192 <= bodyBytesMax 1048576: an app receipt the field takes fits a request",
        ])
        var reader = LimitRelations.declared
        reader.appReceiptDERBytesMax = 768 * 1024   // a receipt the reader takes but the field can't carry
        #expect(reader.violations.count == 1 && reader.violations[0].hasPrefix("base64 of AppReceipt.derBytesMax 1048576 <= appReceiptLengthMax"))
        var batch = LimitRelations.declared
        batch.deskReplayDeadMax = 5_000   // a batch past what its table takes
        #expect(batch.violations.count == 1 && batch.violations[0].hasPrefix("WebhookPage.replayDeadMax 5000 <= replayEventIdsMax 1000"))
    }

    @Test func aBrokenRelationStopsTheProcessBeforeItServes() async {
        await #expect(processExitsWith: .failure) {
            var broken = LimitRelations.declared
            broken.bearerTokenLengthMax = 32 * 1024
            LimitRelations.check(broken)
        }
        await #expect(processExitsWith: .success) {
            LimitRelations.check(.declared)
            exit(0)
        }
    }
}
