import KakinCore
import KakinMetrics
import Testing

/// Reading an import file (`kakin import`): an empty or malformed file is refused whole with its line; each row is then
/// checked on its own, a bad one becoming a reject with the catalogue's error.
@Suite struct ImportFileTests {
    func parse(_ text: String, _ kind: ImportKind = .balances) throws(KakinError) -> [ImportRecord] {
        try ImportFile.parse(Array(text.utf8), kind: kind)
    }

    func refusal(_ text: String, _ kind: ImportKind = .balances) -> String? {
        do {
            _ = try parse(text, kind)
            return nil
        } catch {
            #expect(error.kind == .importFileInvalid && error.httpStatus == 400)
            return error.message
        }
    }

    @Test func csvRowsKeepTheirLineNumbersQuotesAndBlankLines() throws {
        let text = "\u{FEFF}customerId,paid,free,reference,asOf\r\nu1,100,5,\"old,1\",2026-09-30\r\n\r\n\"u2\",\"7\",0,\"say \"\"hi\"\"\nthere\",2026-09-30T00:00:00Z\nu3,1,2,r3,2026-09-30"
        let records = try parse(text)
        #expect(records.map(\.line) == [2, 4, 6])
        #expect(records[0].fields["reference"] == "old,1")
        #expect(records[1].fields["reference"] == "say \"hi\"\nthere" && records[1].fields["customerId"] == "u2")
    }

    @Test func revenueCatSemicolonExportsAreRead() throws {
        let text = "rc_original_app_user_id;rc_last_seen_app_user_id_alias;store;store_transaction_id;product_identifier;price_in_usd\n"
            + "$RCAnonymousID:ab12;u1;app_store;2000000000000001;premium.monthly;9.99\n"
        let records = try parse(text, .revenuecat)
        #expect(try ImportRow.parse(records[0], kind: .revenuecat) == .appStore(customerId: "u1", transactionId: "2000000000000001"))
    }

    @Test func jsonLinesAreRead() throws {
        let records = try parse("{\"customerId\": \"u1\", \"paid\": 10, \"free\": 0, \"reference\": \"r1\", \"asOf\": \"2026-09-30\"}\n\n{\"customerId\": \"u2\"}\n")
        #expect(records.map(\.line) == [1, 3])
        #expect(records[0].fields["paid"] == "10")
        #expect(throws: KakinError.self) { try ImportRow.parse(records[1], kind: .balances) }
    }

    /// Fuzz finding (import target): a JSON line's `""` was kept as an empty field where a CSV's empty cell is absent.
    @Test func aJSONLinesEmptyStringIsAnAbsentFieldAsAnEmptyCSVCellIs() throws {
        let json = try parse("{\"customerId\": \"u1\", \"paid\": 10, \"free\": null, \"reference\": \"\", \"asOf\": \"2026-09-30\"}\n")
        let csv = try parse("customerId,paid,free,reference,asOf\nu1,10,,,2026-09-30\n")
        #expect(json.map(\.fields) == csv.map(\.fields))
        #expect(json[0].fields["reference"] == nil)
    }

    @Test func malformedFilesAreRefusedWithTheLine() {
        #expect(refusal("")?.contains("Line 1") == true)
        #expect(refusal("customerId,paid,free,reference,asOf\n")?.contains("no rows") == true)
        #expect(refusal("customerId,paid,reference,asOf\nu1,1,r,2026-01-01")?.contains("no column free") == true)
        #expect(refusal("customerId,paid,free,reference,asOf\nu1,1,2,r1,2026-01-01\nu2,1,2,r2\n")?.hasPrefix("Line 3: 4 fields") == true)
        #expect(refusal("customerId,paid,free,reference,asOf\nu1,1,2,\"r1,2026-01-01\n")?.hasPrefix("Line 2: a quoted field is not closed") == true)
        #expect(refusal("customerId,paid,free,reference,asOf\nu1,1,2,r\"1,2026-01-01\n")?.hasPrefix("Line 2: a quote inside") == true)
        #expect(refusal("{\"customerId\": \"u1\"}\nnot json\n")?.hasPrefix("Line 2: not a JSON object") == true)
        #expect(refusal("customerId,transactionId,customerId\nu1,1,u1", .appStore)?.contains("appears twice") == true)
    }

    @Test func badRowsAreRejectsWithTheCatalogueError() throws {
        let records = try parse("""
            customerId,paid,free,reference,asOf
            bad id!,1,0,r1,2026-09-30
            u1,1.5,0,r2,2026-09-30
            u1,10,x,r3,2026-09-30
            u1,100000001,0,r4,2026-09-30
            u1,10,0,r5,30/09/2026
            u1,-20,5,r6,2026-09-30T12:00:00Z
            u1,10,0,,2026-09-30
            """)
        func kind(_ i: Int) -> ErrorKind? {
            do {
                _ = try ImportRow.parse(records[i], kind: .balances)
                return nil
            } catch {
                return error.kind
            }
        }
        #expect((0..<7).map(kind) == [.invalidCustomerID, .importBalanceInvalid, .importBalanceInvalid, .importBalanceInvalid, .importRowInvalid,
                                      nil, .importRowInvalid])
        #expect(try ImportRow.parse(records[5], kind: .balances)
            == .balance(ImportedBalance(customerId: "u1", paid: -20, free: 5, reference: "r6", asOf: .instant(Timestamp.parseRFC3339("2026-09-30T12:00:00Z")!))))
    }

    @Test func revenueCatRowsNameTheAppsCustomerAndTheirStore() throws {
        func row(_ original: String, _ alias: String, _ store: String, _ tx: String = "2000000000000007") throws(KakinError) -> ImportRow {
            try ImportRow.parse(ImportRecord(line: 2, fields: [
                "rc_original_app_user_id": original, "rc_last_seen_app_user_id_alias": alias, "store": store, "store_transaction_id": tx,
                "product_identifier": "premium.monthly"]), kind: .revenuecat)
        }
        #expect(try row("u9", "", "app_store") == .appStore(customerId: "u9", transactionId: "2000000000000007"))
        #expect(try row("$RCAnonymousID:1", "u7", "mac_app_store") == .appStore(customerId: "u7", transactionId: "2000000000000007"))
        #expect(try row("u9", "", "play_store", "GPA.1234-5678") == .googlePlay(GooglePlayImport(
            customerId: "u9", packageName: nil, productId: "premium.monthly", purchaseToken: nil, orderId: "GPA.1234-5678")))
        func refused(_ original: String, _ alias: String, _ store: String) -> ErrorKind? {
            do {
                _ = try row(original, alias, store)
                return nil
            } catch {
                return error.kind
            }
        }
        #expect(refused("u9", "", "stripe") == .importStoreNotSupported)
        #expect(refused("$RCAnonymousID:1", "$RCAnonymousID:1", "app_store") == .invalidCustomerID)
    }

    @Test func aDateMeansTheLastMillisecondOfThatDayInTheZone() {
        let tokyo = FixedOffsetCalendar(identifier: "Asia/Tokyo", offsetSeconds: 9 * 3600)
        let day = Timestamp.parseDate("2026-09-30")! / 86_400_000
        #expect(tokyo.lastMs(ofDay: day) == Timestamp.parseRFC3339("2026-09-30T14:59:59.999Z")!)
        #expect(FixedOffsetCalendar().lastMs(ofDay: day) == Timestamp.parseRFC3339("2026-09-30T23:59:59.999Z")!)
    }
}
