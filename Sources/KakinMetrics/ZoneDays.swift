import Foundation

/// An IANA zone's local dates, from Foundation's time zone database (the only Foundation use of this target; it reads
/// no clock). Offsets are cached per quarter hour of UTC, so a rebuild over millions of facts asks Foundation rarely.
public final class ZoneDays: ReportingCalendar, @unchecked Sendable {
    public let identifier: String
    private let zone: TimeZone
    private let lock = NSLock()
    private var offsets: [Int64: Int64] = [:]

    /// Nil for a name Foundation does not know.
    public init?(identifier: String) {
        guard let zone = TimeZone(identifier: identifier) else { return nil }
        self.identifier = identifier
        self.zone = zone
    }

    public func day(ofMs ms: Int64) -> Int64 {
        // Zones change offset on whole quarter hours of UTC and are a whole number of quarter hours from it (today's;
        // the local mean times of the 1800s are not): the quarter's start has the day of every millisecond in it.
        let start = CivilDay.quarterHourStart(ofMs: ms)
        let offset: Int64 = lock.withLock {
            if let o = offsets[start] { return o }
            let o = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(start) / 1000))) * 1000
            if offsets.count > 200_000 { offsets.removeAll(keepingCapacity: true) }
            offsets[start] = o
            return o
        }
        let local = start + offset
        return local >= 0 ? local / 86_400_000 : (local - 86_399_999) / 86_400_000
    }
}
