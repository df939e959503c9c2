import Foundation

/// Exponential backoff with full jitter: after the n-th failed attempt, wait a time drawn uniformly
/// from `0...min(cap, base * 2^(n-1))`, so retries from many workers spread out instead of
/// arriving together.
///
/// Guarantees: `delay` is always finite and within `0...cap`; `ceiling` never decreases as the
/// attempt number grows and reaches `cap` without overflow, however large the attempt number.
/// Attempt numbers below 1 count as 1. `base` and `cap` must be finite and not negative.
public struct Backoff: Sendable, Equatable {
    /// Upper bound of the delay after the first attempt, in seconds.
    public let base: TimeInterval
    /// Upper bound of every delay, in seconds.
    public let cap: TimeInterval

    public init(base: TimeInterval = 1, cap: TimeInterval = 300) {
        precondition(base.isFinite && base >= 0, "Backoff base must be finite and >= 0, got \(base)")
        precondition(cap.isFinite && cap >= 0, "Backoff cap must be finite and >= 0, got \(cap)")
        self.base = base
        self.cap = cap
    }

    /// The largest delay after attempt `attempt` (1-based): `min(cap, base * 2^(attempt-1))`.
    public func ceiling(afterAttempt attempt: Int) -> TimeInterval {
        guard base > 0, cap > 0 else { return 0 }
        // 2^2048 is infinite as a Double, so base * 2^2048 is infinite for any base > 0 and
        // min(cap, infinity) is cap; clamping the exponent keeps huge attempt numbers harmless.
        let exponent = min(max(attempt, 1) - 1, 2048)
        let uncapped = base * pow(2, Double(exponent))
        return min(cap, uncapped)
    }

    /// A delay drawn uniformly from `0...ceiling(afterAttempt: attempt)` with `random`.
    public func delay(afterAttempt attempt: Int, random: inout some RandomNumberGenerator) -> TimeInterval {
        let upper = ceiling(afterAttempt: attempt)
        guard upper > 0 else { return 0 }
        return TimeInterval.random(in: 0...upper, using: &random)
    }

    /// A delay drawn uniformly from `0...ceiling(afterAttempt: attempt)` with the system generator.
    public func delay(afterAttempt attempt: Int) -> TimeInterval {
        var generator = SystemRandomNumberGenerator()
        return delay(afterAttempt: attempt, random: &generator)
    }
}
