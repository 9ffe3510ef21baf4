import KakinCore
import KakinMetrics
import KakinOfferings
import KakinStorage

/// One experiment variant's customers (`?experiment=E&variant=V` on the numbers): the numbers are then those of the
/// customers enrolled in that variant, computed on the read from their facts (the rollups hold every customer, not a
/// variant's). Every fact of those customers counts, including what they bought before enrolling (a level such as
/// active subscriptions needs the whole history); an experiment's results count only what came after.
public struct MetricsCohort: Sendable, Hashable {
    public var experimentId: String
    public var variantId: String

    public init(experimentId: String, variantId: String) {
        self.experimentId = experimentId
        self.variantId = variantId
    }
}

/// A cohort's share of the rollups, computed once and read by as many overviews and series as a page shows.
public struct CohortCells: Sendable {
    let cells: [MetricCell]
}

extension BusinessMetrics {
    /// The cohort's share of the rollups: the sum of its customers' shares, paged through its enrollments (at most
    /// `OfferingLimits.resultsEnrollmentsMax`-many customers are read, in pages of `metricFactsCustomersMax`).
    public func cells(of cohort: MetricsCohort) async throws(KakinError) -> CohortCells {
        let settings = settings
        var total = Contribution()
        var after: String?
        var read = 0
        while read < OfferingLimits.resultsEnrollmentsMax {
            let (last, share) = try await store.snapshot { [after] r -> (String?, Contribution) in
                let page = try r.offerings.enrollments(experimentId: cohort.experimentId, variantId: cohort.variantId, afterCustomerId: after,
                                                       limit: KakinStore.metricFactsCustomersMax)
                var share = Contribution()
                for facts in try r.metricFacts(customerIds: page.map(\.customerId), ledgerSpanMs: CivilDay.quarterHourMs) {
                    share.add(Contributions.of(Self.facts(facts), settings: settings))
                }
                return (page.count == KakinStore.metricFactsCustomersMax ? page.last?.customerId : nil, share)
            }
            total.add(share)
            read += KakinStore.metricFactsCustomersMax
            guard let last else { break }
            after = last
        }
        return CohortCells(cells: Self.cells(total))
    }

    /// The overview's three sums (levels before `from`, levels at the end of `to`, flows of `from…to`), from the rollups
    /// or, for a cohort, from its customers' facts.
    func overviewSums(fromDay a: Int64, toDay b: Int64, cohort: CohortCells?) async throws(KakinError)
        -> (before: [MetricCell], atEnd: [MetricCell], flows: [MetricCell])
    {
        guard let cells = cohort?.cells else { return try await store.metricOverviewSums(levels: Self.levels, flows: Self.flows, fromDay: a, toDay: b) }
        let levels = Set(Self.levels)
        return (cells.filter { levels.contains($0.metric) && $0.day < a }, cells.filter { levels.contains($0.metric) && $0.day <= b },
                cells.filter { !levels.contains($0.metric) && $0.day >= a && $0.day <= b })
    }

    /// A series' inputs: levels before `from`, and every cell of `from…to`.
    func seriesCells(fromDay a: Int64, toDay b: Int64, cohort: CohortCells?) async throws(KakinError) -> (before: [MetricCell], days: [MetricCell]) {
        guard let cells = cohort?.cells else { return try await store.metricSeriesCells(levels: Self.levels, fromDay: a, toDay: b) }
        let levels = Set(Self.levels)
        return (cells.filter { levels.contains($0.metric) && $0.day < a }, cells.filter { $0.day >= a && $0.day <= b })
    }
}
