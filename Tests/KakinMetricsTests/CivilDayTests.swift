import Foundation
import KakinMetrics
import Testing

@Suite struct CivilDayTests {
    @Test func datesRoundTripAndBucketsFollowTheCalendar() {
        #expect(CivilDay.parse("1970-01-01") == 0)
        #expect(CivilDay.parse("2026-02-29") == nil)
        #expect(CivilDay.parse("2024-02-29").map(CivilDay.string) == "2024-02-29")
        let jan1 = CivilDay.parse("2026-01-01")!
        #expect(CivilDay.string(CivilDay.weekStart(jan1)) == "2025-12-29")  // a Thursday's Monday
        #expect(CivilDay.string(CivilDay.nextMonthStart(CivilDay.parse("2026-12-15")!)) == "2027-01-01")
        let weeks = MetricsInterval.week.buckets(fromDay: jan1, toDay: jan1 + 13)
        #expect(weeks.map { CivilDay.string($0.lowerBound) } == ["2026-01-01", "2026-01-05", "2026-01-12"])
        #expect(MetricsInterval.month.buckets(fromDay: jan1, toDay: CivilDay.parse("2026-03-31")!).count == 3)
    }

    @Test func localDatesFollowTheZone() {
        let tokyo = FixedOffsetCalendar(identifier: "Asia/Tokyo", offsetSeconds: 9 * 3600)
        // 2026-01-01T15:00:00Z is already January 2 in Tokyo.
        #expect(CivilDay.string(tokyo.day(ofMs: 1_767_279_600_000)) == "2026-01-02")
        #expect(CivilDay.string(ZoneDays(identifier: "Asia/Tokyo")!.day(ofMs: 1_767_279_600_000)) == "2026-01-02")
        #expect(CivilDay.string(ZoneDays(identifier: "America/New_York")!.day(ofMs: 1_767_279_600_000)) == "2026-01-01")
    }

    /// Every zone's day is one day over each UTC quarter hour (`ReportingCalendar`), and it is the local date of every
    /// minute in it: zones 30 and 45 minutes off the hour, a 30-minute clock change, the Chatham Islands' +12:45/+13:45.
    /// So the ledger summed per quarter hour by the database counts each entry on its own local date.
    @Test func aZonesDayIsTheLocalDateAndTheSameOverEachQuarterHour() {
        for name in ["Asia/Kathmandu", "Australia/Lord_Howe", "America/St_Johns", "Europe/Berlin", "Pacific/Chatham", "Asia/Kolkata"] {
            let days = ZoneDays(identifier: name)!, zone = TimeZone(identifier: name)!
            var wrong: [String] = []
            // Every 7 minutes of 2026 (UTC), so each quarter hour is seen at different minutes.
            var ms: Int64 = 1_767_225_600_000
            while ms < 1_798_761_600_000, wrong.count < 5 {
                let local = ms + Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000))) * 1000
                let quarter = CivilDay.quarterHourStart(ofMs: ms)
                if days.day(ofMs: ms) != local / 86_400_000 || days.day(ofMs: quarter) != days.day(ofMs: quarter + CivilDay.quarterHourMs - 1) {
                    wrong.append("\(ms)")
                }
                ms += 7 * 60_000
            }
            #expect(wrong.isEmpty, "\(name): \(wrong)")
        }
    }

    @Test func minorUnitsFollowISO4217() {
        #expect(CurrencyUnits.minor(milli: 980_000, currency: "JPY") == 980)
        #expect(CurrencyUnits.minor(milli: 9_990, currency: "USD") == 999)
        #expect(CurrencyUnits.minor(milli: 1_234, currency: "KWD") == 1_234)
        let rates = ExchangeRates(base: "USD", rates: ["JPY": 0.0065])
        #expect(rates.convert(10_000, from: "JPY", to: "USD") == 6_500)
        #expect(rates.convert(100, from: "EUR", to: "USD") == nil)
    }
}
