import Foundation
import KakinCore
import KakinKit
import KakinOfferings

/// `kakin simulate --seed N --experiment a=0.08,b=0.12 [--customers 4000]`: an A/B test through the whole system. Every
/// customer's app asks Kakin for the `onboarding` placement's offering (KakinKit's `offering(placement:)` on the
/// simulated phone, enrolled in experiment `simulated` by Kakin's assignment), then buys its package with the variant's
/// true conversion rate (a seeded draw) through the simulated App Store, as a real app would. The results are read from
/// Kakin (`GET /v1/admin/experiments/{id}/results`' use case) and must match what the world bought: enrolled and paid
/// conversions per variant. Prints each variant and its probability to beat the first (the control).
public enum ExperimentRun {
    /// The variants and their true conversion rates, in order (the first is the control): `a=0.08,b=0.12`.
    public static func parse(_ text: String) -> [(id: String, rate: Double)]? {
        let list = text.split(separator: ",").map { pair -> (id: String, rate: Double)? in
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2, OfferingIDs.isValid(kv[0]), let rate = Double(kv[1]), (0...1).contains(rate) else { return nil }
            return (kv[0], rate)
        }
        guard (OfferingLimits.variantsMin...OfferingLimits.variantsMax).contains(list.count), list.allSatisfy({ $0 != nil }),
              Set(list.map { $0!.id }).count == list.count else { return nil }
        return list.map { $0! }
    }

    /// What a run saw: Kakin's results, and what the world made happen.
    public struct Outcome: Sendable {
        public var results: JSONValue
        public var enrolled: [String: Int]
        public var bought: [String: Int]
        /// The results' enrolled and paid conversions equal what the world did.
        public var matches: Bool
    }

    public static func run(_ options: SimulationOptions, rates: [(id: String, rate: Double)]) async throws -> Outcome {
        let world = try await World(options)
        do {
            let outcome = try await world.runExperiment(rates)
            await world.close()
            return outcome
        } catch {
            await world.close()
            throw error
        }
    }

    /// The command's lines: one per variant, then whether the results match the purchases.
    public static func lines(_ o: Outcome, rates: [(id: String, rate: Double)], seed: UInt64) -> [String] {
        func f(_ v: JSONValue?) -> String { String(format: "%.4f", v?.doubleValue ?? 0) }
        var out = ["experiment seed \(seed) true rates " + rates.map { "\($0.id)=\($0.rate)" }.joined(separator: ",")]
        for v in o.results["variants"]?.arrayValue ?? [] {
            let paid = v["rates"]?["paidConversions"]
            let revenue = (v["revenuePerCustomer"]?.arrayValue ?? []).first
            var line = "variant \(v["id"]?.stringValue ?? "") enrolled \(v["enrolled"]?.int64Value ?? 0) paid \(v["paidConversions"]?.int64Value ?? 0)"
                + " rate \(f(paid?["rate"])) [\(f(paid?["low"])), \(f(paid?["high"]))]"
            if let revenue {
                line += " revenue/customer \(revenue["currency"]?.stringValue ?? "") \(String(format: "%.2f", revenue["amount"]?.doubleValue ?? 0))"
                    + " [\(String(format: "%.2f", revenue["low"]?.doubleValue ?? 0)), \(String(format: "%.2f", revenue["high"]?.doubleValue ?? 0))]"
            }
            line += v["probabilityToBeatControl"]?.doubleValue.map { " P(beats \(rates[0].id)) \(String(format: "%.4f", $0))" } ?? " (control)"
            out.append(line)
        }
        out.append("results \(o.matches ? "match" : "DO NOT match") the purchases made: "
                   + rates.map { "\($0.id) enrolled \(o.enrolled[$0.id] ?? 0) bought \(o.bought[$0.id] ?? 0)" }.joined(separator: ", "))
        return out
    }
}

extension World {
    static let experimentId = "simulated"
    static let experimentProduct = "coins.500"

    /// The experiment on the placement, then every customer's paywall and purchase, then the results.
    func runExperiment(_ rates: [(id: String, rate: Double)]) async throws -> ExperimentRun.Outcome {
        try await createCustomers()
        let offerings = services.offerings
        for v in rates {
            _ = try await offerings.put(.offering, id: "paywall-\(v.id)", body: ["packages": [["id": "coins", "appStore": .string(Self.experimentProduct)]],
                                                                                 "metadata": ["variant": .string(v.id)]], actor: "simulation")
        }
        _ = try await offerings.put(.placement, id: "onboarding", body: ["default": .string("paywall-\(rates[0].id)")], actor: "simulation")
        _ = try await offerings.put(.experiment, id: Self.experimentId, body: [
            "placement": "onboarding", "enrollmentPercent": 100, "startsAt": .string(Timestamp.rfc3339(clock.nowMs())),
            "variants": .array(rates.map { ["id": .string($0.id), "offering": .string("paywall-\($0.id)"), "weight": 1] }),
        ], actor: "simulation")
        let rate = Dictionary(uniqueKeysWithValues: rates.map { ($0.id, $0.rate) })
        var enrolled: [String: Int] = [:], bought: [String: Int] = [:]
        for customer in customers {
            let paywall = try await customer.app.offering(placement: "onboarding")
            guard let variant = paywall.experiment?.variant, let product = paywall.offering.packages.first?.productId else {
                throw InvariantFailure(seed: options.seed, step: step, invariant: "experiment", detail: "\(customer.id) was not enrolled")
            }
            enrolled[variant, default: 0] += 1
            guard rng.chance(rate[variant] ?? 0) else { continue }
            guard case .completed = await customer.app.purchase(product) else {
                throw InvariantFailure(seed: options.seed, step: step, invariant: "experiment", detail: "\(customer.id)'s purchase did not complete")
            }
            bought[variant, default: 0] += 1
        }
        let results = try await offerings.results(experimentId: Self.experimentId)
        let matches = (results["variants"]?.arrayValue ?? []).allSatisfy { v in
            let id = v["id"]?.stringValue ?? ""
            return v["enrolled"]?.int64Value == Int64(enrolled[id] ?? 0) && v["paidConversions"]?.int64Value == Int64(bought[id] ?? 0)
        }
        return ExperimentRun.Outcome(results: results, enrolled: enrolled, bought: bought, matches: matches)
    }
}
