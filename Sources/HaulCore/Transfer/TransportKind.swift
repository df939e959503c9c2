/// The transports haul has, by the names users choose them with (`--transport`,
/// `HAUL_TRANSPORT`).
///
/// Guarantees: `curl` is the default; every kind makes a transport that keeps the `Transport`
/// protocol's guarantees, and none of them limits connections per host (the engine holds the
/// per-host cap).
public enum TransportKind: String, CaseIterable, Sendable {
    case curl
    case urlsession

    public static let `default` = TransportKind.curl

    /// The kind named `name` (case-insensitive), or nil.
    public init?(name: String) {
        self.init(rawValue: name.lowercased())
    }

    /// A transport of this kind, for up to `maxTransfers` transfers at once.
    public func make(maxTransfers: Int) throws -> any Transport {
        switch self {
        case .curl: return try CurlTransport()
        case .urlsession: return URLSessionTransport(maxConnectionsPerHost: max(maxTransfers, 1))
        }
    }
}
