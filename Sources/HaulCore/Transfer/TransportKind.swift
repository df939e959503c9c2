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

    /// Why a transport of this kind cannot be made as asked.
    public struct Unsupported: Error, CustomStringConvertible {
        public let description: String
    }

    /// A transport of this kind, for up to `maxTransfers` transfers at once, connecting as
    /// `connection` asks. Throws `Unsupported` naming the options this kind lacks.
    public func make(maxTransfers: Int, connection: ConnectionOptions = ConnectionOptions()) throws -> any Transport {
        try check(connection)
        switch self {
        case .curl: return try CurlTransport(options: CurlTransport.Options(connection: connection))
        case .urlsession: return URLSessionTransport(maxConnectionsPerHost: max(maxTransfers, 1))
        }
    }

    /// Throws `Unsupported` naming the options of `connection` this kind lacks.
    public func check(_ connection: ConnectionOptions) throws {
        guard self == .urlsession, !connection.requested.isEmpty else { return }
        let lacking = connection.requested
        throw Unsupported(description: "\(lacking.joined(separator: ", ")) \(lacking.count == 1 ? "needs" : "need") the libcurl transport: "
                          + "URLSession on Linux cannot do \(lacking.count == 1 ? "it" : "them"); leave out --transport urlsession")
    }
}
