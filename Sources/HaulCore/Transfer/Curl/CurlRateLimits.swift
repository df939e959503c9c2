/// The rate limits of one run (`--limit-rate`, `--per-host-rate`), kept by a `CurlMultiLoop` for
/// all its transfers: haul's own accounting over time, because libcurl's per-transfer
/// `CURLOPT_MAX_RECV_SPEED_LARGE` is bursty on loopback and knows nothing of other transfers.
///
/// Guarantees: a piece passes only while the run's limit and its host's limit both have room,
/// and is then counted against both; a refused piece is told when to come back. Used on the
/// loop's thread only.
final class CurlRateLimits {
    private var total: RateLimiter?
    private let perHostRate: Int64?
    private var hosts: [String: RateLimiter] = [:]

    /// nil when neither limit is set (then transfers pay nothing for limits).
    init?(_ connection: ConnectionOptions) {
        guard connection.limitRate != nil || connection.perHostRate != nil else { return nil }
        total = connection.limitRate.map(RateLimiter.init(bytesPerSecond:))
        perHostRate = connection.perHostRate
    }

    /// nil when `count` bytes from `host` may pass now (they are counted); else when to try again.
    func admit(_ count: Int, host: String, now: UInt64) -> UInt64? {
        var hostLimit = perHostRate.map { hosts[host] ?? RateLimiter(bytesPerSecond: $0) }
        defer { if let hostLimit { hosts[host] = hostLimit } }
        let totalReady = total?.mayPass(now: now) ?? true
        let hostReady = hostLimit?.mayPass(now: now) ?? true
        guard totalReady, hostReady else {
            return max(total?.readyAt(now: now) ?? now, hostLimit?.readyAt(now: now) ?? now)
        }
        total?.take(count, now: now)
        hostLimit?.take(count, now: now)
        return nil
    }
}
