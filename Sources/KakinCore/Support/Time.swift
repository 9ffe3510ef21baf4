/// Time as Apple counts it: milliseconds since the UNIX epoch. The core never reads a clock; callers pass
/// a `Clock` (the system clock in production, the simulator's clock in local mode, a manual one in tests).
public protocol Clock: Sendable {
    /// Now, in milliseconds since 1970-01-01T00:00:00Z.
    func nowMs() -> Int64
}

/// Formats and parses the contract's RFC 3339 UTC timestamps (`2026-11-30T15:00:00Z`).
public enum Timestamp {
    /// Total over every `Int64`: years 0000–9999 as RFC 3339 has them; beyond (dates Apple never signs, but a
    /// payload or a request may carry) ISO 8601's expanded years, `+10000-…` and `-0001-…`, never a trap.
    public static func rfc3339(_ ms: Int64) -> String {
        let dayMs: Int64 = 86_400_000
        let days = floorDiv(ms, dayMs)
        // `ms - days * dayMs` overflows near Int64.min; the remainder never does.
        var rest = ms % dayMs
        if rest < 0 { rest += dayMs }
        let (y, m, d) = CivilDate.fromDays(days)
        let hh = rest / 3_600_000
        rest -= hh * 3_600_000
        let mm = rest / 60_000
        rest -= mm * 60_000
        let ss = rest / 1000
        let frac = rest - ss * 1000
        // Written into one buffer (a string per field was most of its cost): sign, year, then 21 bytes at most.
        return String(unsafeUninitializedCapacity: rfc3339BytesMax) { out in
            var n = 0
            func put(_ byte: UInt8) {
                out[n] = byte
                n += 1
            }
            /// `value` (≥ 0) in decimal, zero-padded to `width` digits.
            func digits(_ value: UInt, _ width: Int) {
                var count = 1
                var rest = value / 10
                while rest > 0 { count += 1; rest /= 10 }
                for _ in count..<max(count, width) { put(UInt8(ascii: "0")) }
                var v = value
                for i in stride(from: n + count - 1, through: n, by: -1) {
                    out[i] = UInt8(ascii: "0") + UInt8(v % 10)
                    v /= 10
                }
                n += count
            }
            if !(0...9999).contains(y) { put(y < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+")) }
            digits(y.magnitude, 4)
            put(UInt8(ascii: "-")); digits(UInt(m), 2)
            put(UInt8(ascii: "-")); digits(UInt(d), 2)
            put(UInt8(ascii: "T")); digits(UInt(hh), 2)
            put(UInt8(ascii: ":")); digits(UInt(mm), 2)
            put(UInt8(ascii: ":")); digits(UInt(ss), 2)
            if frac != 0 { put(UInt8(ascii: ".")); digits(UInt(frac), 3) }
            put(UInt8(ascii: "Z"))
            return n
        }
    }

    /// The longest `rfc3339` text: a sign, `Int64`'s years (9 digits), `-MM-DDTHH:MM:SS.fffZ`.
    static let rfc3339BytesMax = 1 + 19 + 21

    public static func rfc3339(_ ms: Int64?) -> JSONValue { ms.map { .string(rfc3339($0)) } ?? .null }

    /// Parses `YYYY-MM-DD` as the start of that UTC day.
    public static func parseDate(_ s: String) -> Int64? {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
              (1...12).contains(m), d >= 1, d <= CivilDate.daysInMonth(year: y, month: m) else { return nil }
        return CivilDate.toDays(year: y, month: m, day: d) * 86_400_000
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
    public static func parseRFC3339(_ s: String) -> Int64? {
        guard s.count >= 20, s.hasSuffix("Z") || s.hasSuffix("z") else { return nil }
        let chars = Array(s.utf8)
        guard chars[10] == UInt8(ascii: "T") || chars[10] == UInt8(ascii: "t") else { return nil }
        guard let day = parseDate(String(s.prefix(10))) else { return nil }
        let time = s.dropFirst(11).dropLast()
        let hms = time.split(separator: ":", omittingEmptySubsequences: false)
        guard hms.count == 3, hms[0].count == 2, hms[1].count == 2, let h = Int(hms[0]), let mi = Int(hms[1]),
              h < 24, mi < 60 else { return nil }
        let secParts = hms[2].split(separator: ".", omittingEmptySubsequences: false)
        guard secParts[0].count == 2, let sec = Int(secParts[0]), sec < 61 else { return nil }
        var ms: Int64 = 0
        if secParts.count == 2 {
            let f = secParts[1]
            guard !f.isEmpty, f.count <= 9, f.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            ms = Int64(String((f + "000").prefix(3)))!
        } else if secParts.count > 2 {
            return nil
        }
        return day + Int64(h) * 3_600_000 + Int64(mi) * 60_000 + Int64(sec) * 1000 + ms
    }
}
