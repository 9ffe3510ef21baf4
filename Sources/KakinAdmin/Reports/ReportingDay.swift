import Foundation
import KakinCore

/// "As of" a calendar day in an app's reporting time zone: the instant that day ends there.
public enum ReportingDay {
    public static let defaultTimeZone = "Asia/Tokyo"  // = AppSettings.defaultReportingTimeZone (KakinService)

    /// Whether Foundation knows the IANA zone name (config validation).
    public static func isKnownTimeZone(_ identifier: String) -> Bool { TimeZone(identifier: identifier) != nil }

    /// The first millisecond after `date` (`YYYY-MM-DD`) ends in `timeZone`: entries strictly before it count.
    /// Nil when the date or the zone is not valid.
    public static func endMs(of date: String, timeZone identifier: String) -> Int64? {
        guard Timestamp.parseDate(date) != nil, let zone = TimeZone(identifier: identifier) else { return nil }
        let parts = date.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        guard let start = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])),
              let next = calendar.date(byAdding: .day, value: 1, to: start) else { return nil }
        return Int64((next.timeIntervalSince1970 * 1000).rounded())
    }

    /// The latest statutory base date (March 31 or September 30) whose day has ended by `nowMs` in `timeZone`.
    public static func latestBaseDate(nowMs: Int64, timeZone identifier: String) -> String {
        let today = Timestamp.rfc3339(nowMs).prefix(4)
        let year = Int(today) ?? 2026
        for candidate in ["\(year)-09-30", "\(year)-03-31", "\(year - 1)-09-30", "\(year - 1)-03-31"] {
            if let end = endMs(of: candidate, timeZone: identifier), end <= nowMs { return candidate }
        }
        return "\(year - 1)-03-31"
    }
}
