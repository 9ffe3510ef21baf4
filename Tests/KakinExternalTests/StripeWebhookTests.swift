import KakinCore
import KakinCrypto
import KakinExternal
import Testing

@Suite struct StripeWebhookTests {
    let body = Array(#"{"id":"evt_1","object":"event"}"#.utf8)
    let now: Int64 = 1_780_000_000
    let oldSecret = Array("whsec_old_0123456789abcdef".utf8)
    let newSecret = Array("whsec_new_fedcba9876543210".utf8)

    func verifier(_ secrets: [[UInt8]], tolerance: Int64 = 300) -> StripeWebhookVerifier {
        StripeWebhookVerifier(configuration: StripeWebhookConfiguration(webhookSecretEnv: "S", secrets: secrets, toleranceSeconds: tolerance))
    }

    func code(_ body: () throws -> Void) -> String? {
        do { try body() } catch let e as KakinError { return e.kind.id } catch { return "other" }
        return nil
    }

    @Test func aSignedEventIsAcceptedWithinTheTolerance() throws {
        let header = TimestampedSignature.header(body: body, timestamp: now - 299, secrets: [newSecret])
        #expect(try verifier([newSecret]).verify(signatureHeader: header, body: body, nowSeconds: now) == now - 299)
    }

    @Test func anOldOrFutureTimestampIsRefusedAsAReplay() {
        let old = TimestampedSignature.header(body: body, timestamp: now - 301, secrets: [newSecret])
        let future = TimestampedSignature.header(body: body, timestamp: now + 400, secrets: [newSecret])
        #expect(code { try verifier([newSecret]).verify(signatureHeader: old, body: body, nowSeconds: now) } == "KKN-3056")
        #expect(code { try verifier([newSecret]).verify(signatureHeader: future, body: body, nowSeconds: now) } == "KKN-3056")
        #expect(code { try verifier([newSecret], tolerance: 600).verify(signatureHeader: old, body: body, nowSeconds: now) } == nil)
    }

    @Test func whileStripeRollsTheSecretEitherSignatureIsEnough() {
        // Stripe signs with the old and the new secret for a while: the header carries two v1 values.
        let both = TimestampedSignature.header(body: body, timestamp: now, secrets: [oldSecret, newSecret])
        #expect(code { try verifier([newSecret]).verify(signatureHeader: both, body: body, nowSeconds: now) } == nil)
        #expect(code { try verifier([oldSecret]).verify(signatureHeader: both, body: body, nowSeconds: now) } == nil)
        // Kakin configured with both secrets (comma-separated in the environment) takes a header from either.
        let secrets = StripeWebhookConfiguration.secrets(fromEnvironmentValue: " whsec_old_0123456789abcdef , whsec_new_fedcba9876543210")
        #expect(secrets == [oldSecret, newSecret])
        let onlyOld = TimestampedSignature.header(body: body, timestamp: now, secrets: [oldSecret])
        #expect(code { try verifier(secrets).verify(signatureHeader: onlyOld, body: body, nowSeconds: now) } == nil)
    }

    @Test func aTamperedBodyOrAnotherSecretIsRefused() {
        let header = TimestampedSignature.header(body: body, timestamp: now, secrets: [oldSecret])
        #expect(code { try verifier([newSecret]).verify(signatureHeader: header, body: body, nowSeconds: now) } == "KKN-3057")
        var tampered = body
        tampered[tampered.count - 3] = UInt8(ascii: "x")
        #expect(code { try verifier([oldSecret]).verify(signatureHeader: header, body: tampered, nowSeconds: now) } == "KKN-3057")
    }

    @Test func aMissingOrMalformedHeaderIsRefused() {
        for header in [nil, "", "t=abc,v1=00", "v1=" + String(repeating: "0", count: 64), "t=\(now)", "t=\(now),v0=abc"] as [String?] {
            #expect(code { try verifier([newSecret]).verify(signatureHeader: header, body: body, nowSeconds: now) } == "KKN-3055",
                    "\(header ?? "nil")")
        }
    }
}
