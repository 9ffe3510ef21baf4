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

    @Test func minorUnitsFollowISO4217() {
        #expect(CurrencyUnits.minor(milli: 980_000, currency: "JPY") == 980)
        #expect(CurrencyUnits.minor(milli: 9_990, currency: "USD") == 999)
        #expect(CurrencyUnits.minor(milli: 1_234, currency: "KWD") == 1_234)
        let rates = ExchangeRates(base: "USD", rates: ["JPY": 0.0065])
        #expect(rates.convert(10_000, from: "JPY", to: "USD") == 6_500)
        #expect(rates.convert(100, from: "EUR", to: "USD") == nil)
    }
}
