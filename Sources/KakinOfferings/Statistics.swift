import Foundation  // the math functions only (log, exp, lgamma, erfc)

/// The statistics of an experiment's results: deterministic for a given input (no sampling), so a results page reads
/// the same on every process and every reload.
///
/// - A rate (trials started, conversions, refunds per enrolled customer) is a Beta-binomial: with a uniform prior, the
///   rate after `x` successes in `n` is Beta(1 + x, 1 + n − x). Its 95 % interval is that distribution's 2.5 % and
///   97.5 % quantiles; the probability that one variant's rate is above another's is computed exactly (Evan Miller's
///   closed form, a sum of `min(α)` terms) up to `exactTermsMax` terms, by the normal approximation beyond.
/// - A mean per enrolled customer (revenue, MRR) uses the normal approximation: the mean ± 1.96 standard errors, and
///   Φ(difference ÷ its standard error) for the probability that one mean is above another.
public enum ExperimentStatistics {
    static let z975 = 1.959963984540054

    public struct Interval: Sendable, Hashable {
        public var low: Double
        public var high: Double
    }

    // MARK: Rates

    /// The 95 % interval of the rate after `successes` in `trials` (uniform prior).
    public static func rateInterval(successes x: Int, trials n: Int) -> Interval {
        precondition(x >= 0 && x <= n, "successes within trials")
        let a = Double(1 + x), b = Double(1 + n - x)
        return Interval(low: betaQuantile(0.025, a, b), high: betaQuantile(0.975, a, b))
    }

    /// P(rate B > rate A) given each one's successes and trials (uniform priors).
    public static func probabilityAbove(_ b: (successes: Int, trials: Int), _ a: (successes: Int, trials: Int)) -> Double {
        let aA = Double(1 + a.successes), bA = Double(1 + a.trials - a.successes)
        let aB = Double(1 + b.successes), bB = Double(1 + b.trials - b.successes)
        // The sum runs over α of the variable on the left; use the side with fewer terms (P(B > A) = 1 − P(A > B)).
        if aB <= aA {
            if aB <= Double(exactTermsMax) { return clamp(betaAbove(aB, bB, aA, bA)) }
        } else if aA <= Double(exactTermsMax) {
            return clamp(1 - betaAbove(aA, bA, aB, bB))
        }
        let mA = aA / (aA + bA), mB = aB / (aB + bB)
        let vA = aA * bA / ((aA + bA) * (aA + bA) * (aA + bA + 1)), vB = aB * bB / ((aB + bB) * (aB + bB) * (aB + bB + 1))
        return normalCDF((mB - mA) / (vA + vB).squareRoot())
    }

    /// P(X > Y) for X ~ Beta(aX, bX), Y ~ Beta(aY, bY), `aX` a whole number: Σ_{i=0}^{aX−1} B(aY+i, bX+bY) / ((bX+i) B(1+i, bX) B(aY, bY)).
    static func betaAbove(_ aX: Double, _ bX: Double, _ aY: Double, _ bY: Double) -> Double {
        precondition(aX == aX.rounded() && aX >= 1, "the closed form sums over a whole α")
        var total = 0.0
        let fixed = logBeta(aY, bY)
        var i = 0.0
        while i < aX {
            total += exp(logBeta(aY + i, bX + bY) - log(bX + i) - logBeta(1 + i, bX) - fixed)
            i += 1
        }
        return total
    }

    static func logBeta(_ a: Double, _ b: Double) -> Double { lgamma(a) + lgamma(b) - lgamma(a + b) }

    /// The regularized incomplete beta function I_x(a, b), by its continued fraction (modified Lentz), on the side
    /// where it converges fast.
    static func regularizedBeta(_ x: Double, _ a: Double, _ b: Double) -> Double {
        if x <= 0 { return 0 }
        if x >= 1 { return 1 }
        let front = exp(a * log(x) + b * log(1 - x) - logBeta(a, b))
        if x > (a + 1) / (a + b + 2) { return 1 - front * continuedFraction(1 - x, b, a) / b }
        return front * continuedFraction(x, a, b) / a
    }

    static func continuedFraction(_ x: Double, _ a: Double, _ b: Double) -> Double {
        let tiny = 1e-300
        var c = 1.0, d = 1 - (a + b) * x / (a + 1)
        if abs(d) < tiny { d = tiny }
        d = 1 / d
        var f = d
        for m in 1...10_000 {
            let m = Double(m)
            // Even step.
            var num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
            d = 1 + num * d
            if abs(d) < tiny { d = tiny }
            c = 1 + num / c
            if abs(c) < tiny { c = tiny }
            d = 1 / d
            f *= d * c
            // Odd step.
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
            d = 1 + num * d
            if abs(d) < tiny { d = tiny }
            c = 1 + num / c
            if abs(c) < tiny { c = tiny }
            d = 1 / d
            let step = d * c
            f *= step
            if abs(step - 1) < 1e-14 { break }
        }
        return f
    }

    /// The `p` quantile of Beta(a, b), by bisection on the regularized incomplete beta (to 1e-12).
    static func betaQuantile(_ p: Double, _ a: Double, _ b: Double) -> Double {
        var lo = 0.0, hi = 1.0
        for _ in 0..<60 {
            let mid = (lo + hi) / 2
            if regularizedBeta(mid, a, b) < p { lo = mid } else { hi = mid }
        }
        return (lo + hi) / 2
    }

    // MARK: Means

    /// A mean per enrolled customer from the sum and the sum of squares of `n` values (zeros included).
    public struct Mean: Sendable, Hashable {
        public var n: Int
        public var sum: Double
        public var sumOfSquares: Double

        public init(n: Int, sum: Double, sumOfSquares: Double) {
            self.n = n
            self.sum = sum
            self.sumOfSquares = sumOfSquares
        }

        public var mean: Double { n > 0 ? sum / Double(n) : 0 }

        /// The standard error of the mean (0 with fewer than two values).
        public var standardError: Double {
            guard n > 1 else { return 0 }
            let variance = max(0, (sumOfSquares - sum * sum / Double(n)) / Double(n - 1))
            return (variance / Double(n)).squareRoot()
        }

        public var interval: Interval {
            let half = z975 * standardError
            return Interval(low: mean - half, high: mean + half)
        }
    }

    /// P(mean B > mean A), normal approximation; with no spread on either side, 1, 0 or ½ by the means alone.
    public static func probabilityAbove(_ b: Mean, _ a: Mean) -> Double {
        let se = (b.standardError * b.standardError + a.standardError * a.standardError).squareRoot()
        guard se > 0 else { return b.mean > a.mean ? 1 : (b.mean < a.mean ? 0 : 0.5) }
        return normalCDF((b.mean - a.mean) / se)
    }

    static func normalCDF(_ z: Double) -> Double { 0.5 * erfc(-z / 2.0.squareRoot()) }

    static func clamp(_ p: Double) -> Double { min(1, max(0, p)) }
}
