import Foundation
import KakinCore
import KakinOfferings
import KakinService
import Testing
@testable import KakinServer

/// The contract's "Offerings and experiments" over Kakin's routes: who may call what, targeting by what the app sends
/// and what Kakin knows of the customer, an invalid change refused with nothing changed, and an experiment whose results,
/// numbers and export follow the purchases its customers made through the simulated App Store.
@Suite struct OfferingsHTTP {
    static let json = ["Content-Type": "application/json"]

    @Test func eachRouteTakesTheAccessTheContractGivesIt() async throws {
        try await Authentication.withAuthenticatedKakin { k in
            let admin = ["Authorization": "Bearer \(Authentication.adminKey)"], backend = ["Authorization": "Bearer \(Authentication.backendKey)"]
            let offering: JSONValue = ["packages": [["id": "coins", "appStore": "coins.100"]]]
            #expect(try await k.request("PUT", "/v1/admin/offerings/coins", json: offering, headers: backend).status == 403)
            let put = try await k.request("PUT", "/v1/admin/offerings/coins", json: offering, headers: admin)
            #expect(put.status == 200 && put.json["version"] == 1 && put.json["updatedBy"]?.stringValue?.hasPrefix("api key ") == true)
            #expect(try await k.request("PUT", "/v1/admin/placements/shop", json: ["default": "coins"], headers: admin).status == 200)
            #expect(try await k.request("GET", "/v1/admin/placements/shop", headers: backend).status == 403)
            #expect(try await k.request("GET", "/v1/admin/audit", headers: admin).json["entries"]?.arrayValue?.count == 2)

            let path = "/v1/customers/u1/offerings?placement=shop&platform=ios"
            #expect(try await k.request("GET", path, headers: ["Authorization": "Bearer \(Authentication.customerToken("u1"))"]).status == 200)
            #expect(try await k.request("GET", path, headers: ["Authorization": "Bearer \(Authentication.customerToken("u2"))"]).status == 403)
            #expect(try await k.request("GET", path, headers: backend).json["offering"]?["id"] == "coins")
            #expect(try await k.request("GET", path).status == 401)

            let attributes = "/v1/customers/u1/attributes"
            #expect(try await k.request("PUT", attributes, json: ["plan": "pro"], headers: ["Authorization": "Bearer \(Authentication.customerToken("u1"))"]).status == 403)
            let set = try await k.request("PUT", attributes, json: ["plan": "pro", "cohort": "2026-11"], headers: backend)
            #expect(set.status == 200 && set.json == ["customerId": "u1", "attributes": ["plan": "pro", "cohort": "2026-11"]])
        }
    }

    @Test func theFirstMatchingRuleAnswersAndAnInvalidChangeChangesNothing() async throws {
        try await SimulatedKakin.with { k in
            for (id, product) in [("standard", "premium.monthly"), ("coins", "coins.500"), ("winback", "premium.yearly"), ("pro", "noads")] {
                #expect(await k.kakin("PUT", "/v1/admin/offerings/\(id)", ["packages": [["id": "p", "appStore": .string(product)]]]).status == 200)
            }
            let placement: JSONValue = ["rules": [
                ["when": ["attributes": ["plan": "pro"]], "offering": "pro"],
                ["when": ["status": "active"], "offering": "winback"],
                ["when": ["countries": ["JP"], "appVersionMin": "2.0"], "offering": "coins"],
            ], "default": "standard"]
            #expect(await k.kakin("PUT", "/v1/admin/placements/onboarding", placement).status == 200)
            func asks(_ customer: String, _ query: String = "") async -> String? {
                await k.kakin("GET", "/v1/customers/\(customer)/offerings?placement=onboarding&platform=ios\(query)").json["offering"]?["id"]?.stringValue
            }
            #expect(await asks("u1") == "standard")
            #expect(await asks("u1", "&country=jp&appVersion=2.1") == "coins")
            #expect(await asks("u1", "&country=JP&appVersion=1.9") == "standard")
            try await k.buy("u1", "premium.monthly")
            #expect(await asks("u1", "&country=JP&appVersion=2.1") == "winback")   // active now: rule 1 before rule 2
            #expect(await k.kakin("PUT", "/v1/customers/u1/attributes", ["plan": "pro"]).status == 200)
            #expect(await asks("u1", "&country=JP&appVersion=2.1") == "pro")
            #expect(await k.kakin("PUT", "/v1/customers/u1/attributes", ["plan": nil]).json["attributes"] == [:])
            #expect(await asks("u1") == "winback")

            // Refused: 422 with the error; the placement, its version and the answers stay as they were.
            let before = await k.kakin("GET", "/v1/admin/placements/onboarding").json
            let refused = await k.kakin("PUT", "/v1/admin/placements/onboarding", ["rules": [], "default": "nothing-like-it"])
            #expect(refused.status == 422 && refused.json["error"]?["id"] == "KKN-5204")
            let unknown = await k.kakin("PUT", "/v1/admin/offerings/standard", ["packages": [["id": "p", "appStore": "premium.weekly"]]])
            #expect(unknown.status == 422 && unknown.json["error"]?["code"] == "offering_unknown_product")
            #expect(await k.kakin("GET", "/v1/admin/placements/onboarding").json == before)
            #expect(await k.kakin("GET", "/v1/admin/offerings/standard").json["version"] == 1)
            #expect(await asks("u2") == "standard")
            #expect(await k.kakin("GET", "/v1/admin/audit").json["entries"]?.arrayValue?.count == 5)

            // The query's own errors.
            #expect(await k.kakin("GET", "/v1/customers/u1/offerings?placement=nowhere&platform=ios").json["error"]?["id"] == "KKN-5210")
            for bad in ["placement=onboarding", "placement=onboarding&platform=windows", "platform=ios",
                        "placement=onboarding&platform=ios&appVersion=2.x", "placement=onboarding&platform=ios&country=JPN"] {
                let r = await k.kakin("GET", "/v1/customers/u1/offerings?\(bad)")
                #expect(r.status == 400 && r.json["error"]?["id"] == "KKN-5212", "\(bad)")
            }
        }
    }

    @Test func anExperimentsResultsNumbersAndExportFollowThePurchasesMadeAfterEnrollment() async throws {
        try await SimulatedKakin.with { k in
            #expect(await k.kakin("PUT", "/v1/admin/offerings/coins-small", ["packages": [["id": "coins", "appStore": "coins.100"]]]).status == 200)
            #expect(await k.kakin("PUT", "/v1/admin/offerings/coins-big", ["packages": [["id": "coins", "appStore": "coins.500"]],
                                                                           "metadata": ["highlight": "coins"]]).status == 200)
            #expect(await k.kakin("PUT", "/v1/admin/placements/out_of_coins", ["default": "coins-small"]).status == 200)
            // u0 bought before the experiment: that purchase is not the variant's.
            try await k.buy("u0", "coins.100")
            _ = try await k.sim("POST", "/simulator/v1/clock", ["advanceSeconds": 60])
            let experiment = await k.kakin("PUT", "/v1/admin/experiments/coins-test", [
                "placement": "out_of_coins", "enrollmentPercent": 100, "startsAt": .string(Timestamp.rfc3339(k.nowMs)),
                "variants": [["id": "small", "offering": "coins-small", "weight": 1], ["id": "big", "offering": "coins-big", "weight": 1]],
            ])
            #expect(experiment.status == 200 && experiment.json["state"] == "running")
            var variantOf: [String: String] = [:]
            for i in 0..<40 {
                let answer = await k.kakin("GET", "/v1/customers/u\(i)/offerings?placement=out_of_coins&platform=ios").json
                variantOf["u\(i)"] = answer["experiment"]?["variant"]?.stringValue
                #expect(answer["offering"]?["packages"]?.arrayValue?.first?["productId"] == (variantOf["u\(i)"] == "big" ? "coins.500" : "coins.100"))
            }
            // Every third customer buys what its paywall shows; one refund.
            var bought: [String: Int] = [:]
            var revenue: [String: Int64] = [:]
            var refunded = ""
            for i in stride(from: 0, to: 40, by: 3) {
                let variant = variantOf["u\(i)"]!
                let sold = try await k.buy("u\(i)", variant == "big" ? "coins.500" : "coins.100")
                bought[variant, default: 0] += 1
                revenue[variant, default: 0] += variant == "big" ? 600 : 120
                if refunded.isEmpty, variant == "big", let id = sold["transactionId"]?.stringValue {
                    _ = try await k.sim("POST", "/simulator/v1/transactions/\(id)/refund")
                    refunded = "u\(i)"
                    revenue[variant, default: 0] -= 600
                }
            }
            // u1 buys on the web shop: its variant's purchase too, whichever source sold it.
            let webVariant = variantOf["u1"]!, webPrice: Int64 = webVariant == "big" ? 600 : 120
            let web = await k.kakin("POST", "/v1/customers/u1/external-purchases", [
                "provider": "web", "externalId": "ord_1", "productId": .string(webVariant == "big" ? "coins.500" : "coins.100"),
                "price": .int(webPrice), "currency": "JPY", "purchasedAt": .string(Timestamp.rfc3339(k.nowMs + 1_000)),
            ], headers: [("Idempotency-Key", "ord_1")])
            #expect(web.status == 201, "\(web.json)")
            bought[webVariant, default: 0] += 1
            revenue[webVariant, default: 0] += webPrice
            let results = await k.kakin("GET", "/v1/admin/experiments/coins-test/results").json
            let variants = results["variants"]?.arrayValue ?? []
            #expect(variants.map { $0["id"]?.stringValue } == ["small", "big"] && results["complete"] == true)
            for v in variants {
                let id = v["id"]?.stringValue ?? ""
                #expect(v["enrolled"]?.int64Value == Int64(variantOf.values.filter { $0 == id }.count))
                #expect(v["paidConversions"]?.int64Value == Int64(bought[id] ?? 0), "\(id): \(v)")
                #expect(v["refunds"]?.int64Value == (id == "big" && !refunded.isEmpty ? 1 : 0))
                let perCustomer = (v["revenuePerCustomer"]?.arrayValue ?? []).first { $0["currency"] == "JPY" }?["amount"]?.doubleValue ?? -1
                let enrolled = Double(v["enrolled"]?.int64Value ?? 1)
                #expect(abs(perCustomer - Double(revenue[id] ?? 0) / enrolled) < 0.01, "\(id): \(perCustomer)")
            }
            // One event per enrollment, in each customer's feed.
            let events = await k.kakin("GET", "/v1/customers/u3/events?afterSequence=0").json["events"]?.arrayValue ?? []
            #expect(events.filter { $0["type"] == "experiment.enrolled" }.map { $0["data"]?["variant"] } == [.string(variantOf["u3"]!)])

            // The numbers of one variant's customers: u0's earlier purchase counts there too (their whole history).
            let day = Timestamp.rfc3339(k.nowMs).prefix(10)
            for variant in ["small", "big"] {
                let numbers = await k.kakin("GET", "/v1/admin/metrics/overview?from=\(day)&to=\(day)&experiment=coins-test&variant=\(variant)").json
                let gross = numbers["revenue"]?.arrayValue?.first?["gross"]?.int64Value ?? 0
                let expected = Int64(bought[variant] ?? 0) * (variant == "big" ? 600 : 120) + (variantOf["u0"] == variant ? 120 : 0)
                #expect(gross == expected, "\(variant): \(numbers)")
            }
            #expect(await k.kakin("GET", "/v1/admin/metrics/overview?from=\(day)&to=\(day)&experiment=nope&variant=a").json["error"]?["id"] == "KKN-5211")
            #expect(await k.kakin("GET", "/v1/admin/metrics/overview?from=\(day)&to=\(day)&experiment=coins-test&variant=c").status == 400)

            // The export of one variant holds its customers' rows only.
            let cohort = try await k.app.services.offerings.cohort(experimentId: "coins-test", variantId: "big")
            let dir = k.directory.appendingPathComponent("export-big")
            let manifest = try await Exporter.export(store: k.app.store, directory: dir.path, sinceMs: 0, untilMs: k.nowMs + 1, format: .jsonl,
                                                     cohort: .init(cohort: cohort, customers: try await Exporter.customers(of: cohort, k.app.services.offerings)))
            #expect(manifest["cohort"] == ["experiment": "coins-test", "variant": "big", "customers": .int(Int64(variantOf.values.filter { $0 == "big" }.count))])
            let file = try #require(manifest["files"]?["transactions"]?["file"]?.stringValue)
            let rows = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8).split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
            #expect(Set(rows.compactMap { $0["customerId"]?.stringValue }) == Set(variantOf.filter { $0.value == "big" }.keys).intersection(
                Set(stride(from: 0, to: 40, by: 3).map { "u\($0)" })))
        }
    }

    @Test func theDeskEditsAnObjectAndShowsAnExperimentsResultsWithCharts() async throws {
        try await SimulatedKakin.with { k in
            let admin = AdminClient(k.app)
            #expect(await k.kakin("PUT", "/v1/admin/offerings/standard", ["packages": [["id": "m", "appStore": "premium.monthly"]]]).status == 200)
            #expect(await k.kakin("PUT", "/v1/admin/offerings/coins", ["packages": [["id": "c", "appStore": "coins.100"]]]).status == 200)
            let form = await admin.get("/admin/offerings/edit?kind=placement&id=onboarding")
            #expect(form.status == 200 && form.text.contains("Not defined yet"))
            let saved = await admin.post("/admin/offerings/edit?kind=placement&id=onboarding", [("body", #"{"default": "standard"}"#)], from: form)
            #expect(saved.status == 303 && saved.location == "/admin/offerings/edit?kind=placement&id=onboarding&done=saved")
            let refused = await admin.post("/admin/offerings/edit?kind=placement&id=onboarding", [("body", #"{"default": "<script>"}"#)], from: form)
            #expect(refused.status == 422 && refused.text.contains("KKN-5203") && !refused.text.contains("<script>"))
            #expect(await k.kakin("GET", "/v1/admin/placements/onboarding").json["updatedBy"] == "local")
            let experiment = await admin.post("/admin/offerings/edit?kind=experiment&id=e1", [("body", """
                {"placement": "onboarding", "enrollmentPercent": 100, "startsAt": "2026-01-01T00:00:00Z",
                 "variants": [{"id": "a", "offering": "standard", "weight": 1}, {"id": "b", "offering": "coins", "weight": 1}]}
                """)], from: form)
            #expect(experiment.status == 303)
            for i in 0..<6 { _ = await k.kakin("GET", "/v1/customers/u\(i)/offerings?placement=onboarding&platform=ios") }
            let list = await admin.get("/admin/offerings")
            #expect(list.status == 200 && list.text.contains("onboarding") && list.text.contains("/admin/experiments/e1"))
            let results = await admin.get("/admin/experiments/e1")
            #expect(results.status == 200 && results.text.contains("<svg") && results.text.contains("Paid conversion rate"))
            #expect(results.headers["Content-Security-Policy"]?.contains("default-src 'none'") == true && !results.text.contains("<script"))
            let numbers = await admin.get("/admin/metrics?experiment=e1&variant=b")
            #expect(numbers.status == 200 && numbers.text.contains("customers of experiment") && numbers.text.contains("name=\"variant\" value=\"b\""))
            #expect(results.text.contains("/admin/metrics?experiment=e1&variant=b"))
            let audit = await admin.get("/admin/audit")
            #expect(audit.status == 200 && audit.text.contains("experiment") && audit.text.contains("local"))
        }
    }
}

/// `paywalls` in the config file: shapes checked at load, objects the database lacks seeded at start (once), a seed the
/// catalogs refuse stops the start.
@Suite struct OfferingsSeed {
    static let app = #"{"bundleId": "com.example.video", "environments": ["Sandbox"], "products": [{"productId": "coins.100", "type": "consumable", "coins": 100}]}"#

    func configuration(_ paywalls: String) throws -> Configuration {
        try Configuration.parse(try JSONParser.parse(#"{"apps": [\#(Self.app)], "paywalls": \#(paywalls)}"#), baseDirectory: "/tmp", environment: [:])
    }

    @Test func aMalformedSeedIsAConfigurationErrorNamingItsKey() {
        for (paywalls, key) in [(#"{"offerings": {"x": {"packages": []}}}"#, "paywalls.offerings.x"),
                                (#"{"placements": {"bad id": {"default": "x"}}}"#, "paywalls.placements.bad id"),
                                (#"{"experiment": {}}"#, "paywalls.experiment")] {
            do {
                _ = try configuration(paywalls)
                Issue.record("\(paywalls) was accepted")
            } catch let e as ConfigurationError {
                #expect(e.description.hasPrefix(key), "\(e)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test func theSeedIsWrittenOnceAndEditsSurviveARestart() async throws {
        let seed: [Configuration.PaywallSeed] = [
            .init(kind: .offering, id: "coins", body: ["packages": [["id": "c", "appStore": "coins.100"]]]),
            .init(kind: .placement, id: "shop", body: ["default": "coins"]),
        ]
        let k = try await TestKakin.start(configure: { $0.paywalls = seed })
        #expect(try await k.request("GET", "/v1/admin/placements/shop").json["updatedBy"] == "config")
        #expect(try await k.request("PUT", "/v1/admin/offerings/coins", json: ["packages": [["id": "c", "appStore": "coins.500"]]]).status == 200)
        await k.stop(keepingFiles: true)
        let again = try await TestKakin.start(directory: k.directory, manualClock: k.clock, appStore: k.appStore, configure: { $0.paywalls = seed })
        let offering = try await again.request("GET", "/v1/admin/offerings/coins").json
        #expect(offering["version"] == 2 && offering["packages"]?.arrayValue?.first?["appStore"] == "coins.500")
        await again.stop()

        do {
            let refused = try await TestKakin.start(configure: { $0.paywalls = [.init(kind: .offering, id: "x", body: ["packages": [["id": "c", "appStore": "nope"]]])] })
            await refused.stop()
            Issue.record("a seed naming an unknown product started")
        } catch let e as KakinError {
            #expect(e.kind == .invalidConfiguration && e.message.hasPrefix("paywalls: Package c names nope"))
        }
    }
}
