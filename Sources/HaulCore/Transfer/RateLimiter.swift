import Foundation

/// A byte-rate limit over time: a token bucket that earns `bytesPerSecond` tokens a second, holds
/// at most a quarter of a second's worth, and lets a piece through while it holds any (its
/// balance may then go below zero, and the debt is paid back before the next piece).
///
/// Guarantees: pure (the caller passes the time); over any stretch of T seconds, at most
/// `bytesPerSecond × (T + 0.25)` bytes plus one piece pass; a piece refused now passes at
/// `readyAt`, when the balance is positive again.
public struct RateLimiter: Sendable, Equatable {
    public let bytesPerSecond: Int64
    private var balance: Double
    private var updated: UInt64?

    private var capacity: Double { Double(bytesPerSecond) / 4 }

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        balance = 0
    }

    private mutating func refill(now: UInt64) {
        if let updated, now > updated {
            balance = min(capacity, balance + Double(now - updated) / 1e9 * Double(bytesPerSecond))
        }
        updated = max(updated ?? now, now)
    }

    /// Whether a piece may pass at `now` (monotonic nanoseconds). It does not take the bytes.
    public mutating func mayPass(now: UInt64) -> Bool {
        refill(now: now)
        return balance > 0
    }

    /// Counts `bytes` that passed at `now`.
    public mutating func take(_ bytes: Int, now: UInt64) {
        refill(now: now)
        balance -= Double(bytes)
    }

    /// When the balance is positive again (now, if it is).
    public mutating func readyAt(now: UInt64) -> UInt64 {
        refill(now: now)
        guard balance <= 0 else { return now }
        return now + UInt64((-balance + 1) / Double(bytesPerSecond) * 1e9)
    }

    /// Parses a rate as curl's --limit-rate takes it: a number of bytes a second with an
    /// optional `k`, `M` or `G` suffix (powers of 1024, either case), e.g. `512k`, `1.5M`.
    public static func parseRate(_ text: String) -> Int64? {
        var digits = Substring(text.trimmingCharacters(in: .whitespaces))
        var unit: Double = 1
        switch digits.last {
        case "k", "K": unit = 1024
        case "m", "M": unit = 1024 * 1024
        case "g", "G": unit = 1024 * 1024 * 1024
        default: break
        }
        if unit > 1 { digits = digits.dropLast() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let number = Double(digits), number.isFinite, number > 0 else { return nil }
        let rate = number * unit
        guard rate >= 1, rate < 1e15 else { return nil }
        return Int64(rate)
    }
}
