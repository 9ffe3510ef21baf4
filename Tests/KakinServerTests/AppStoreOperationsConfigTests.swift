import AppStoreSecurity
import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import Testing

/// The config keys of receipts and refund requests: `appReceipts` and `apps[].consumptionInformation`.
@Suite struct AppStoreOperationsConfig {
    func parse(_ text: String, base: String = "/tmp") throws -> Configuration {
        try Configuration.parse(try JSONParser.parse(text), baseDirectory: base, environment: [:])
    }

    func error(_ text: String) -> String {
        do {
            _ = try parse(text)
            return "no error"
        } catch let e as ConfigurationError {
            return e.description
        } catch {
            return "\(error)"
        }
    }

    static func app(_ extra: String = "") -> String {
        #"{"bundleId": "com.example.video", "environments": ["Sandbox"], "products": [{"productId": "coins.100", "type": "consumable", "coins": 100}]\#(extra)}"#
    }

    @Test func consumptionInformationIsPerAppAndOffByDefault() throws {
        #expect(try parse(#"{"apps": [\#(Self.app())]}"#).apps[0].consumptionInformation == nil)
        let c = try parse(#"{"apps": [\#(Self.app(#", "consumptionInformation": {"customerConsented": true}"#))]}"#)
        #expect(c.apps[0].consumptionInformation == ConsumptionInformationPolicy(customerConsented: true, sampleContentProvided: false, version: 2))
        let v1 = try parse(#"{"apps": [\#(Self.app(#", "consumptionInformation": {"customerConsented": true, "sampleContentProvided": true, "version": 1}"#))]}"#)
        #expect(v1.apps[0].consumptionInformation == ConsumptionInformationPolicy(customerConsented: true, sampleContentProvided: true, version: 1))
        #expect(error(#"{"apps": [\#(Self.app(#", "consumptionInformation": {}"#))]}"#)
            .hasPrefix("apps[0].consumptionInformation.customerConsented: is required"))
        #expect(error(#"{"apps": [\#(Self.app(#", "consumptionInformation": {"customerConsented": true, "version": 3}"#))]}"#)
            .hasPrefix("apps[0].consumptionInformation.version"))
        #expect(error(#"{"apps": [\#(Self.app(#", "consumptionInformation": {"customerConsented": true, "refund": "yes"}"#))]}"#)
            == "apps[0].consumptionInformation.refund: unknown key")
    }

    @Test func appReceiptsAreReadUnverifiedUnlessAsked() throws {
        #expect(try parse(#"{"apps": [\#(Self.app())]}"#).appReceiptRootsDER == nil)
        #expect(try parse(#"{"apps": [\#(Self.app())], "appReceipts": {"verifySignature": false}}"#).appReceiptRootsDER == nil)
        let apple = try parse(#"{"apps": [\#(Self.app())], "appReceipts": {"verifySignature": true}}"#)
        #expect(apple.appReceiptRootsDER == [try AppleRootCertificates.appleIncRoot()])

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-receipt-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let ca = try SigningCertificateAuthority(nowMs: 1_780_272_000_000)
        try Data(ca.rootDER).write(to: dir.appendingPathComponent("StoreKitTestCertificate.cer"))
        try Data("not a certificate".utf8).write(to: dir.appendingPathComponent("junk.cer"))
        let own = try parse(#"{"apps": [\#(Self.app())], "appReceipts": {"verifySignature": true, "trustedRoots": ["StoreKitTestCertificate.cer"]}}"#,
                            base: dir.path)
        #expect(own.appReceiptRootsDER == [ca.rootDER])
        do {
            _ = try parse(#"{"apps": [\#(Self.app())], "appReceipts": {"verifySignature": true, "trustedRoots": ["junk.cer"]}}"#, base: dir.path)
            Issue.record("a file that is not a certificate was accepted")
        } catch let e as ConfigurationError {
            #expect(e.description == "appReceipts.trustedRoots[0]: is not a DER certificate")
        }
        #expect(error(#"{"apps": [\#(Self.app())], "appReceipts": {"trustedRoots": ["a.cer"]}}"#)
            == "appReceipts.trustedRoots: is only used with verifySignature: true")
        #expect(error(#"{"apps": [\#(Self.app())], "appReceipts": {"verifySignature": true, "trustedRoots": []}}"#)
            == "appReceipts.trustedRoots: must list at least one certificate")
    }
}
