import Foundation

/// The `Retry-After` response header (RFC 9110 §10.2.3): how long the server asks us to wait.
///
/// Guarantees: `delay(from:now:)` accepts `delay-seconds` (one or more ASCII digits, nothing else:
/// no sign, fraction, exponent or inner space) or any of the three HTTP-date forms (see
/// `HTTPDate`), ignoring surrounding spaces, tabs, CR and LF. A result is always finite and within
/// `0...maximumDelay`: larger numbers and far-future dates saturate instead of overflowing, and a
/// date that is already past gives 0. Anything else gives `nil`. It never traps.
public enum RetryAfter {
    /// The largest delay ever returned: `UInt32.max` seconds (about 136 years), small enough that
    /// converting it to nanoseconds in an `Int64` or `UInt64` cannot overflow.
    public static let maximumDelay: TimeInterval = TimeInterval(UInt32.max)

    public static func delay(from value: String, now: Date) -> TimeInterval? {
        var bytes = Substring(value).utf8
        while let byte = bytes.first, isSurroundingWhitespace(byte) { bytes.removeFirst() }
        while let byte = bytes.last, isSurroundingWhitespace(byte) { bytes.removeLast() }
        guard !bytes.isEmpty else { return nil }

        if bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            let limit = UInt64(UInt32.max)
            var seconds: UInt64 = 0
            for byte in bytes {
                seconds = seconds * 10 + UInt64(byte - 0x30)
                if seconds >= limit { return maximumDelay }
            }
            return TimeInterval(seconds)
        }

        guard let date = HTTPDate.parse(value, now: now) else { return nil }
        let remaining = date.timeIntervalSince(now)
        guard remaining > 0 else { return 0 }  // also maps NaN to 0
        return min(remaining, maximumDelay)
    }

    /// `value` as the wait it asks for, by the server's clock: an HTTP-date is turned into
    /// `delay-seconds` counted from the response's `Date` (`sentAt`), so a machine whose clock is
    /// off waits what the server meant (ten minutes slow, it paused every worker of a shared
    /// queue ten minutes; fast, not at all). Without a `Date` that can be read, or for
    /// `delay-seconds`, `value` as it is (then read against this machine's clock).
    public static func byServerClock(_ value: String, sentAt date: String?, now: Date = Date()) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let date, !trimmed.isEmpty, !trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let sent = HTTPDate.parse(date, now: now), let delay = delay(from: value, now: sent) else { return value }
        return String(Int(delay.rounded(.up)))
    }

    private static func isSurroundingWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }
}
