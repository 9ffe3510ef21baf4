import Testing
@testable import KakinCore

@Suite struct PeriodsAndTime {
    let jan31 = Timestamp.parseRFC3339("2026-01-31T10:00:00Z")!

    @Test func monthlyPeriodClampsToTheEndOfShorterMonths() {
        #expect(Timestamp.rfc3339(ISOPeriod("P1M")!.added(to: jan31)) == "2026-02-28T10:00:00Z")
        #expect(Timestamp.rfc3339(ISOPeriod("P1M")!.added(to: Timestamp.parseRFC3339("2028-01-31T00:00:00Z")!)) == "2028-02-29T00:00:00Z")
        #expect(Timestamp.rfc3339(ISOPeriod("P1Y")!.added(to: Timestamp.parseRFC3339("2028-02-29T00:00:00Z")!)) == "2029-02-28T00:00:00Z")
    }

    @Test func weeksDaysAndMixedPeriodsAdd() {
        #expect(Timestamp.rfc3339(ISOPeriod("P1W")!.added(to: jan31)) == "2026-02-07T10:00:00Z")
        #expect(Timestamp.rfc3339(ISOPeriod("P3D")!.added(to: jan31)) == "2026-02-03T10:00:00Z")
        #expect(Timestamp.rfc3339(ISOPeriod("P1Y2M")!.added(to: jan31)) == "2027-03-31T10:00:00Z")
        #expect(ISOPeriod("P1M")!.multiplied(by: 3) == ISOPeriod(months: 3))
    }

    @Test(arguments: ["", "P", "1M", "P1", "PM", "P1X", "P1M1M", "PT1H", "P-1M"])
    func malformedPeriodsAreRejected(_ s: String) {
        #expect(ISOPeriod(s) == nil)
    }

    @Test func timestampsFormatAndParse() {
        #expect(Timestamp.rfc3339(0) == "1970-01-01T00:00:00Z")
        #expect(Timestamp.rfc3339(1_698_148_900_123) == "2023-10-24T12:01:40.123Z")
        #expect(Timestamp.parseRFC3339("2023-10-24T12:01:40.123Z") == 1_698_148_900_123)
        #expect(Timestamp.parseDate("2026-09-30") == Timestamp.parseRFC3339("2026-09-30T00:00:00Z"))
        #expect(Timestamp.parseDate("2026-02-30") == nil)
        #expect(Timestamp.parseRFC3339("2026-09-30 00:00:00Z") == nil)
        #expect(Timestamp.rfc3339(-1) == "1969-12-31T23:59:59.999Z")
    }

    /// Any millisecond value formats (a signed payload's date, a simulator request's time): the extremes used
    /// to trap on overflow. Years beyond 0000–9999 use ISO 8601's expanded form.
    @Test func everyMillisecondValueFormatsWithoutTrapping() {
        #expect(Timestamp.rfc3339(Int64.min) == "-292275055-05-16T16:47:04.192Z")
        #expect(Timestamp.rfc3339(Int64.max) == "+292278994-08-17T07:12:55.807Z")
        #expect(Timestamp.rfc3339(Int64.min + 1) == "-292275055-05-16T16:47:04.193Z")
        #expect(Timestamp.rfc3339(253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp.rfc3339(253_402_300_800_000) == "+10000-01-01T00:00:00Z")
        #expect(Timestamp.rfc3339(-62_167_219_200_000) == "0000-01-01T00:00:00Z")
        #expect(Timestamp.rfc3339(-62_167_219_200_001) == "-0001-12-31T23:59:59.999Z")
        #expect(Timestamp.rfc3339(Int64?.none) == .null)
        // Inside RFC 3339's years, formatting and parsing are inverses.
        var random = SeededRandom(seed: 2027)
        for _ in 0..<10_000 {
            let ms = Int64.random(in: -62_167_219_200_000...253_402_300_799_999, using: &random)
            #expect(Timestamp.parseRFC3339(Timestamp.rfc3339(ms)) == ms)
        }
        for _ in 0..<10_000 {
            let ms = Int64(bitPattern: random.next())
            #expect(Timestamp.rfc3339(ms).hasSuffix("Z"))
        }
    }
}

@Suite struct ProductsList {
    @Test func contractExampleParses() throws {
        let json = try JSONParser.parse(#"""
        [{"productId": "coins.100", "type": "consumable", "coins": 100, "bonusCoins": 0, "price": 120, "currency": "JPY"},
         {"productId": "noads", "type": "nonConsumable"},
         {"productId": "season.pass", "type": "nonRenewing", "durationDays": 90},
         {"productId": "premium.monthly", "type": "autoRenewable", "groupId": "premium"}]
        """#)
        let catalog = try Catalog(contractJSON: json)
        #expect(catalog["coins.100"]?.coins == 100)
        #expect(catalog["coins.100"]?.priceMilli == 120_000)
        #expect(catalog["season.pass"]?.durationDays == 90)
        #expect(catalog["premium.monthly"]?.period == ISOPeriod(months: 1))
        #expect(catalog.groupIds == ["premium"])
    }

    @Test func errorsNameTheOffendingKey() throws {
        func error(_ text: String) throws -> String {
            do {
                _ = try Catalog(contractJSON: try JSONParser.parse(text))
                return "no error"
            } catch {
                return String(describing: error)
            }
        }
        #expect(try error(#"[{"productId":"a","type":"consumable","coins":"5"}]"#) == "products[0].coins: must be an integer")
        #expect(try error(#"[{"productId":"a","type":"consumable","coins":5,"colour":1}]"#) == "products[0].colour: unknown key")
        #expect(try error(#"[{"productId":"a","type":"nonRenewing"}]"#).hasPrefix("products[0].durationDays"))
        #expect(try error(#"[{"productId":"a","type":"gold"}]"#).hasPrefix("products[0].type"))
        #expect(try error(#"[{"productId":"a","type":"consumable","coins":1},{"productId":"a","type":"consumable","coins":1}]"#) == "products[1].productId: duplicates another product")
    }

    @Test func demoCatalogHasEveryKindOfProduct() {
        let kinds = Set(Catalog.demo.products.values.map(\.kind))
        #expect(kinds == Set(ProductKind.allCases))
        #expect(Catalog.demo["premium.monthly"]?.introductoryOffer?.mode == .freeTrial)
    }
}

@Suite struct Wallets {
    @Test func freeFirstSpendsFreeCoinsBeforePaidOnes() {
        let b = WalletBalance(paid: 100, free: 30)
        #expect(WalletRules.split(amount: 50, of: b, order: .freeFirst)! == (20, 30))
        #expect(WalletRules.split(amount: 50, of: b, order: .paidFirst)! == (50, 0))
        #expect(WalletRules.split(amount: 130, of: b, order: .paidFirst)! == (100, 30))
        #expect(WalletRules.split(amount: 131, of: b, order: .freeFirst) == nil)
    }

    @Test func negativeBalancePartsCountAsZero() {
        #expect(WalletRules.split(amount: 10, of: WalletBalance(paid: -50, free: 20), order: .paidFirst)! == (0, 10))
        #expect(WalletRules.split(amount: 21, of: WalletBalance(paid: -50, free: 20), order: .paidFirst) == nil)
    }

    @Test func refundDebitFollowsTheNegativeBalancePolicy() {
        let b = WalletBalance(paid: 30, free: 5)
        #expect(WalletRules.refundDebit(paid: 100, free: 10, of: b, policy: WalletPolicy(allowNegativeBalance: true)) == (100, 10, 0))
        #expect(WalletRules.refundDebit(paid: 100, free: 10, of: b, policy: WalletPolicy(allowNegativeBalance: false)) == (30, 5, 75))
    }

    @Test func customerIDsFollowTheContract() {
        #expect(CustomerID.isValid("u1"))
        #expect(CustomerID.isValid("user.name_1:tenant@example-x"))
        #expect(!CustomerID.isValid(""))
        #expect(!CustomerID.isValid(String(repeating: "a", count: 129)))
        #expect(!CustomerID.isValid("a b"))
        #expect(!CustomerID.isValid("a/b"))
        #expect(!CustomerID.isValid("ü"))
    }
}
