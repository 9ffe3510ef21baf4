/// An ISO 8601 duration of whole years, months, weeks and days (`P1M`, `P1Y`, `P3D`, `P1W`), as App Store
/// subscription and offer periods use. Date arithmetic is done here in UTC civil time without Foundation's
/// Calendar, so it is exact, fast and the same on every machine.
public struct ISOPeriod: Sendable, Hashable, CustomStringConvertible {
    public var years: Int
    public var months: Int
    public var weeks: Int
    public var days: Int

    public init(years: Int = 0, months: Int = 0, weeks: Int = 0, days: Int = 0) {
        self.years = years
        self.months = months
        self.weeks = weeks
        self.days = days
    }

    /// Parses `PnYnMnWnD` (date part only). Returns nil for anything else, including an empty `P`.
    public init?(_ text: String) {
        var s = Substring(text)
        guard s.first == "P", s.count > 1, s.count <= 32 else { return nil }
        s = s.dropFirst()
        var y = 0, m = 0, w = 0, d = 0
        var number = ""
        var seen = Set<Character>()
        for c in s {
            if c.isASCII, c.isNumber {
                number.append(c)
                continue
            }
            guard let n = Int(number), n >= 0, n <= 10_000, !seen.contains(c) else { return nil }
            seen.insert(c)
            switch c {
            case "Y": y = n
            case "M": m = n
            case "W": w = n
            case "D": d = n
            default: return nil
            }
            number = ""
        }
        guard number.isEmpty, !seen.isEmpty else { return nil }
        self.init(years: y, months: m, weeks: w, days: d)
    }

    public var description: String {
        var s = "P"
        if years > 0 { s += "\(years)Y" }
        if months > 0 { s += "\(months)M" }
        if weeks > 0 { s += "\(weeks)W" }
        if days > 0 { s += "\(days)D" }
        return s == "P" ? "P0D" : s
    }

    public func multiplied(by n: Int) -> ISOPeriod {
        ISOPeriod(years: years * n, months: months * n, weeks: weeks * n, days: days * n)
    }

    /// A rough length in days, only for ordering periods; "same duration" compares the periods themselves.
    public var approximateDays: Int { years * 365 + months * 30 + weeks * 7 + days }

    /// `date + self` in UTC; a day-of-month past the end of the target month is clamped (Jan 31 + P1M = Feb 28/29).
    public func added(to ms: Int64) -> Int64 {
        let dayMs: Int64 = 86_400_000
        var dayNumber = floorDiv(ms, dayMs)
        let msOfDay = ms - dayNumber * dayMs
        if years != 0 || months != 0 {
            var (y, m, d) = CivilDate.fromDays(dayNumber)
            let totalMonths = y * 12 + (m - 1) + years * 12 + months
            y = floorDiv(totalMonths, 12)
            m = totalMonths - y * 12 + 1
            d = min(d, CivilDate.daysInMonth(year: y, month: m))
            dayNumber = CivilDate.toDays(year: y, month: m, day: d)
        }
        dayNumber += Int64(weeks * 7 + days)
        return dayNumber * dayMs + msOfDay
    }
}

/// Howard Hinnant's days-from-civil algorithms (proleptic Gregorian, days since 1970-01-01).
public enum CivilDate {
    public static func toDays(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let mp = Int64((month + 9) % 12)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func fromDays(_ days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = Int(doy - (153 * mp + 2) / 5 + 1)
        let m = Int(mp < 10 ? mp + 3 : mp - 9)
        let y = Int(yoe + era * 400) + (m <= 2 ? 1 : 0)
        return (y, m, d)
    }

    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

@inline(__always) func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}

@inline(__always) func floorDiv(_ a: Int, _ b: Int) -> Int {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}
