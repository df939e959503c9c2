import Foundation

/// A listening socket whose accept queue is full and never served: `listen(fd, 0)` and one
/// connection of its own left unaccepted, so Linux drops every further SYN and a client's
/// connect hangs, as to a host behind a firewall that drops packets. Nothing ever connects.
///
/// Guarantees: `port` refuses no connection and completes none until `close()` (or deinit).
public final class FullBacklogListener {
    public let host: String
    public let port: Int
    private var listener: Int32
    private var filler: Int32

    public init(host: String) throws {
        self.host = host
        let (listener, filler, port) = try Self.open(host)
        self.listener = listener
        self.filler = filler
        self.port = port
    }

    private static func open(_ host: String) throws -> (Int32, Int32, Int) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, host, &address.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        guard listener >= 0, bound == 0, listen(listener, 0) == 0,
              withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }) == 0
        else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // The one connection the queue holds: made here, never accepted.
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) } }
        guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (listener, filler, Int(UInt16(bigEndian: address.sin_port)))
    }

    public func url(_ path: String) -> URL { URL(string: "http://\(host):\(port)\(path)")! }

    public func close() {
        if filler >= 0 { Glibc.close(filler); filler = -1 }
        if listener >= 0 { Glibc.close(listener); listener = -1 }
    }

    deinit { close() }
}
