import Foundation

/// Decides what follows a failed attempt: try again (when, and whether the host must pause and
/// the partial file be dropped), give up, or hand the job back untouched.
///
/// Guarantees: 408, 425, 429, 500, 502, 503, 504 and transport failures are retried; other
/// statuses, refused redirects, encoded bodies and refused requests (an untrusted certificate)
/// fail at once. A Retry-After in any RFC 9110
/// form is honoured, capped at `maxRetryAfter`, and pauses the whole host; without one, the
/// delay is exponential backoff with full jitter.
public struct RetryPolicy: Sendable {
    public enum Decision: Sendable, Equatable {
        /// Try again after `delay` seconds. `pauseHost`: pause every request to the host for that
        /// long. `discardPartial`: the partial file cannot be continued; drop it and its validator.
        case retry(delay: TimeInterval, pauseHost: TimeInterval?, discardPartial: Bool)
        case fail
        /// Not the job's fault (haul is stopping): hand it back without counting the attempt.
        case release
        /// The host could not be reached: the host, not the job, is at fault (see `EngineCore`:
        /// the host pauses with backoff and is probed with one request; its jobs fail only
        /// once the host has failed as often as a job may).
        case hostDown
        /// The output folder cannot be written: not the job's fault (see `EngineCore`: the
        /// folder's jobs wait, and it is tried again at growing intervals).
        case localFault
        /// Hand the job back without counting the attempt, not to be claimed for `delay` seconds.
        case postpone(delay: TimeInterval)
        /// The partial file cannot be continued: drop it and its validator, and hand the job back
        /// at once without counting the attempt (its next starts from zero).
        case restart
    }

    /// How long a job whose temp file another process holds waits before it is tried again.
    public static let tempInUseDelay: TimeInterval = 5

    /// 202 (Accepted: the file is not ready yet) among them.
    public static let retryableStatuses: Set<Int> = [202, 408, 425, 429, 500, 502, 503, 504]
    /// Attempts a checksum mismatch gets in all.
    public static let checksumAttempts = 2

    public var backoff: Backoff
    public var maxRetryAfter: TimeInterval

    public init(backoff: Backoff = Backoff(base: 1, cap: 300), maxRetryAfter: TimeInterval = 3600) {
        self.backoff = backoff
        self.maxRetryAfter = maxRetryAfter
    }

    /// - Parameters:
    ///   - attempt: the number of the attempt that just failed (1 for the first).
    ///   - resumed: whether that attempt continued a partial file: its checksum mismatch may come
    ///     from the bytes kept, so one download from zero is always tried.
    public func decide(_ failure: DownloadAttempt.Failure, attempt: Int, resumed: Bool = false, now: Date = Date()) -> Decision {
        switch failure {
        case .http(let status, let retryAfter, _):
            guard Self.retryableStatuses.contains(status) else { return .fail }
            // A Retry-After of 0 or a date already past asks for no wait, and a cap of 0
            // (`--max-retry-after 0`) ignores it: the backoff's delay applies, so the attempts
            // are not spent within a second.
            if let retryAfter, maxRetryAfter > 0, let delay = RetryAfter.delay(from: retryAfter, now: now), delay > 0 {
                let capped = min(delay, maxRetryAfter)
                return .retry(delay: capped, pauseHost: capped, discardPartial: false)
            }
            return .retry(delay: backoff.delay(afterAttempt: attempt), pauseHost: nil, discardPartial: false)
        case .transport, .disk, .length:
            return .retry(delay: backoff.delay(afterAttempt: attempt), pauseHost: nil, discardPartial: false)
        case .mustRestart:
            // A resume that cannot continue (the file changed, or the server ignores Range)
            // spends no attempt: the next starts over, so it cannot end the same way. (A
            // request from zero answered wrongly, a 206 to it, is counted.)
            return resumed ? .restart : .retry(delay: 0, pauseHost: nil, discardPartial: true)
        case .checksum:
            // Twice the same wrong bytes: the server's file is not the one the checksum names.
            guard attempt < Self.checksumAttempts || resumed else { return .fail }
            return .retry(delay: backoff.delay(afterAttempt: attempt), pauseHost: nil, discardPartial: true)
        case .unreachable:
            return .hostDown
        case .local:
            return .localFault
        case .badRedirect, .encoding, .unsafeDestination, .refused:
            return .fail
        case .tempInUse:
            return .postpone(delay: Self.tempInUseDelay)
        case .cancelled:
            return .release
        }
    }
}
