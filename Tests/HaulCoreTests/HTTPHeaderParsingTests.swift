import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest
import HaulTestSupport
@testable import HaulCore

/// Retry-After, HTTP-date, Content-Range and If-Range validator parsing (RFC 9110).
final class HTTPHeaderParsingTests: XCTestCase {
    /// 1994-11-06 08:49:37 UTC, the RFC's example date.
    private let exampleInstant = Date(timeIntervalSince1970: 784_111_777)
    /// Two minutes before `exampleInstant`.
    private var twoMinutesEarlier: Date { exampleInstant.addingTimeInterval(-120) }

    // MARK: - Retry-After: delay-seconds

    func testDelaySecondsIsReadAsWholeSeconds() {
        XCTAssertEqual(RetryAfter.delay(from: "120", now: exampleInstant), 120)
        XCTAssertEqual(RetryAfter.delay(from: "0", now: exampleInstant), 0)
        XCTAssertEqual(RetryAfter.delay(from: "007", now: exampleInstant), 7)
        XCTAssertEqual(RetryAfter.delay(from: " \t120 \r\n", now: exampleInstant), 120)
    }

    /// A date is read against the response's Date (the server's clock); delay-seconds, a value
    /// that is neither, or no readable Date leave the value as it is.
    func testADateIsTurnedIntoSecondsByTheServersClock() {
        let sent = "Sun, 06 Nov 1994 08:49:37 GMT"
        XCTAssertEqual(RetryAfter.byServerClock("Sun, 06 Nov 1994 08:51:37 GMT", sentAt: sent, now: Date()), "120")
        XCTAssertEqual(RetryAfter.byServerClock("Sunday, 06-Nov-94 08:49:38 GMT", sentAt: sent, now: exampleInstant), "1")
        XCTAssertEqual(RetryAfter.byServerClock("Sun, 06 Nov 1994 08:40:00 GMT", sentAt: sent, now: Date()), "0", "before the Date: no wait")
        XCTAssertEqual(RetryAfter.byServerClock("Sun, 06 Nov 1994 08:51:37 GMT", sentAt: nil, now: Date()), "Sun, 06 Nov 1994 08:51:37 GMT")
        XCTAssertEqual(RetryAfter.byServerClock("Sun, 06 Nov 1994 08:51:37 GMT", sentAt: "yesterday", now: Date()), "Sun, 06 Nov 1994 08:51:37 GMT")
        XCTAssertEqual(RetryAfter.byServerClock("120", sentAt: sent, now: Date()), "120")
        XCTAssertEqual(RetryAfter.byServerClock("soon", sentAt: sent, now: Date()), "soon")
    }

    func testDelaySecondsRejectsAnythingButDigits() {
        for value in ["-1", "1e3", "+5", "1.5", "", "   ", "1 2", "12a", "0x10", "١٢", "120s", "∞", "NaN", "1_000"] {
            XCTAssertNil(RetryAfter.delay(from: value, now: exampleInstant), "accepted \(value.debugDescription)")
        }
    }

    func testHugeDelaySecondsSaturates() {
        XCTAssertEqual(RetryAfter.delay(from: "99999999999999999999999", now: exampleInstant), RetryAfter.maximumDelay)
        XCTAssertEqual(RetryAfter.delay(from: String(repeating: "9", count: 10_000), now: exampleInstant), RetryAfter.maximumDelay)
        XCTAssertEqual(RetryAfter.delay(from: "4294967295", now: exampleInstant), RetryAfter.maximumDelay)
        XCTAssertEqual(RetryAfter.delay(from: "4294967294", now: exampleInstant), 4_294_967_294)
        XCTAssertEqual(RetryAfter.delay(from: "00000000000000000000000000000042", now: exampleInstant), 42)
        XCTAssertTrue(RetryAfter.maximumDelay.isFinite)
        XCTAssertNotNil(Int64(exactly: RetryAfter.maximumDelay * 1e9), "must convert to nanoseconds without overflow")
    }

    // MARK: - Retry-After: HTTP-date

    func testDelayFromEachHTTPDateForm() {
        XCTAssertEqual(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: twoMinutesEarlier), 120)
        XCTAssertEqual(RetryAfter.delay(from: "Sunday, 06-Nov-94 08:49:37 GMT", now: twoMinutesEarlier), 120)
        XCTAssertEqual(RetryAfter.delay(from: "Sun Nov  6 08:49:37 1994", now: twoMinutesEarlier), 120)
        XCTAssertEqual(RetryAfter.delay(from: "  Sun, 06 Nov 1994 08:49:37 GMT\t", now: twoMinutesEarlier), 120)
    }

    func testPastOrPresentDateMeansNoWait() {
        XCTAssertEqual(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: exampleInstant), 0)
        XCTAssertEqual(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: exampleInstant.addingTimeInterval(3600)), 0)
        XCTAssertEqual(RetryAfter.delay(from: "Thu, 01 Jan 1970 00:00:00 GMT", now: Date()), 0)
    }

    func testFarFutureDateSaturates() {
        XCTAssertEqual(RetryAfter.delay(from: "Fri, 31 Dec 9999 23:59:59 GMT", now: exampleInstant), RetryAfter.maximumDelay)
    }

    func testFractionalNowGivesExactRemainder() {
        let now = exampleInstant.addingTimeInterval(-0.25)
        XCTAssertEqual(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: now)!, 0.25, accuracy: 1e-6)
    }

    func testGarbageRetryAfterIsNil() {
        let garbage = [
            "soon", "tomorrow", "GMT", "Sun,", "120 seconds",
            "Sun, 06 Nov 1994 08:49:37 UTC",      // zone must be GMT
            "Sun, 06 Nov 1994 08:49:37 gmt",      // case-sensitive
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun,  06 Nov 1994 08:49:37 GMT",     // extra space
            "Sun, 6 Nov 1994 08:49:37 GMT",       // day is 2DIGIT
            "Sun, 06 Nov 94 08:49:37 GMT",        // year is 4DIGIT
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",      // no such day name
            "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Sunday, 06-Nov-94 08:49:37",
            "Sun, 06-Nov-94 08:49:37 GMT",        // RFC 850 needs the long day name
            "Sunday, 06 Nov 1994 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",            // asctime pads the day with a space
            "Sun Nov  6 08:49:37 94",
            "Sun Nov  6 08:49:37 1994 GMT",
        ]
        for value in garbage {
            XCTAssertNil(RetryAfter.delay(from: value, now: exampleInstant), "accepted \(value.debugDescription)")
        }
    }

    // MARK: - HTTP-date ranges

    func testOutOfRangeFieldsAreRejected() {
        let invalid = [
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 32 Jan 1994 08:49:37 GMT",
            "Sun, 29 Feb 1995 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",      // century, not a leap year
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:61 GMT",
            "Sun Nov  0 08:49:37 1994",
            "Sun Nov 31 08:49:37 1994",
            "Sunday, 31-Apr-94 08:49:37 GMT",
        ]
        for value in invalid {
            XCTAssertNil(HTTPDate.parse(value, now: exampleInstant), "accepted \(value.debugDescription)")
        }
    }

    func testLeapDaysAndLeapSecond() {
        XCTAssertEqual(HTTPDate.parse("Tue, 29 Feb 2000 12:00:00 GMT"), Date(timeIntervalSince1970: 951_825_600))
        XCTAssertEqual(HTTPDate.parse("Thu, 29 Feb 1996 00:00:00 GMT"), Date(timeIntervalSince1970: 825_552_000))
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:60 GMT"), Date(timeIntervalSince1970: 784_111_800))
    }

    func testAsctimeAcceptsTwoDigitDay() {
        XCTAssertEqual(HTTPDate.parse("Sun Nov 06 08:49:37 1994"), exampleInstant)
        XCTAssertEqual(HTTPDate.parse("Wed Nov 16 08:49:37 1994"), exampleInstant.addingTimeInterval(10 * 86_400))
    }

    func testRFC850TwoDigitYearFollowsTheFiftyYearRule() {
        let midsummer2025 = Date(timeIntervalSince1970: 1_748_736_000)  // 2025-06-01 00:00:00 UTC
        XCTAssertEqual(HTTPDate.parse("Tuesday, 01-Jan-75 00:00:00 GMT", now: midsummer2025),
                       Date(timeIntervalSince1970: 3_313_526_400), "2075 is under 50 years ahead")
        XCTAssertEqual(HTTPDate.parse("Thursday, 01-Jan-76 00:00:00 GMT", now: midsummer2025),
                       Date(timeIntervalSince1970: 189_302_400), "2076 is too far ahead, so 1976")
        // Exactly at the boundary: 2075-06-01 00:00:00 is not more than 50 years ahead; a second later is.
        XCTAssertEqual(HTTPDate.parse("Saturday, 01-Jun-75 00:00:00 GMT", now: midsummer2025).map(year), 2075)
        XCTAssertEqual(HTTPDate.parse("Saturday, 01-Jun-75 00:00:01 GMT", now: midsummer2025).map(year), 1975)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: midsummer2025), exampleInstant)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: exampleInstant), exampleInstant)
        XCTAssertEqual(HTTPDate.parse("Wednesday, 01-Jan-25 00:00:00 GMT", now: midsummer2025).map(year), 2025)
        // Leap day validity is judged in the resolved year: 2000 was a leap year.
        XCTAssertEqual(HTTPDate.parse("Tuesday, 29-Feb-00 12:00:00 GMT", now: midsummer2025),
                       Date(timeIntervalSince1970: 951_825_600))
    }

    func testFormatWritesIMFFixdate() {
        XCTAssertEqual(HTTPDate.format(exampleInstant), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(exampleInstant.addingTimeInterval(0.9)), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: -1)), "Wed, 31 Dec 1969 23:59:59 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: -62_135_596_800)), "Mon, 01 Jan 0001 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 1e300)), "Fri, 31 Dec 9999 23:59:59 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: .nan)), "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    func testFormatMatchesGmtimeAndRoundTrips() {
        var random = SeededGenerator(seed: 0x5EED_DA7E)
        let names = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        for _ in 0..<5_000 {
            let seconds = Int64.random(in: -62_135_596_800...253_402_300_799, using: &random)
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let text = HTTPDate.format(date)
            var clock = time_t(seconds)
            var parts = tm()
            XCTAssertNotNil(gmtime_r(&clock, &parts))
            let yearText = String(Int(parts.tm_year) + 1900)
            let expected = "\(names[Int(parts.tm_wday)]), \(pad(Int(parts.tm_mday))) \(months[Int(parts.tm_mon)]) "
                + String(repeating: "0", count: 4 - yearText.count) + yearText
                + " \(pad(Int(parts.tm_hour))):\(pad(Int(parts.tm_min))):\(pad(Int(parts.tm_sec))) GMT"
            XCTAssertEqual(text, expected)
            XCTAssertEqual(HTTPDate.parse(text), date, text)
        }
    }

    // MARK: - Content-Range

    func testContentRangeValidForms() {
        XCTAssertEqual(ContentRange.parse("bytes 0-499/1234"), ContentRange(first: 0, last: 499, complete: 1234))
        XCTAssertEqual(ContentRange.parse("bytes 0-499/1234")?.length, 500)
        XCTAssertEqual(ContentRange.parse("bytes 0-499/*"), ContentRange(first: 0, last: 499, complete: nil))
        XCTAssertEqual(ContentRange.parse("bytes */1234"), ContentRange(first: nil, last: nil, complete: 1234))
        XCTAssertEqual(ContentRange.parse("bytes */1234")?.isUnsatisfied, true)
        XCTAssertEqual(ContentRange.parse("bytes */1234")?.length, nil)
        XCTAssertEqual(ContentRange.parse("bytes */0"), ContentRange(first: nil, last: nil, complete: 0))
        XCTAssertEqual(ContentRange.parse("bytes 1233-1233/1234"), ContentRange(first: 1233, last: 1233, complete: 1234))
        XCTAssertEqual(ContentRange.parse("BYTES 0-0/1"), ContentRange(first: 0, last: 0, complete: 1))
        XCTAssertEqual(ContentRange.parse(" \tbytes 5-9/10 \r\n"), ContentRange(first: 5, last: 9, complete: 10))
        XCTAssertEqual(ContentRange.parse("bytes 0007-0009/0010"), ContentRange(first: 7, last: 9, complete: 10))
        XCTAssertEqual(ContentRange.parse("bytes 0-9223372036854775806/9223372036854775807"),
                       ContentRange(first: 0, last: 9_223_372_036_854_775_806, complete: Int64.max))
        XCTAssertEqual(ContentRange.parse("bytes 0-9223372036854775806/9223372036854775807")?.length, Int64.max)
    }

    func testContentRangeInvalidForms() {
        let invalid = [
            "", "bytes", "bytes ", "bytes /", "0-499/1234", "bytes0-499/1234", "bytes  0-499/1234",
            "bytes=0-499/1234", "items 0-499/1234", "bytes\t0-499/1234",
            "bytes 500-499/1234",                      // last < first
            "bytes 0-1234/1234", "bytes 0-2000/1234",  // last >= complete
            "bytes 0-0/0",
            "bytes 0-499", "bytes -499/1234", "bytes 0-/1234", "bytes -/1234", "bytes 0499/1234",
            "bytes */*", "bytes */", "bytes *-1/5", "bytes 0-499/", "bytes 0-499/**",
            "bytes a-499/1234", "bytes 0-4x9/1234", "bytes 0-499/12x", "bytes 0-499/-1", "bytes -1-499/1234",
            "bytes +0-499/1234", "bytes 0-499/+1234", "bytes 0 - 499/1234", "bytes 0-499 /1234",
            "bytes 0-499/1234/5", "bytes 0-499,500-600/1234", "bytes 0-499/1234 x",
            "bytes 0-99999999999999999999/*",          // overflow
            "bytes 0-1/99999999999999999999",
            "bytes 0-9223372036854775807/*",           // last + 1 would overflow
            "bytes 0-9223372036854775808/*",
            "bytes ０-1/2",
        ]
        for value in invalid {
            XCTAssertNil(ContentRange.parse(value), "accepted \(value.debugDescription)")
        }
    }

    func testContentRangeInitializerEnforcesInvariants() {
        XCTAssertNil(ContentRange(first: 0, last: nil, complete: 10))
        XCTAssertNil(ContentRange(first: nil, last: 5, complete: 10))
        XCTAssertNil(ContentRange(first: nil, last: nil, complete: nil))
        XCTAssertNil(ContentRange(first: -1, last: 5, complete: 10))
        XCTAssertNil(ContentRange(first: 0, last: 5, complete: -1))
        XCTAssertNil(ContentRange(first: nil, last: nil, complete: -1))
    }

    func testContentRangeHeaderValueRoundTrips() {
        for text in ["bytes 0-499/1234", "bytes 0-499/*", "bytes */1234", "bytes 0-0/1"] {
            XCTAssertEqual(ContentRange.parse(text)?.headerValue, text)
        }
    }

    // MARK: - Validator (If-Range)

    private let date = "Sun, 06 Nov 1994 08:49:37 GMT"

    func testAPartialAnswerContinuesOnlyTheVersionItNames() {
        let tag = Validator.etag("\"xyzzy\"")
        XCTAssertTrue(tag.isContinued(etag: " \"xyzzy\" ", lastModified: nil))
        XCTAssertFalse(tag.isContinued(etag: "\"other\"", lastModified: nil))
        XCTAssertFalse(tag.isContinued(etag: "W/\"xyzzy\"", lastModified: nil))
        XCTAssertFalse(tag.isContinued(etag: nil, lastModified: "Sun, 06 Nov 1994 08:00:00 GMT"))
        let dated = Validator.lastModified("Sun, 06 Nov 1994 08:00:00 GMT")
        XCTAssertTrue(dated.isContinued(etag: nil, lastModified: "Sunday, 06-Nov-94 08:00:00 GMT"), "the same instant in another form")
        XCTAssertTrue(dated.isContinued(etag: "\"new\"", lastModified: "Sun, 06 Nov 1994 08:00:00 GMT"))
        XCTAssertFalse(dated.isContinued(etag: nil, lastModified: "Sun, 06 Nov 1994 08:00:01 GMT"))
        XCTAssertFalse(dated.isContinued(etag: nil, lastModified: nil))
        XCTAssertFalse(dated.isContinued(etag: nil, lastModified: "yesterday"))
    }

    func testStrongETagWins() {
        let validator = Validator.strong(etag: "\"xyzzy\"", lastModified: "Sun, 06 Nov 1994 08:00:00 GMT", date: date)
        XCTAssertEqual(validator, .etag("\"xyzzy\""))
        XCTAssertEqual(validator?.headerValue, "\"xyzzy\"")
        XCTAssertEqual(Validator.strong(etag: " \"xyzzy\" ", lastModified: nil, date: nil), .etag("\"xyzzy\""))
        XCTAssertEqual(Validator.strong(etag: "\"\"", lastModified: nil, date: nil), .etag("\"\""))
        XCTAssertEqual(Validator.strong(etag: "\"a!#~é\"", lastModified: nil, date: nil), .etag("\"a!#~é\""))
    }

    func testWeakETagIsNeverUsedNorReplacedByTheDate() {
        XCTAssertNil(Validator.strong(etag: "W/\"x\"", lastModified: nil, date: nil))
        XCTAssertNil(Validator.strong(etag: "W/\"x\"", lastModified: "Sun, 06 Nov 1994 08:00:00 GMT", date: date))
        XCTAssertNil(Validator.strong(etag: "w/\"x\"", lastModified: "Sun, 06 Nov 1994 08:00:00 GMT", date: date))
    }

    func testMalformedETagFallsBackToLastModified() {
        let lastModified = "Sun, 06 Nov 1994 08:00:00 GMT"
        for etag in ["xyzzy", "\"unterminated", "\"a b\"", "\"a\"b\"", "\"", "", "W/x", "\"x\", \"y\""] {
            XCTAssertEqual(Validator.strong(etag: etag, lastModified: lastModified, date: date), .lastModified(lastModified),
                           "etag \(etag.debugDescription)")
            XCTAssertNil(Validator.strong(etag: etag, lastModified: nil, date: date), "etag \(etag.debugDescription)")
        }
    }

    func testLastModifiedStrengthNeedsDateAtLeastOneSecondLater() {
        XCTAssertEqual(Validator.strong(etag: nil, lastModified: "Sun, 06 Nov 1994 08:49:36 GMT", date: date),
                       .lastModified("Sun, 06 Nov 1994 08:49:36 GMT"), "one second before: strong")
        XCTAssertEqual(Validator.strong(etag: nil, lastModified: "Sun, 06 Nov 1994 08:49:36 GMT", date: date)?.headerValue,
                       "Sun, 06 Nov 1994 08:49:36 GMT")
        XCTAssertNil(Validator.strong(etag: nil, lastModified: date, date: date), "same second: weak")
        XCTAssertNil(Validator.strong(etag: nil, lastModified: "Sun, 06 Nov 1994 08:49:38 GMT", date: date), "after Date: weak")
        XCTAssertNil(Validator.strong(etag: nil, lastModified: "Sun, 06 Nov 1994 08:00:00 GMT", date: nil), "no Date: weak")
        XCTAssertNil(Validator.strong(etag: nil, lastModified: "Sun, 06 Nov 1994 08:00:00 GMT", date: "garbage"))
        XCTAssertNil(Validator.strong(etag: nil, lastModified: "yesterday", date: date))
        XCTAssertNil(Validator.strong(etag: nil, lastModified: nil, date: date))
        XCTAssertNil(Validator.strong(etag: nil, lastModified: nil, date: nil))
    }

    func testLastModifiedIsRewrittenAsIMFFixdate() {
        XCTAssertEqual(Validator.strong(etag: nil, lastModified: "Sun Nov  6 08:00:00 1994", date: date),
                       .lastModified("Sun, 06 Nov 1994 08:00:00 GMT"))
    }

    // MARK: - Fuzz

    private static let fragments = [
        "bytes", "bytes ", "BYTES ", "*", "/", "-", " ", "  ", "\t", "\r\n", ",", ":", "\"", "W/",
        "0", "1", "9", "00", "120", "499", "1234", "9223372036854775807", "9223372036854775808",
        "99999999999999999999999", "-1", "+5", "1e3", "1.5",
        "Sun", "Sunday", "Nov", "Feb", "GMT", "1994", "94", "06", " 6", "29", "31", "08:49:37", "23:59:60", "24:00:00",
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "bytes 0-499/1234", "bytes */1234", "bytes 0-499/*", "é", "\u{0}", "\u{FEFF}", "🙂",
    ]

    private func randomHeader(_ random: inout SeededGenerator) -> String {
        switch random.next() % 4 {
        case 0:  // a valid header with one byte changed, dropped or duplicated
            let seeds = ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                         "bytes 0-499/1234", "bytes */1234", "bytes 0-499/*", "120"]
            var bytes = Array(seeds[Int(random.next() % UInt64(seeds.count))].utf8)
            let at = Int(random.next() % UInt64(bytes.count))
            switch random.next() % 3 {
            case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
            case 1: bytes.remove(at: at)
            default: bytes.insert(bytes[at], at: at)
            }
            return String(decoding: bytes, as: UTF8.self)
        case 1:  // random bytes
            let count = Int(random.next() % 40)
            return String(decoding: (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }, as: UTF8.self)
        default:  // fragments of valid headers, glued together
            let count = 1 + Int(random.next() % 6)
            return (0..<count).map { _ in Self.fragments[Int(random.next() % UInt64(Self.fragments.count))] }.joined()
        }
    }

    func testFuzzedHeadersNeverCrashAndStayInBounds() {
        var random = SeededGenerator(seed: 20_241_130)
        let now = exampleInstant.addingTimeInterval(-3600)
        var parsedDelays = 0, parsedRanges = 0
        for _ in 0..<20_000 {
            let text = randomHeader(&random)
            if let delay = RetryAfter.delay(from: text, now: now) {
                parsedDelays += 1
                XCTAssertTrue(delay.isFinite && delay >= 0 && delay <= RetryAfter.maximumDelay, "\(text.debugDescription) → \(delay)")
            }
            if let date = HTTPDate.parse(text, now: now) {
                XCTAssertEqual(HTTPDate.parse(HTTPDate.format(date)), date, text.debugDescription)
            }
            if let range = ContentRange.parse(text) {
                parsedRanges += 1
                if let first = range.first, let last = range.last {
                    XCTAssertTrue(0 <= first && first <= last, text.debugDescription)
                    if let complete = range.complete { XCTAssertLessThan(last, complete, text.debugDescription) }
                } else {
                    XCTAssertNil(range.first)
                    XCTAssertNil(range.last)
                    XCTAssertNotNil(range.complete)
                }
                XCTAssertEqual(ContentRange.parse(range.headerValue), range)
            }
            _ = Validator.strong(etag: text, lastModified: text, date: text)
        }
        // The mix must actually exercise the accepting paths, not just rejection.
        XCTAssertGreaterThan(parsedDelays, 500)
        XCTAssertGreaterThan(parsedRanges, 500)
    }

    // MARK: - Helpers

    private func year(_ date: Date) -> Int {
        var clock = time_t(date.timeIntervalSince1970)
        var parts = tm()
        _ = gmtime_r(&clock, &parts)
        return Int(parts.tm_year) + 1900
    }

    private func pad(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}
