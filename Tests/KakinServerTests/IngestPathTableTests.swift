import Foundation
import KakinCore
import KakinService
import KakinStorage
import Testing

/// The same signed facts driven through every ingest path, each case with the one outcome `docs/architecture.md`
/// documents for that path ("Paths into the ingest"). Signatures are real (the test CA) and verified on the way in;
/// the notification path goes through the inbox (stored, then applied by the worker), the others through
/// `Ingest.apply` with the path's options, as their adapters call it.
@Suite struct IngestPathTable {
    enum Case: String, CaseIterable, CustomTestStringConvertible {
        case new, duplicate, unknownProduct, renewalInfoUnverifiable, tokenOfAnotherCustomer, revoked
        var testDescription: String { rawValue }
    }

    /// What a path did with a case: its result, whose coins moved, whether the transaction was stored.
    struct Observed: Equatable, CustomStringConvertible {
        var result: String
        var coins: [String: Int64] = [:]
        var stored = true
        var description: String { "\(result) coins \(coins.sorted { $0.key < $1.key }) stored \(stored)" }
    }

    /// The documented outcomes (keep equal to the table in docs/architecture.md). u1 owns the transaction's
    /// `appAccountToken`; u2 presents it in the `tokenOfAnotherCustomer` case; the coin pack credits 100 paid coins.
    static let expected: [IngestPath: [Case: Observed]] = {
        let credited = ["u1": Int64(100)]
        let presenting: [Case: Observed] = [
            .new: Observed(result: "applied", coins: credited),
            .duplicate: Observed(result: "alreadyProcessed", coins: credited),
            .unknownProduct: Observed(result: "refused unknown_product", stored: false),
            .renewalInfoUnverifiable: Observed(result: "refused untrusted_certificate", stored: false),
            .tokenOfAnotherCustomer: Observed(result: "refused belongs_to_another_customer", stored: false),
            .revoked: Observed(result: "revoked"),
        ]
        return [
            .app: presenting,
            .receipt: presenting,
            .import: presenting,
            .receiptOlder: [
                .new: Observed(result: "applied", coins: credited),
                .duplicate: Observed(result: "alreadyProcessed", coins: credited),
                .unknownProduct: Observed(result: "notApplied unknownProduct"),
                .renewalInfoUnverifiable: Observed(result: "refused untrusted_certificate", stored: false),
                .tokenOfAnotherCustomer: Observed(result: "notApplied ownedByAnother"),
                .revoked: Observed(result: "revoked"),
            ],
            .notification: [
                .new: Observed(result: "notification applied", coins: credited),
                .duplicate: Observed(result: "notification applied", coins: credited),
                .unknownProduct: Observed(result: "notification retrying unknown_product"),
                .renewalInfoUnverifiable: Observed(result: "notification dead untrusted_certificate", stored: false),
                .tokenOfAnotherCustomer: Observed(result: "notification applied", coins: credited),
                .revoked: Observed(result: "notification applied"),
            ],
            .restore: [
                .new: Observed(result: "applied", coins: credited),
                .duplicate: Observed(result: "alreadyProcessed", coins: credited),
                .unknownProduct: Observed(result: "notApplied unknownProduct"),
                .renewalInfoUnverifiable: Observed(result: "applied, renewal info skipped", coins: credited),
                .tokenOfAnotherCustomer: Observed(result: "refused belongs_to_another_customer", stored: false),
                .revoked: Observed(result: "revoked"),
            ],
            .refresh: [
                .new: Observed(result: "applied", coins: credited),
                .duplicate: Observed(result: "alreadyProcessed", coins: credited),
                .unknownProduct: Observed(result: "notApplied unknownProduct"),
                .renewalInfoUnverifiable: Observed(result: "refused untrusted_certificate", stored: false),
                .tokenOfAnotherCustomer: Observed(result: "applied", coins: credited),
                .revoked: Observed(result: "revoked"),
            ],
        ]
    }()

    @Test(arguments: IngestPath.allCases) func everyCaseHasItsDocumentedOutcome(_ path: IngestPath) async throws {
        for c in Case.allCases {
            try await TestKakin.with { k in
                let observed = try await run(c, on: path, k)
                #expect(observed == Self.expected[path]?[c], "\(path) \(c)")
                #expect(try await k.ledgerCheckOK())
            }
        }
    }

    func run(_ c: Case, on path: IngestPath, _ k: TestKakin) async throws -> Observed {
        let services = k.runtime.app.services
        let u1 = try await k.token("u1")
        _ = try await k.token("u2")
        let now = k.clock.nowMs()
        let tx: (id: String, jws: String)
        var renewal: String?
        switch c {
        case .unknownProduct:
            tx = try k.appStore.transaction(productId: "coins.unknown", appAccountToken: u1, purchaseMs: now)
        case .revoked:
            tx = try k.appStore.transaction(appAccountToken: u1, purchaseMs: now, revokedMs: now + 1)
        case .renewalInfoUnverifiable:
            tx = try k.appStore.transaction(appAccountToken: u1, purchaseMs: now)
            // Signed by a CA the server does not trust.
            renewal = try TestAppStore(nowMs: now).renewalInfo(original: tx.id, signedMs: now, renewalMs: now + 30 * TestAppStore.day)
        default:
            tx = try k.appStore.transaction(appAccountToken: u1, purchaseMs: now)
        }
        let presenter = c == .tokenOfAnotherCustomer ? "u2" : "u1"
        var result: String
        if path == .notification {
            let jws = try k.appStore.notification("ONE_TIME_CHARGE", transaction: tx.jws, renewal: renewal, signedMs: now)
            if c == .duplicate {
                try await k.deliver([try k.appStore.notification("ONE_TIME_CHARGE", transaction: tx.jws, signedMs: now)])
            }
            try await k.deliver([jws])
            let uuid = try #require(StoredJWS.payload(jws)?["notificationUUID"]?.stringValue)
            let stored = try #require(try await services.store.notification(uuid))
            // `lastError` starts with the error's ID and code: "KKN-3002 unknown_product: …".
            let code = stored.lastError?.split(separator: " ").dropFirst().first.map { " " + $0.dropLast() } ?? ""
            result = "notification \(stored.state.rawValue)\(code)"
        } else {
            do {
                let verified = try services.ingest.verifyTransaction(tx.jws)
                if c == .duplicate { _ = try await services.ingest.apply(transaction: verified, path: path, presenter: presenter) }
                let info = try renewal.flatMap { (jws: String) throws(KakinError) in try services.ingest.verifyRenewalInfo(jws, for: path) }
                let outcome = try await services.ingest.apply(transaction: verified, renewalInfo: info, path: path, presenter: presenter).outcome
                result = Self.name(outcome)
                if renewal != nil, info == nil { result += ", renewal info skipped" }
            } catch {
                result = "refused \(error.kind.code)"
            }
        }
        var coins: [String: Int64] = [:]
        for customer in ["u1", "u2"] {
            let total = try await services.store.wallet(customer).total
            if total != 0 { coins[customer] = total }
        }
        let stored = try await services.store.snapshot { r in try r.storedTransaction(tx.id) != nil }
        return Observed(result: result, coins: coins, stored: stored)
    }

    static func name(_ outcome: IngestOutcome?) -> String {
        switch outcome {
        case .applied?: return "applied"
        case .alreadyProcessed?: return "alreadyProcessed"
        case .revoked?: return "revoked"
        case .notApplied(.noOwner)?: return "notApplied noOwner"
        case .notApplied(.ownedByAnother)?: return "notApplied ownedByAnother"
        case .notApplied(.unknownProduct)?: return "notApplied unknownProduct"
        case nil: return "none"
        }
    }
}
