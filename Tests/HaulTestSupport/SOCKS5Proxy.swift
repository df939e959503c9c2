import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal loopback SOCKS5 server for tests (RFC 1928): the no-authentication method, the
/// CONNECT command, IPv4 and domain-name addresses; then bytes are relayed both ways.
///
/// Guarantees:
/// - listens on 127.0.0.1 only (port 0 = a free port); one thread per client connection;
/// - a client offering no-authentication (0x00) is answered `05 00`; any other offer `05 FF`, and
///   the connection is closed;
/// - every request (after the method exchange) whose address type is IPv4, domain name or IPv6 is
///   logged (`requests`) with the host exactly as given — a domain name is logged unresolved, so
///   a test can tell `socks5h://` (the proxy resolves: `.domainName`) from `socks5://` (the client
///   resolves: `.ipv4`) — before the reply is sent;
/// - CONNECT to an IPv4 address or a domain name (resolved with getaddrinfo, each address tried in
///   turn) is answered 0x00 with the bound IPv4 address once the origin is connected, then bytes
///   are relayed both ways, untouched, until both sides have closed; otherwise the reply is 0x07
///   (command not supported), 0x08 (address type not supported: IPv6 and unknown types), 0x05
///   (connection refused), 0x04 (host unreachable, name not resolved) or 0x01, and the connection
///   is closed;
/// - `stop(timeout:)` (also on deinit) closes the listener and every client and origin socket,
///   and waits for every thread to finish.
///
/// ```swift
/// let proxy = try SOCKS5Proxy()
/// defer { proxy.stop() }
/// // curl --proxy socks5h://127.0.0.1:\(proxy.port) http://localhost:\(server.port)/f
/// XCTAssertEqual(proxy.requests.first?.addressType, .domainName)
/// ```
/// Its log and lifecycle (`requests`, `waitForRequests`, `connectionsAccepted`, `stop`) come
/// from `RecordingServer`.
public final class SOCKS5Proxy: RecordingServer {
    public enum AddressType: UInt8, Sendable {
        case ipv4 = 0x01
        case domainName = 0x03
        case ipv6 = 0x04
    }

    /// One SOCKS5 request as received, and the reply given.
    public struct Request: Sendable, CustomStringConvertible {
        /// 0x01 CONNECT, 0x02 BIND, 0x03 UDP ASSOCIATE.
        public let command: UInt8
        public let addressType: AddressType
        /// As given: a dotted quad, the domain name unresolved, or an IPv6 literal.
        public let host: String
        public let port: Int
        /// The reply code sent: 0x00 succeeded, else the failure (see the type's guarantees).
        public let reply: UInt8
        /// Which client connection carried it (1-based).
        public let connectionID: Int

        public var isConnect: Bool { command == 0x01 }
        public var description: String { "cmd \(command) \(addressType) \(host):\(port) → reply \(reply)" }
    }

    public let host = "127.0.0.1"
    public let port: Int
    /// `socks5://127.0.0.1:PORT` (the client resolves names); use `socks5h://` for the proxy to resolve them.
    public var url: String { "socks5://\(host):\(port)" }

    public let acceptor: Acceptor
    /// Every request received, in arrival order.
    public let requestLog = RequestLog<Request>()

    /// Binds 127.0.0.1:`port` (0 = a free port) and starts accepting.
    public init(port: Int = 0) throws {
        let listener = try Acceptor(port: port)
        acceptor = listener
        self.port = listener.port
        let session = SOCKSSession(listener: listener, log: requestLog)
        listener.start(name: "SOCKS5Proxy \(listener.port)") { session.serve(client: $0, connectionID: $1) }
    }

    deinit { acceptor.stop(timeout: 5) }
}

/// What a connection thread needs (not the `SOCKS5Proxy` itself, so that can deinit → stop).
private struct SOCKSSession: Sendable {
    let listener: Acceptor
    let log: RequestLog<SOCKS5Proxy.Request>

    func serve(client: Int32, connectionID: Int) {
        // Method selection: VER NMETHODS METHODS...
        guard let greeting = Acceptor.read(client, count: 2), greeting[0] == 5,
              let methods = Acceptor.read(client, count: Int(greeting[1])) else { return }
        guard methods.contains(0x00) else {
            Acceptor.sendAll(client, [5, 0xFF])
            return
        }
        guard Acceptor.sendAll(client, [5, 0x00]),
              // Request: VER CMD RSV ATYP DST.ADDR DST.PORT
              let fixed = Acceptor.read(client, count: 4), fixed[0] == 5 else { return }
        let command = fixed[1]
        guard let type = SOCKS5Proxy.AddressType(rawValue: fixed[3]) else {
            Acceptor.sendAll(client, Self.reply(0x08))
            return
        }
        let host: String
        switch type {
        case .ipv4:
            guard let a = Acceptor.read(client, count: 4) else { return }
            host = a.map { String($0) }.joined(separator: ".")
        case .domainName:
            guard let length = Acceptor.read(client, count: 1),
                  let name = Acceptor.read(client, count: Int(length[0])) else { return }
            host = String(decoding: name, as: UTF8.self)
        case .ipv6:
            guard let a = Acceptor.read(client, count: 16) else { return }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            _ = inet_ntop(AF_INET6, a, &text, socklen_t(text.count))
            host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        guard let portBytes = Acceptor.read(client, count: 2) else { return }
        let port = Int(portBytes[0]) << 8 | Int(portBytes[1])

        func record(_ reply: UInt8) {
            log.append(.init(command: command, addressType: type, host: host, port: port,
                             reply: reply, connectionID: connectionID))
        }
        guard command == 0x01 else { record(0x07); Acceptor.sendAll(client, Self.reply(0x07)); return }
        guard type != .ipv6 else { record(0x08); Acceptor.sendAll(client, Self.reply(0x08)); return }
        switch listener.connect(host: host, port: port) {
        case .failure(let failure):
            let code: UInt8 = switch failure.code {
            case ECONNREFUSED: 0x05
            case EHOSTUNREACH: 0x04
            case ENETUNREACH: 0x03
            default: 0x01
            }
            record(code)
            Acceptor.sendAll(client, Self.reply(code))
        case .success(let upstream):
            defer { listener.closeSocket(upstream.id, upstream.fd) }
            record(0x00)
            guard Acceptor.sendAll(client, Self.reply(0x00, boundTo: upstream.fd)) else { return }
            listener.relay(client, upstream.fd)
        }
    }

    /// VER REP RSV ATYP(IPv4) BND.ADDR BND.PORT: the origin socket's local IPv4 address, or 0.0.0.0:0.
    static func reply(_ code: UInt8, boundTo fd: Int32? = nil) -> [UInt8] {
        var address = sockaddr_in()
        if let fd {
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            if named != 0 || address.sin_family != sa_family_t(AF_INET) { address = sockaddr_in() }
        }
        let ip = UInt32(bigEndian: address.sin_addr.s_addr)
        let port = UInt16(bigEndian: address.sin_port)
        return [5, code, 0, 0x01, UInt8(ip >> 24), UInt8(ip >> 16 & 0xFF), UInt8(ip >> 8 & 0xFF), UInt8(ip & 0xFF),
                UInt8(port >> 8), UInt8(port & 0xFF)]
    }
}
