import KakinCore
import Testing
@testable import KakinOfferings

@Suite struct Targeting {
    static let placement = try! Placement(id: "onboarding", json: [
        "rules": [
            ["when": ["platform": "android"], "offering": "play"],
            ["when": ["countries": ["JP", "KR"], "appVersionMin": "2.0", "appVersionMax": "2.9.9"], "offering": "asia-v2"],
            ["when": ["status": "inactive"], "offering": "winback"],
            ["when": ["attributes": ["plan": "pro", "cohort": "b"]], "offering": "pro"],
            ["when": ["countries": ["JP"]], "offering": "japan"],
            ["when": ["platform": "web", "status": "active"], "offering": "web-active"],
        ],
        "default": "standard",
    ])

    struct Row: CustomTestStringConvertible, Sendable {
        var platform: Platform
        var country: String?
        var version: String?
        var status: CustomerState
        var attributes: [String: String] = [:]
        var expected: String
        var rule: Int?
        var testDescription: String { "\(platform) \(country ?? "-") \(version ?? "-") \(status) \(attributes) → \(expected)" }
    }

    /// Each row: what the app and customer are, which offering the placement answers (the first matching rule).
    static let table: [Row] = [
        Row(platform: .android, country: "JP", version: "2.1", status: .inactive, expected: "play", rule: 0),   // first match wins over 1, 2, 4
        Row(platform: .ios, country: "JP", version: "2.1", status: .inactive, expected: "asia-v2", rule: 1),     // before winback
        Row(platform: .ios, country: "KR", version: "2.9.9", status: .new, expected: "asia-v2", rule: 1),       // max is inclusive
        Row(platform: .ios, country: "KR", version: "3.0", status: .new, expected: "standard", rule: nil),      // above max; KR not in rule 4
        Row(platform: .ios, country: "JP", version: "1.9.9", status: .new, expected: "japan", rule: 4),         // below min
        Row(platform: .ios, country: "JP", version: nil, status: .new, expected: "japan", rule: 4),             // no version: a version rule never holds
        Row(platform: .ios, country: "JP", version: "2.0", status: .active, attributes: ["plan": "pro", "cohort": "b"], expected: "asia-v2", rule: 1),
        Row(platform: .ios, country: "US", version: "2.0", status: .inactive, expected: "winback", rule: 2),
        Row(platform: .ios, country: "US", version: "2.0", status: .active, attributes: ["plan": "pro", "cohort": "b"], expected: "pro", rule: 3),
        Row(platform: .ios, country: "US", version: "2.0", status: .active, attributes: ["plan": "pro"], expected: "standard", rule: nil),  // every attribute
        Row(platform: .ios, country: "JP", version: "2.0.0.0", status: .active, attributes: ["plan": "free", "cohort": "b"], expected: "asia-v2", rule: 1),
        Row(platform: .web, country: nil, version: nil, status: .active, expected: "web-active", rule: 5),
        Row(platform: .web, country: nil, version: nil, status: .new, expected: "standard", rule: nil),
    ]

    @Test(arguments: table) func theFirstMatchingRuleNamesTheOffering(_ row: Row) {
        let context = TargetingContext(platform: row.platform, country: row.country, appVersion: row.version.flatMap(AppVersion.init),
                                       status: row.status, attributes: row.attributes)
        let answer = Self.placement.offering(for: context)
        #expect(answer.offering == row.expected)
        #expect(answer.rule == row.rule)
    }

    @Test func aPlacementAsksForTheStatusAndAttributesOnlyWhenARuleComparesThem() throws {
        #expect(Self.placement.needsStatus && Self.placement.needsAttributes)
        let plain = try Placement(id: "settings", json: ["rules": [["when": ["countries": ["JP"]], "offering": "japan"]], "default": "standard"])
        #expect(!plain.needsStatus && !plain.needsAttributes)
        #expect(plain.offering(for: TargetingContext(platform: .ios)).offering == "standard")
    }

    @Test func versionsCompareNumberByNumber() throws {
        func v(_ s: String) throws -> AppVersion { try #require(AppVersion(s)) }
        #expect(try v("1.10") > v("1.9"))
        #expect(try v("1.2") == v("1.2.0"))
        #expect(try v("2") < v("2.0.1"))
        for bad in ["", "1..2", "1.2.", "v1.2", "1.2-beta", "1.2.3.4.5", "1234567890", " 1.2"] { #expect(AppVersion(bad) == nil, "\(bad)") }
    }

    @Test func aMalformedRuleIsRefusedNamingItsField() {
        func refusal(_ json: JSONValue) -> String? {
            do {
                _ = try Placement(id: "p", json: json)
                return nil
            } catch {
                #expect(error.kind == .placementInvalid)
                return error.message
            }
        }
        #expect(refusal(["rules": [["when": ["platform": "windows"], "offering": "a"]], "default": "a"])?.contains("rules[0].when.platform") == true)
        #expect(refusal(["rules": [["when": ["countries": ["jp"]], "offering": "a"]], "default": "a"])?.contains("countries[0]") == true)
        #expect(refusal(["rules": [["when": ["appVersionMin": "3", "appVersionMax": "2"], "offering": "a"]], "default": "a"])?.contains("appVersionMax") == true)
        #expect(refusal(["rules": [["when": ["status": "vip"], "offering": "a"]], "default": "a"])?.contains("status") == true)
        #expect(refusal(["rules": [["when": ["country": "JP"], "offering": "a"]], "default": "a"])?.contains("rules[0].when.country") == true)
        #expect(refusal(["rules": []])?.contains("default is required") == true)
    }
}
