import AppStoreSecurity
import Foundation
import KakinCore
import Testing

/// Paths and fixtures shared by the tests. Foundation is fine here (tests only).
enum Fixtures {
    /// The package root, found from this file's path.
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Apple's test vectors (copied into `Tests/Fixtures/apple-testdata`, or `KAKIN_APPLE_TESTDATA`).
    static let appleTestData: URL = {
        if let path = ProcessInfo.processInfo.environment["KAKIN_APPLE_TESTDATA"] { return URL(fileURLWithPath: path) }
        return packageRoot.appendingPathComponent("Tests/Fixtures/apple-testdata")
    }()

    static func appleFile(_ relativePath: String) throws -> [UInt8] {
        let url = appleTestData.appendingPathComponent(relativePath)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            Issue.record("missing Apple test vector \(url.path)")
            throw FixtureMissing()
        }
        return [UInt8](data)
    }

    static func appleJWS(_ relativePath: String) throws -> String {
        String(decoding: try appleFile(relativePath), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct FixtureMissing: Error {}

    /// 2023-01-05 22:02:34 UTC: `signedDate` of Apple's mock transaction.
    static let appleMockSignedDate: Int64 = 1_672_956_154_000
    /// 2026-06-01 00:00:00 UTC.
    static let now: Int64 = 1_780_272_000_000
    static let dayMs: Int64 = 86_400_000
}

/// A verifier over a fixed clock.
func makeVerifier(
    roots: [[UInt8]], bundleId: String? = "com.example", appAppleId: Int64? = nil,
    environments: Set<AppStoreEnvironment> = [.production, .sandbox], now: Int64 = Fixtures.now, cacheEntries: Int = 64
) throws -> SignedDataVerifier {
    try SignedDataVerifier(
        trustedRoots: roots,
        apps: [AppIdentity(bundleId: bundleId, appAppleId: appAppleId, environments: environments)],
        clock: { now }, chainCacheEntriesMax: cacheEntries)
}

/// The failure code of a verification, or nil when it passed. Any other error fails the test.
func failureCode(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> VerificationCode? {
    do {
        try body()
        return nil
    } catch let failure as VerificationFailure {
        return failure.code
    } catch {
        Issue.record(error, "not a VerificationFailure", sourceLocation: sourceLocation)
        return .retryableFailure
    }
}

/// A signed transaction payload with every required field.
func transactionPayload(
    bundleId: String = "com.example", environment: String = "Sandbox", signedDate: Int64 = Fixtures.now,
    transactionId: String = "2000000000000001"
) -> JSONValue {
    [
        "transactionId": .string(transactionId), "originalTransactionId": .string(transactionId),
        "bundleId": .string(bundleId), "productId": "coins.100", "purchaseDate": .int(signedDate - 1000),
        "originalPurchaseDate": .int(signedDate - 1000), "quantity": 1, "type": "Consumable",
        "inAppOwnershipType": "PURCHASED", "signedDate": .int(signedDate), "environment": .string(environment),
        "transactionReason": "PURCHASE", "storefront": "JPN", "storefrontId": "143462", "price": 120000,
        "currency": "JPY",
    ]
}

func renewalInfoPayload(environment: String = "Sandbox", signedDate: Int64 = Fixtures.now) -> JSONValue {
    [
        "originalTransactionId": "2000000000000002", "autoRenewProductId": "premium.monthly",
        "productId": "premium.monthly", "autoRenewStatus": 1, "signedDate": .int(signedDate),
        "environment": .string(environment), "recentSubscriptionStartDate": .int(signedDate - 1000),
        "renewalDate": .int(signedDate + 30 * Fixtures.dayMs),
    ]
}

func notificationPayload(
    bundleId: String = "com.example", appAppleId: Int64 = 1234, environment: String = "Sandbox",
    signedDate: Int64 = Fixtures.now
) -> JSONValue {
    [
        "notificationType": "TEST", "notificationUUID": "9ad56bd2-0bc6-42e0-af24-fd996d87a1e6", "version": "2.0",
        "signedDate": .int(signedDate),
        "data": ["appAppleId": .int(appAppleId), "bundleId": .string(bundleId), "environment": .string(environment)],
    ]
}

func appTransactionPayload(
    bundleId: String = "com.example", appAppleId: Int64 = 1234, receiptType: String = "Sandbox",
    receiptCreationDate: Int64 = Fixtures.now
) -> JSONValue {
    [
        "bundleId": .string(bundleId), "appAppleId": .int(appAppleId), "receiptType": .string(receiptType),
        "receiptCreationDate": .int(receiptCreationDate), "applicationVersion": "1", "originalApplicationVersion": "1",
        "originalPurchaseDate": .int(receiptCreationDate - 1000), "appTransactionId": "704329473208374384",
        "originalPlatform": "iOS",
    ]
}
