import KakinCore

/// A calendar date as a number: days since 1970-01-01 of the proleptic Gregorian calendar. The rollups key every
/// fact by the date it happened on in its app's `reportingTimeZone` (`ReportingCalendar`), so a day number is a
/// local date, comparable across apps whatever their zones.
public enum CivilDay {
    /// 1970-01-01 … 9999-12-31: what `YYYY-MM-DD` can name.
    public static let range: ClosedRange<Int64> = 0...2_932_896
    /// A quarter hour of UTC (from the epoch): every `ReportingCalendar` answers one day for all of it, so facts that
    /// only add up on their day (the ledger's deltas) may be summed per quarter hour first, by the database.
    public static let quarterHourMs: Int64 = 900_000

    /// The first millisecond of the quarter hour `ms` falls in.
    public static func quarterHourStart(ofMs ms: Int64) -> Int64 {
        (ms >= 0 ? ms / quarterHourMs : (ms - quarterHourMs + 1) / quarterHourMs) * quarterHourMs
    }

    /// The day number of a date (Howard Hinnant's days-from-civil).
    public static func number(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date of a day number.
    public static func date(_ n: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = n + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// `YYYY-MM-DD` → day number; nil unless a real date in `range`.
    public static func parse(_ s: String) -> Int64? {
        let u = Array(s.utf8)
        guard u.count == 10, u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-") else { return nil }
        func digits(_ r: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in r {
                guard u[i] >= 0x30, u[i] <= 0x39 else { return nil }
                v = v * 10 + Int64(u[i] - 0x30)
            }
            return v
        }
        guard let y = digits(0..<4), let m = digits(5..<7), let d = digits(8..<10), (1...12).contains(m), d >= 1 else { return nil }
        let n = number(year: y, month: m, day: d)
        guard date(n) == (y, m, d), range.contains(n) else { return nil }
        return n
    }

    /// `YYYY-MM-DD`.
    public static func string(_ n: Int64) -> String {
        let (y, m, d) = date(n)
        func pad(_ v: Int64, _ w: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))"
    }

    /// Monday of the ISO week the day is in (1970-01-01 was a Thursday).
    public static func weekStart(_ n: Int64) -> Int64 {
        let weekday = ((n + 3) % 7 + 7) % 7  // 0 = Monday
        return n - weekday
    }

    /// The first day of the day's month.
    public static func monthStart(_ n: Int64) -> Int64 {
        let (y, m, _) = date(n)
        return number(year: y, month: m, day: 1)
    }

    /// The first day of the next month.
    public static func nextMonthStart(_ n: Int64) -> Int64 {
        let (y, m, _) = date(n)
        return m == 12 ? number(year: y + 1, month: 1, day: 1) : number(year: y, month: m + 1, day: 1)
    }
}

/// Which local date an instant falls on. The computation never reads a clock or a time zone database itself: the
/// caller hands it one of these per app (`ZoneDays` is Foundation's zone; tests may use a fixed offset).
public protocol ReportingCalendar: Sendable {
    /// The IANA name (what the overview answers as `timeZone`).
    var identifier: String { get }
    /// The day number of the local date at `ms` (milliseconds since the UNIX epoch): the same for every millisecond of
    /// a UTC quarter hour (`CivilDay.quarterHourMs`), as every zone's offset today is a whole number of quarter hours.
    func day(ofMs ms: Int64) -> Int64
}

extension ReportingCalendar {
    /// The last millisecond of local day `day` (a balance moved in "as of" a date is dated then: it counts on that day).
    public func lastMs(ofDay day: Int64) -> Int64 {
        // Zones are within ±26 hours of UTC: search the first millisecond of the next local day around UTC's.
        var low = (day + 1) * 86_400_000 - 26 * 3_600_000, high = (day + 1) * 86_400_000 + 26 * 3_600_000
        while low < high {
            let mid = low + (high - low) / 2
            if self.day(ofMs: mid) > day { high = mid } else { low = mid + 1 }
        }
        return low - 1
    }
}

/// A zone with one fixed offset (UTC by default): tests, and facts whose zone does not matter.
public struct FixedOffsetCalendar: ReportingCalendar {
    public let identifier: String
    /// A whole number of quarter hours, as every zone's.
    public let offsetSeconds: Int64

    public init(identifier: String = "UTC", offsetSeconds: Int64 = 0) {
        precondition((offsetSeconds * 1000) % CivilDay.quarterHourMs == 0, "an offset is a whole number of quarter hours")
        self.identifier = identifier
        self.offsetSeconds = offsetSeconds
    }

    public func day(ofMs ms: Int64) -> Int64 {
        let local = ms + offsetSeconds * 1000
        return local >= 0 ? local / 86_400_000 : (local - 86_399_999) / 86_400_000
    }
}
