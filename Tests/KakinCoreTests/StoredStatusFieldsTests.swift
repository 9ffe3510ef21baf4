import Foundation
import KakinCore
import Testing

/// A stored row's status fields are read straight into the typed payload, no JSON tree built. It must give what
/// parsing the row and decoding the tree gave: the same payload (fields and `raw`), and nil for the same rows.
@Suite struct StoredStatusFieldsTests {
    /// The reading before: the row's JSON (or, for a row stored before the fields were, its JWS's) parsed, then decoded.
    static func parsed<Payload>(_ stored: String, _ decode: (JSONValue) throws -> Payload) -> Payload? {
        let json = stored.utf8.first == UInt8(ascii: "{") ? try? JSONParser.parse(stored) : StoredJWS.payload(stored)
        return json.flatMap { try? decode($0) }
    }

    static func jws(_ payload: String) -> String {
        "eyJhbGciOiJFUzI1NiJ9." + Base64.urlEncode(Array(payload.utf8)) + ".c2lnbmF0dXJl"
    }

    static func testdata(_ path: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = ProcessInfo.processInfo.environment["KAKIN_APPLE_TESTDATA"].map { URL(fileURLWithPath: $0) }
            ?? root.appendingPathComponent("Tests/Fixtures/apple-testdata")
        let data = try #require(FileManager.default.contents(atPath: dir.appendingPathComponent(path).path))
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Each way a row may hold a payload: its JSON as Apple signed it, the status fields kept from it, its JWS.
    static func expectSameTransaction(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let signed = try #require(parsed(json, { try TransactionPayload(json: $0) }), sourceLocation: sourceLocation)
        let kept = StoredStatusFields.json(of: signed)
        for stored in [json, kept, jws(json), jws(kept)] {
            let read = StoredStatusFields.transaction(stored)
            #expect(read == parsed(stored, { try TransactionPayload(json: $0) }), sourceLocation: sourceLocation)
            #expect(read?.raw == parsed(stored, { $0 }), sourceLocation: sourceLocation)
        }
    }

    static func expectSameRenewalInfo(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let signed = try #require(parsed(json, { try RenewalInfoPayload(json: $0) }), sourceLocation: sourceLocation)
        let kept = StoredStatusFields.json(of: signed)
        for stored in [json, kept, jws(json), jws(kept)] {
            let read = StoredStatusFields.renewalInfo(stored)
            #expect(read == parsed(stored, { try RenewalInfoPayload(json: $0) }), sourceLocation: sourceLocation)
            #expect(read?.raw == parsed(stored, { $0 }), sourceLocation: sourceLocation)
        }
    }

    @Test func applesTestVectorsReadTheSameFromEveryFormARowKeeps() throws {
        // Apple's models (commitment info, win-back offers, prorated revocation) and its signed mock and Xcode data.
        try Self.expectSameTransaction(try Self.testdata("models/signedTransaction.json"))
        try Self.expectSameTransaction(try Self.testdata("models/signedTransactionWithRevocation.json"))
        try Self.expectSameRenewalInfo(try Self.testdata("models/signedRenewalInfo.json"))
        // Xcode's signed data: dates with fractions of a millisecond, keys no payload reads (`deviceVerification`).
        let xcodeTransaction = try Self.testdata("xcode/xcode-signed-transaction")
        try Self.expectSameTransaction(try #require(StoredJWS.payload(xcodeTransaction)).jsonString)
        #expect(StoredStatusFields.transaction(xcodeTransaction) == Self.parsed(xcodeTransaction, { try TransactionPayload(json: $0) }))
        #expect(StoredStatusFields.transaction(xcodeTransaction)?.purchaseDate == 1_697_679_936_049)
        let xcodeRenewal = try Self.testdata("xcode/xcode-signed-renewal-info")
        try Self.expectSameRenewalInfo(try #require(StoredJWS.payload(xcodeRenewal)).jsonString)
        #expect(StoredStatusFields.renewalInfo(xcodeRenewal) == Self.parsed(xcodeRenewal, { try RenewalInfoPayload(json: $0) }))
        #expect(StoredStatusFields.renewalInfo(xcodeRenewal) != nil)
        // Apple's mock signed data lacks required fields (and the legacy one is not JSON): refused both ways.
        for path in ["mock_signed_data/transactionInfo", "mock_signed_data/renewalInfo", "mock_signed_data/legacyTransaction"] {
            let jws = try Self.testdata(path)
            #expect(StoredStatusFields.transaction(jws) == nil && Self.parsed(jws, { try TransactionPayload(json: $0) }) == nil, "\(path)")
            #expect(StoredStatusFields.renewalInfo(jws) == nil && Self.parsed(jws, { try RenewalInfoPayload(json: $0) }) == nil, "\(path)")
        }
    }

    @Test func theKeptFieldsAreTheKeysThePayloadsRead() {
        #expect(StoredStatusFields.transactionKeys == [
            "transactionId", "originalTransactionId", "webOrderLineItemId", "bundleId", "productId", "subscriptionGroupIdentifier",
            "purchaseDate", "originalPurchaseDate", "expiresDate", "quantity", "type", "appAccountToken", "inAppOwnershipType",
            "signedDate", "revocationDate", "revocationReason", "revocationType", "revocationPercentage", "isUpgraded", "offerType",
            "offerIdentifier", "offerDiscountType", "offerPeriod", "environment", "transactionReason", "storefront", "price",
            "currency", "billingPlanType", "commitmentInfo", "appTransactionId",
        ])
        #expect(StoredStatusFields.renewalInfoKeys == [
            "originalTransactionId", "productId", "autoRenewProductId", "autoRenewStatus", "expirationIntent", "isInBillingRetryPeriod",
            "gracePeriodExpiresDate", "priceIncreaseStatus", "offerType", "offerIdentifier", "offerDiscountType", "offerPeriod",
            "recentSubscriptionStartDate", "renewalDate", "signedDate", "environment", "appAccountToken", "eligibleWinBackOfferIds",
            "renewalBillingPlanType", "commitmentInfo", "renewalPrice", "currency", "appTransactionId",
        ])
    }

    @Test func malformedRowsAreRefusedAsTheParserRefusesThem() {
        let valid = #"{"transactionId":"1","bundleId":"b","productId":"p","purchaseDate":1,"signedDate":2,"type":"Consumable","environment":"Sandbox"}"#
        #expect(StoredStatusFields.transaction(valid) != nil)
        let rows = [
            valid + " x", String(valid.dropLast()), valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p","productId":"p""#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p","\u0070roductId":"q""#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p","x":1,"x":2"#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p","x":{"a":1,"a":2}"#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p","x":1e400"#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p\u00""#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"\ud800""#),
            valid.replacingOccurrences(of: #""productId":"p""#, with: #""productId":"p","x":"# + String(repeating: "[", count: 70)
                + String(repeating: "]", count: 70)),
            valid.replacingOccurrences(of: #""purchaseDate":1"#, with: #""purchaseDate":"1""#),
            valid.replacingOccurrences(of: #""bundleId":"b""#, with: #""bundleId":"""#),
            "{}", "{", "[]", "",
        ]
        for row in rows {
            #expect(StoredStatusFields.transaction(row) == nil, "\(row)")
            #expect(Self.parsed(row, { try TransactionPayload(json: $0) }) == nil, "\(row)")
        }
    }

    @Test func generatedRowsReadAsTheParserAndTheTypedPayloadsReadThem() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_0026)
        var decoded = (transactions: 0, renewalInfos: 0)
        for n in 0..<6_000 {
            let transaction = n.isMultiple(of: 2)
            var text = Self.document(transaction ? Self.transactionFields : Self.renewalFields, using: &rng)
            if Int.random(in: 0..<10, using: &rng) == 0 { text = Self.damaged(text, using: &rng) }
            let stored = Int.random(in: 0..<4, using: &rng) == 0 ? Self.jws(text) : text
            if transaction {
                let read = StoredStatusFields.transaction(stored)
                #expect(read == Self.parsed(stored, { try TransactionPayload(json: $0) }), "\(text)")
                #expect(read?.raw == Self.parsed(stored, { try TransactionPayload(json: $0) })?.raw, "\(text)")
                if read != nil { decoded.transactions += 1 }
            } else {
                let read = StoredStatusFields.renewalInfo(stored)
                #expect(read == Self.parsed(stored, { try RenewalInfoPayload(json: $0) }), "\(text)")
                #expect(read?.raw == Self.parsed(stored, { try RenewalInfoPayload(json: $0) })?.raw, "\(text)")
                if read != nil { decoded.renewalInfos += 1 }
            }
        }
        // Most generated rows are payloads, so the fields' readings are compared, not only the refusals.
        #expect(decoded.transactions > 1_000 && decoded.renewalInfos > 1_000)
    }

    // MARK: Generated rows

    /// A field and the JSON values it is given: the kind its payload reads, and the kinds it must read as missing.
    typealias Field = (key: String, required: Bool, values: [String])

    static let ids = [#""2000000123456789""#, #""1""#, "2000000123456789", #""""#, "12.5", "null", "12345678901234567890123"]
    static let strings = [#""com.example.app""#, #""""#, #""Auto-Renewable Subscription""#, #""a\"b\\c\/d\n""#, #""\u00e9t\u00C9""#,
                          #""\ud83d\ude00""#, "\"é€😀\"", #""7E3B1F28-1C4E-4B6E-9C0A-3F1D2B4A5C6E""#, "1", "true", "null", "[]"]
    static let dates = ["1698148900000", "1698148900000.7297", "-1", "0", "1e3", "1.5E+2", "-0", "12345678901234567890123",
                        "9.3e18", #""1698148900000""#, "true", "null"]
    static let ints = ["0", "1", "2", "-3", "99999999999", "1.9", "2e0", #""1""#, "true", "false", "null"]
    static let bools = ["true", "false", "0", "1", "2", "1.0", #""true""#, "null"]
    static let arrays = [#"["a","b"]"#, #"[]"#, #"["a",1,null,{"x":[]}]"#, #""a""#, "null", "{}"]
    static let transactionCommitments = [#"{"billingPeriodNumber":3,"commitmentExpiresDate":1698150000000,"commitmentPrice":119880,"totalBillingPeriods":12}"#,
                                         #"{"billingPeriodNumber":"3","commitmentPrice":1.5e5,"other":{"deep":[1,2]}}"#, "{}", "[]",
                                         "null", #""x""#]
    static let renewalCommitments = [#"{"commitmentAutoRenewProductId":"p.c","commitmentAutoRenewStatus":1,"commitmentRenewalBillingPlanType":"MONTHLY","commitmentRenewalDate":1698149500000,"commitmentRenewalPrice":9990}"#,
                                     #"{"commitmentAutoRenewStatus":true,"commitmentRenewalDate":1.5,"x":null}"#, "{}", "[1]", "null"]
    static let unknown = ["deviceVerification", "storefrontId", "x", "é", "\u{212A}", "signedTransactionInfo", "transactionid"]
    static let anything = strings + dates + arrays + [#"{"a":{"b":{"c":[true,false,null]}}}"#, " 1 ", "1.0e-5"]

    static let transactionFields: [Field] = [
        ("transactionId", true, ids), ("originalTransactionId", false, ids), ("webOrderLineItemId", false, ids), ("bundleId", true, strings),
        ("productId", true, strings), ("subscriptionGroupIdentifier", false, ids), ("purchaseDate", true, dates),
        ("originalPurchaseDate", false, dates), ("expiresDate", false, dates), ("quantity", false, ints),
        ("type", true, [#""Auto-Renewable Subscription""#, #""Consumable""#, #""Non-Consumable""#, #""Non-Renewing Subscription""#] + strings),
        ("appAccountToken", false, strings), ("inAppOwnershipType", false, [#""FAMILY_SHARED""#, #""PURCHASED""#] + strings),
        ("signedDate", true, dates), ("revocationDate", false, dates), ("revocationReason", false, ints),
        ("revocationType", false, [#""REFUND_PRORATED""#, #""REFUND_FULL""#, #""FAMILY_REVOKE""#] + strings),
        ("revocationPercentage", false, ints), ("isUpgraded", false, bools), ("offerType", false, ints), ("offerIdentifier", false, strings),
        ("offerDiscountType", false, [#""FREE_TRIAL""#, #""PAY_AS_YOU_GO""#] + strings), ("offerPeriod", false, [#""P1M""#] + strings),
        ("environment", true, [#""Sandbox""#, #""Production""#, #""LocalTesting""#] + strings),
        ("transactionReason", false, [#""PURCHASE""#, #""RENEWAL""#] + strings), ("storefront", false, strings), ("price", false, dates),
        ("currency", false, strings), ("billingPlanType", false, [#""MONTHLY""#] + strings), ("commitmentInfo", false, transactionCommitments),
        ("appTransactionId", false, ids),
    ]

    static let renewalFields: [Field] = [
        ("originalTransactionId", true, ids), ("productId", true, strings), ("autoRenewProductId", false, strings),
        ("autoRenewStatus", false, ints), ("expirationIntent", false, ints), ("isInBillingRetryPeriod", false, bools),
        ("gracePeriodExpiresDate", false, dates), ("priceIncreaseStatus", false, ints), ("offerType", false, ints),
        ("offerIdentifier", false, strings), ("offerDiscountType", false, strings), ("offerPeriod", false, strings),
        ("recentSubscriptionStartDate", false, dates), ("renewalDate", false, dates), ("signedDate", true, dates),
        ("environment", true, [#""Sandbox""#, #""Production""#] + strings), ("appAccountToken", false, strings),
        ("eligibleWinBackOfferIds", false, arrays), ("renewalBillingPlanType", false, [#""MONTHLY""#] + strings),
        ("commitmentInfo", false, renewalCommitments), ("renewalPrice", false, dates), ("currency", false, strings),
        ("appTransactionId", false, ids),
    ]

    /// An object of the fields in a random order, each present or not (a required one nearly always), with a value of
    /// its own kind mostly, now and then a key spelled with escapes, twice, or beside keys no payload reads.
    static func document(_ fields: [Field], using rng: inout SeededRandom) -> String {
        var members: [(key: String, value: String)] = []
        for field in fields {
            let present = Int.random(in: 0..<100, using: &rng) < (field.required ? 98 : 50)
            guard present else { continue }
            let value = Int.random(in: 0..<(field.required ? 15 : 3), using: &rng) == 0 ? field.values.randomElement(using: &rng)! : field.values[0]
            members.append((escapedNow(field.key, using: &rng), value))
            if Int.random(in: 0..<200, using: &rng) == 0 { members.append((field.key, field.values.randomElement(using: &rng)!)) }
        }
        for _ in 0..<Int.random(in: 0...2, using: &rng) where Int.random(in: 0..<3, using: &rng) == 0 {
            members.append((unknown.randomElement(using: &rng)!, anything.randomElement(using: &rng)!))
        }
        members.shuffle(using: &rng)
        func space() -> String { Int.random(in: 0..<6, using: &rng) == 0 ? [" ", "\n", "\t ", "\r\n"].randomElement(using: &rng)! : "" }
        return space() + "{" + members.map { space() + JSONValue.string($0.key).jsonString.replacingOccurrences(of: "\\\\u", with: "\\u")
            + space() + ":" + space() + $0.value + space() }.joined(separator: ",") + "}" + space()
    }

    /// The key, or now and then the same key with a letter written as a `\u` escape.
    static func escapedNow(_ key: String, using rng: inout SeededRandom) -> String {
        guard Int.random(in: 0..<25, using: &rng) == 0 else { return key }
        var scalars = Array(key.unicodeScalars)
        let at = Int.random(in: 0..<scalars.count, using: &rng)
        let escape = String(format: "\\u%04x", scalars[at].value)
        scalars.remove(at: at)
        var text = String(String.UnicodeScalarView(scalars))
        text.insert(contentsOf: escape, at: text.index(text.startIndex, offsetBy: at))
        return text
    }

    /// The text cut short, with a byte changed, or with something after it.
    static func damaged(_ text: String, using rng: inout SeededRandom) -> String {
        var bytes = Array(text.utf8)
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
        case 1: bytes[Int.random(in: 0..<bytes.count, using: &rng)] = Array(#"{}[]":,\ a1-"#.utf8).randomElement(using: &rng)!
        default: bytes += Array([",", "}", " x", "{}", "\u{0}"].randomElement(using: &rng)!.utf8)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
