import Foundation

/// An IANA zone's local dates, from Foundation's time zone database (the only Foundation use of this target; it reads
/// no clock). Offsets are cached per hour of UTC, so a rebuild over millions of facts asks Foundation rarely.
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
        // Zone offsets change on whole or half hours; a 15-minute bucket is exact for every zone in use.
        let bucket = ms >= 0 ? ms / 900_000 : (ms - 899_999) / 900_000
        let offset: Int64 = lock.withLock {
            if let o = offsets[bucket] { return o }
            let o = Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000))) * 1000
            if offsets.count > 200_000 { offsets.removeAll(keepingCapacity: true) }
            offsets[bucket] = o
            return o
        }
        let local = ms + offset
        return local >= 0 ? local / 86_400_000 : (local - 86_399_999) / 86_400_000
    }
}
