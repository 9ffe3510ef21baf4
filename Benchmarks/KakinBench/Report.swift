import Foundation

/// One line of the table: a figure beside its baseline measured in the same run, and the goal for their ratio.
struct Figure {
    var name: String
    var value: Double
    var baselineName: String
    var baselineValue: Double
    /// The ratio value / baseline should be at least this; nil when the figure has no goal yet.
    var goal: Double?
    /// Shown under the table: latencies, sample sizes, how the figure was taken.
    var details: [String] = []

    var ratio: Double { value / baselineValue }
    var meetsGoal: Bool { goal.map { ratio >= $0 } ?? true }
}

/// What one benchmark found: its figures, the integrity checks it made, figures it could not take.
struct BenchResult {
    var figures: [Figure] = []
    /// A description and whether it held (e.g. "ledger entries = 201 answers").
    var checks: [(String, Bool)] = []
    var skipped: [String] = []
    /// Printed after the figures' details under their title (the scale-out projection).
    var sections: [(title: String, lines: [String])] = []

    mutating func check(_ description: String, _ holds: Bool) { checks.append((description, holds)) }

    mutating func append(_ other: BenchResult) {
        figures += other.figures
        checks += other.checks
        skipped += other.skipped
        sections += other.sections
    }

    var passed: Bool { checks.allSatisfy(\.1) }

    func printed(title: String, repetitions: Int) -> String {
        var out = "\(title)\n"
        out += "Machine: \(ProcessInfo.processInfo.activeProcessorCount) cores (shared with other work: figures are noisy; "
        out += "each is the median of \(repetitions) repetitions, interleaved with its baseline; read the ratios).\n\n"
        let header = ["figure", "value", "baseline", "value", "ratio", "goal", ""]
        let rows = figures.map { f in
            [f.name, Self.rate(f.value), f.baselineName, Self.rate(f.baselineValue), String(format: "%.2f×", f.ratio),
             f.goal.map(Self.goal) ?? "—", f.goal == nil ? "" : (f.meetsGoal ? "ok" : "BELOW GOAL")]
        }
        if !figures.isEmpty { out += Self.table([header] + rows) }
        for f in figures where !f.details.isEmpty {
            out += "\n\(f.name) vs \(f.baselineName):\n" + f.details.map { "  \($0)\n" }.joined()
        }
        for section in sections { out += "\n\(section.title):\n" + section.lines.map { "  \($0)\n" }.joined() }
        if !skipped.isEmpty { out += "\nSkipped:\n" + skipped.map { "  \($0)\n" }.joined() }
        if !checks.isEmpty {
            out += "\nChecks:\n" + checks.map { "  \($0.1 ? "passed" : "FAILED"): \($0.0)\n" }.joined()
        }
        return out
    }

    /// "≥ 1.5×", "≥ 0.33×": one decimal unless the goal needs two.
    static func goal(_ ratio: Double) -> String {
        String(format: (ratio * 10).rounded() == ratio * 10 ? "≥ %.1f×" : "≥ %.2f×", ratio)
    }

    static func rate(_ perSecond: Double) -> String { "\(grouped(Int(perSecond.rounded()))) /s" }

    /// Every repetition's figure, for the details.
    static func rates(_ values: [Double]) -> String { values.map(rate).joined(separator: ", ") }

    static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }

    /// Columns padded to their widest cell; numeric columns (1, 3, 4) right-aligned.
    static func table(_ rows: [[String]]) -> String {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max()! }
        let rightAligned: Set<Int> = [1, 3, 4]
        return rows.map { row in
            row.indices.map { column in
                let pad = String(repeating: " ", count: widths[column] - row[column].count)
                return rightAligned.contains(column) ? pad + row[column] : row[column] + pad
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n") + "\n"
    }
}

func median(_ values: [Double]) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}
