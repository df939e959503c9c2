import Foundation

/// HTTP-date (RFC 9110 §5.6.7): reads all three forms, writes the preferred one.
///
/// Guarantees:
/// - `parse` accepts exactly IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850
///   form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), with the
///   case-sensitive names and single spaces of the grammar; only surrounding spaces, tabs, CR and
///   LF are ignored. The day must exist in its month (leap years included), hour 0–23, minute
///   0–59, second 0–60 (a leap second reads as the first second of the next minute). The day name
///   must be a valid one but is not checked against the date. Anything else yields `nil`.
/// - An RFC 850 two-digit year is placed in the century of `now`, unless that would put the
///   timestamp more than 50 years after `now`, in which case it is taken from the century before.
/// - No `DateFormatter`, locale or time zone is involved; parsing never traps, whatever the input.
/// - `format` always yields IMF-fixdate in GMT with a four-digit year (dates outside years
///   0000–9999 are clamped to that range), truncated to the whole second, so
///   `parse(format(d))` is `d` rounded down to a second.
public enum HTTPDate {
    public static func parse(_ value: String, now: Date = Date()) -> Date? {
        var bytes = ArraySlice(value.utf8)
        while let byte = bytes.first, isSurroundingWhitespace(byte) { bytes.removeFirst() }
        while let byte = bytes.last, isSurroundingWhitespace(byte) { bytes.removeLast() }
        let text = Array(bytes)
        let fields: Fields?
        if text.count == 29, text.count > 3, text[3] == comma {
            fields = parseIMFFixdate(text)
        } else if text.count == 24 {
            fields = parseAsctime(text)
        } else {
            fields = parseRFC850(text, now: now)
        }
        guard let fields,
              fields.day >= 1, fields.day <= daysInMonth(fields.month, year: fields.year)
        else { return nil }
        let days = daysFromCivil(year: Int64(fields.year), month: Int64(fields.month), day: Int64(fields.day))
        let seconds = days * 86_400 + Int64(fields.hour * 3600 + fields.minute * 60 + fields.second)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    public static func format(_ date: Date) -> String {
        let seconds = clampedWholeSeconds(date.timeIntervalSince1970, to: representableSeconds)
        let days = floorDivide(seconds, 86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilFromDays(days)
        let weekday = Int(floorModulo(days + 4, 7))  // 1970-01-01 was a Thursday; 0 = Sunday
        return "\(weekdayNames[weekday]), \(twoDigits(Int(day))) \(monthNames[Int(month) - 1]) "
            + "\(fourDigits(Int(year))) \(twoDigits(Int(secondOfDay / 3600))):"
            + "\(twoDigits(Int(secondOfDay % 3600 / 60))):\(twoDigits(Int(secondOfDay % 60))) GMT"
    }

    // MARK: - The three forms

    private struct Fields {
        var year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func parseIMFFixdate(_ t: [UInt8]) -> Fields? {
        guard isShortDayName(t[0..<3]), t[3] == comma, t[4] == space,
              let day = digits(t, 5, 2), t[7] == space,
              let month = month(t[8..<11]), t[11] == space,
              let year = digits(t, 12, 4), t[16] == space,
              let time = timeOfDay(t, 17), t[25] == space,
              t[26..<29].elementsEqual("GMT".utf8)
        else { return nil }
        return Fields(year: year, month: month, day: day, hour: time.hour, minute: time.minute, second: time.second)
    }

    /// `Sun Nov  6 08:49:37 1994` (the day is `SP DIGIT` or `2DIGIT`).
    private static func parseAsctime(_ t: [UInt8]) -> Fields? {
        guard isShortDayName(t[0..<3]), t[3] == space,
              let month = month(t[4..<7]), t[7] == space,
              let day = t[8] == space ? digits(t, 9, 1) : digits(t, 8, 2), t[10] == space,
              let time = timeOfDay(t, 11), t[19] == space,
              let year = digits(t, 20, 4)
        else { return nil }
        return Fields(year: year, month: month, day: day, hour: time.hour, minute: time.minute, second: time.second)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    private static func parseRFC850(_ t: [UInt8], now: Date) -> Fields? {
        guard let c = t.firstIndex(of: comma), t.count == c + 24,
              longDayNames.contains(where: { t[0..<c].elementsEqual($0.utf8) }),
              t[c + 1] == space,
              let day = digits(t, c + 2, 2), t[c + 4] == hyphen,
              let month = month(t[(c + 5)..<(c + 8)]), t[c + 8] == hyphen,
              let twoDigitYear = digits(t, c + 9, 2), t[c + 11] == space,
              let time = timeOfDay(t, c + 12), t[c + 20] == space,
              t[(c + 21)..<(c + 24)].elementsEqual("GMT".utf8)
        else { return nil }
        var fields = Fields(year: 0, month: month, day: day, hour: time.hour, minute: time.minute, second: time.second)
        fields.year = resolveTwoDigitYear(twoDigitYear, of: fields, now: now)
        return fields
    }

    /// RFC 9110 §5.6.7: a two-digit year that would be more than 50 years in the future means the
    /// most recent past year with those last two digits.
    private static func resolveTwoDigitYear(_ twoDigits: Int, of fields: Fields, now: Date) -> Int {
        let nowSeconds = clampedWholeSeconds(now.timeIntervalSince1970, to: representableSeconds)
        let nowDays = floorDivide(nowSeconds, 86_400)
        let nowSecondOfDay = nowSeconds - nowDays * 86_400
        let (y, m, d) = civilFromDays(nowDays)
        let nowYear = Int(y)
        let candidate = nowYear - nowYear % 100 + twoDigits
        let candidateMoment = (candidate, fields.month, fields.day, fields.hour, fields.minute, fields.second)
        let limit = (nowYear + 50, Int(m), Int(d), Int(nowSecondOfDay / 3600),
                     Int(nowSecondOfDay % 3600 / 60), Int(nowSecondOfDay % 60))
        return candidateMoment > limit ? candidate - 100 : candidate
    }

    // MARK: - Fields

    private static let space = UInt8(ascii: " ")
    private static let comma = UInt8(ascii: ",")
    private static let hyphen = UInt8(ascii: "-")
    private static let colon = UInt8(ascii: ":")

    private static let weekdayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func isSurroundingWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    private static func isShortDayName(_ bytes: ArraySlice<UInt8>) -> Bool {
        weekdayNames.contains { bytes.elementsEqual($0.utf8) }
    }

    /// 1–12, or nil.
    private static func month(_ bytes: ArraySlice<UInt8>) -> Int? {
        monthNames.firstIndex { bytes.elementsEqual($0.utf8) }.map { $0 + 1 }
    }

    /// Exactly `count` ASCII digits starting at `start`.
    private static func digits(_ t: [UInt8], _ start: Int, _ count: Int) -> Int? {
        guard start >= 0, start + count <= t.count else { return nil }
        var value = 0
        for byte in t[start..<(start + count)] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// `HH:MM:SS` at `start`, each field in range (second 60 allowed for a leap second).
    private static func timeOfDay(_ t: [UInt8], _ start: Int) -> (hour: Int, minute: Int, second: Int)? {
        guard let hour = digits(t, start, 2), t[start + 2] == colon,
              let minute = digits(t, start + 3, 2), t[start + 5] == colon,
              let second = digits(t, start + 6, 2),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        return (hour, minute, second)
    }

    private static func twoDigits(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    private static func fourDigits(_ n: Int) -> String {
        let text = "\(n)"
        return String(repeating: "0", count: max(0, 4 - text.count)) + text
    }

    // MARK: - Proleptic Gregorian arithmetic (timegm without the C library)

    /// Seconds from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z: what a four-digit year can show.
    private static let representableSeconds: ClosedRange<Int64> = -62_167_219_200...253_402_300_799

    private static func clampedWholeSeconds(_ interval: TimeInterval, to range: ClosedRange<Int64>) -> Int64 {
        guard !interval.isNaN else { return 0 }
        if interval <= TimeInterval(range.lowerBound) { return range.lowerBound }
        if interval >= TimeInterval(range.upperBound) { return range.upperBound }
        return Int64(interval.rounded(.down))
    }

    private static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    private static func daysInMonth(_ month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    private static func floorModulo(_ a: Int64, _ b: Int64) -> Int64 { a - floorDivide(a, b) * b }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
    private static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
