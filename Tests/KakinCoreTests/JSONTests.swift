import Testing
@testable import KakinCore

@Suite struct JSONParsing {
    @Test func parsesEveryKindOfValue() throws {
        let v = try JSONParser.parse(#"{"a":1,"b":-2.5,"c":"x\u00e9\n","d":[true,false,null],"e":{},"big":1697679936049.7297,"ms":1698148900000}"#)
        #expect(v["a"] == .int(1))
        #expect(v["b"] == .double(-2.5))
        #expect(v["c"]?.stringValue == "xé\n")
        #expect(v["d"] == [true, false, nil])
        #expect(v["e"] == .object([:]))
        #expect(v["big"]?.int64Value == 1_697_679_936_049)
        #expect(v["ms"]?.int64Value == 1_698_148_900_000)
    }

    @Test func surrogatePairsDecodeToOneScalar() throws {
        #expect(try JSONParser.parse(#""\ud83d\ude00""#).stringValue == "😀")
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":}", "{\"a\" 1}", "01", "1.", "-", "\"abc", "\"\\x\"", "tru", "{\"a\":1}x",
        "\"\\ud800\"", "{\"a\":1,\"a\":2}", "\"\u{01}\"", "1e999",
    ])
    func malformedInputIsRejectedNotCrashed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test func invalidUTF8IsRejected() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func nestingDeeperThanTheLimitIsRejected() throws {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep, depthMax: 64) }
        _ = try JSONParser.parse(deep, depthMax: 100)
    }

    @Test func hugeIntegersBecomeDoubles() throws {
        #expect(try JSONParser.parse("123456789012345678901234567890").doubleValue == 1.2345678901234568e29)
        #expect(try JSONParser.parse("-9223372036854775807") == .int(-Int64.max))
        #expect(try JSONParser.parse("9223372036854775808").doubleValue == 9.223372036854775808e18)
    }

    @Test func serialisationIsCanonicalAndRoundTrips() throws {
        let v: JSONValue = ["b": [1, 2.5, "q\"\\\n\u{1}"], "a": nil, "c": ["z": true]]
        let text = v.jsonString
        #expect(text == #"{"a":null,"b":[1,2.5,"q\"\\\n\u0001"],"c":{"z":true}}"#)
        #expect(try JSONParser.parse(text) == v)
    }
}

@Suite struct Base64Coding {
    @Test func roundTripsStandardAndURLAlphabets() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(($0 * 37 + 11) & 0xFF) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
            #expect(Base64.decode(Base64.urlEncode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("hello".utf8)) == "aGVsbG8=")
        #expect(Base64.urlEncode([0xFB, 0xFF]) == "-_8")
    }

    @Test func invalidCharactersAndLengthsAreRejected() {
        #expect(Base64.decode("a") == nil)
        #expect(Base64.decode("ab$d") == nil)
        #expect(Base64.decode("ab=c") == nil)
    }
}
