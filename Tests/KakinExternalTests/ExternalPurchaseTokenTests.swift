import Foundation
import KakinCore
import KakinExternal
import Testing

/// The token strings are Apple's own examples ("Receiving and decoding external purchase tokens").
@Suite struct ExternalPurchaseTokenTests {
    static let applePlain = "ewoJImFwcEFwcGxlSWQiOjEyMzQ1Njc4OTAsCgkiYnVuZGxlSWQiOiJjb20uZXhhbXBsZSIsCgkidG9rZW5DcmVhdGlvbkRhdGUiOjE3MDYxNjk2MDAwMDAsCgkiZXh0ZXJuYWxQdXJjaGFzZUlkIjoiMDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwIgp9"
    static let appleServices = "eyJhcHBBcHBsZUlkIjoxMjM0NTY3ODkwLCJidW5kbGVJZCI6ImNvbS5leGFtcGxlIiwidG9rZW5DcmVhdGlvbkRhdGUiOjE3NTA4OTYwMDAwMDAsImV4dGVybmFsUHVyY2hhc2VJZCI6IjAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMCIsInRva2VuVHlwZSI6IlNFUlZJQ0VTIiwidG9rZW5FeHBpcmF0aW9uRGF0ZSI6MTc4MjQzMjAwMDAwMH0K"
    static let appleSandboxServices = "eyJhcHBBcHBsZUlkIjoxMjM0NTY3ODkwLCJidW5kbGVJZCI6ImNvbS5leGFtcGxlIiwidG9rZW5DcmVhdGlvbkRhdGUiOjE3MDYxNjk2MDAwMDAsImV4dGVybmFsUHVyY2hhc2VJZCI6IlNBTkRCT1hfMDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwIiwidG9rZW5UeXBlIjoiU0VSVklDRVMiLCJ0b2tlbkV4cGlyYXRpb25EYXRlIjoxNzA2MTczMjAwMDAwfQo="

    func code(_ body: () throws -> Void) -> String? {
        do { try body() } catch let e as KakinError { return e.kind.id } catch { return "other" }
        return nil
    }

    @Test func applesExampleTokensDecode() throws {
        let plain = try ExternalPurchaseToken(token: Self.applePlain)
        #expect(plain.appAppleId == 1_234_567_890 && plain.bundleId == "com.example" && plain.tokenCreationDateMs == 1_706_169_600_000)
        #expect(plain.externalPurchaseId == "00000000-0000-0000-0000-000000000000" && plain.tokenType == nil)
        #expect(plain.environment == .production && plain.unreportedNotificationMs == 1_706_169_600_000 + 10 * 86_400_000)

        let services = try ExternalPurchaseToken(token: Self.appleServices)
        #expect(services.tokenType == .services && services.tokenExpirationDateMs == 1_782_432_000_000)
        #expect(services.unreportedNotificationMs == 1_782_432_000_000)

        let sandbox = try ExternalPurchaseToken(token: Self.appleSandboxServices)  // padded, newline inside the JSON
        #expect(sandbox.environment == .sandbox && sandbox.externalPurchaseId.hasPrefix("SANDBOX_"))
        #expect(sandbox.tokenExpirationDateMs! - sandbox.tokenCreationDateMs == 3_600_000)  // an hour in the sandbox
    }

    @Test func aTokenIsCheckedAgainstTheApp() throws {
        let production = try ExternalPurchaseToken(token: Self.appleServices)
        let accepted: Set<AppStoreEnvironment> = [.production, .sandbox]
        #expect(code { try production.check(bundleId: "com.example", appAppleId: 1_234_567_890, environments: accepted) } == nil)
        #expect(code { try production.check(bundleId: "com.other", appAppleId: 1_234_567_890, environments: accepted) } == "KKN-3071")
        #expect(code { try production.check(bundleId: "com.example", appAppleId: 42, environments: accepted) } == "KKN-3072")
        #expect(code { try production.check(bundleId: "com.example", appAppleId: 1_234_567_890, environments: [.sandbox]) } == "KKN-3073")
        #expect(code { try production.check(bundleId: "com.example", appAppleId: nil, environments: accepted, acceptedTypes: [.inApp, .linkOut]) } == "KKN-3075")
        let sandbox = try ExternalPurchaseToken(token: Self.appleSandboxServices)
        #expect(code { try sandbox.check(bundleId: "com.example", appAppleId: 42, environments: [.production]) } == "KKN-3073")
        // Apple does not check the app Apple ID of sandbox data; neither does Kakin.
        #expect(code { try sandbox.check(bundleId: "com.example", appAppleId: 42, environments: [.sandbox]) } == nil)
    }

    @Test func aCustomLinkTokenTakesPurchasesOnlyWhileActive() throws {
        let t = try ExternalPurchaseToken(token: Self.appleSandboxServices)
        #expect(code { try t.checkActive(atMs: t.tokenExpirationDateMs! - 1) } == nil)
        #expect(code { try t.checkActive(atMs: t.tokenExpirationDateMs!) } == "KKN-3074")
        #expect(try ExternalPurchaseToken(token: Self.applePlain).isActive(atMs: Int64.max))
    }

    @Test func malformedTokensAreRefused() {
        func encoded(_ json: String) -> String { Base64.urlEncode(Array(json.utf8)) }
        let bad = [
            "", "%%%", String(repeating: "A", count: 5000), encoded("[1]"), encoded("{}"),
            encoded(#"{"appAppleId":"1","bundleId":"b","tokenCreationDate":1,"externalPurchaseId":"x"}"#),
            encoded(#"{"appAppleId":1,"bundleId":"","tokenCreationDate":1,"externalPurchaseId":"x"}"#),
            encoded(#"{"appAppleId":1,"bundleId":"b","tokenCreationDate":1,"externalPurchaseId":"a b"}"#),
            encoded(#"{"appAppleId":1,"bundleId":"b","tokenCreationDate":5,"externalPurchaseId":"x","tokenExpirationDate":4}"#),
        ]
        for token in bad { #expect(code { _ = try ExternalPurchaseToken(token: token) } == "KKN-3070", "\(token.prefix(40))") }
        let badType = encoded(#"{"appAppleId":1,"bundleId":"b","tokenCreationDate":1,"externalPurchaseId":"x","tokenType":"services!"}"#)
        #expect(code { _ = try ExternalPurchaseToken(token: badType) } == "KKN-3075")
        // A type Apple adds later decodes and is kept.
        let future = encoded(#"{"appAppleId":1,"bundleId":"b","tokenCreationDate":1,"externalPurchaseId":"x","tokenType":"NEW_KIND","more":1}"#)
        #expect((try? ExternalPurchaseToken(token: future))?.tokenType?.rawValue == "NEW_KIND")
    }

    @Test func theNotificationsTokenSectionReadsTheSame() throws {
        // Apple's test vector of EXTERNAL_PURCHASE_TOKEN/UNREPORTED.
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/apple-testdata/models/signedExternalPurchaseTokenSandboxNotification.json").standardizedFileURL
        let json = try JSONParser.parse([UInt8](try Data(contentsOf: url)))
        let section = try #require(json["externalPurchaseToken"])
        let token = try ExternalPurchaseToken(notificationSection: section)
        #expect(token.externalPurchaseId == "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e" && token.environment == .sandbox)
        #expect(token.appAppleId == 55555 && token.bundleId == "com.example" && token.tokenCreationDateMs == 1_698_148_950_000)
    }

    @Test func aTokenRoundTripsAsTheStringAnAppWouldSend() throws {
        let t = ExternalPurchaseToken(externalPurchaseId: "SANDBOX_x", appAppleId: 7, bundleId: "b", tokenCreationDateMs: 10,
                                      tokenType: .inApp, tokenExpirationDateMs: 20)
        #expect(try ExternalPurchaseToken(token: t.tokenString) == t)
        #expect(try ExternalPurchaseTokenInput(json: ["token": .string(t.tokenString)]).token == t)
        #expect(code { _ = try ExternalPurchaseTokenInput(json: ["token": .string(t.tokenString), "x": 1]) } == "KKN-3070")
    }
}
