import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP relay for tests: each connection to it is relayed to `targetHost:targetPort`
/// (a database server, say) until `cut()`, which ends every relayed connection and closes each
/// new one as soon as it is accepted, as a server that went away would; `restore()` relays again.
///
/// Guarantees: after `cut()` returns, no new connection is relayed until `restore()` and every
/// relayed one is shut down (bytes a relay thread had already read may still be written on: a
/// statement can land just after the cut, as on a real network); a relayed
/// connection's socket is shut down only while it is registered (never a recycled descriptor);
/// `stop()` ends every connection and the acceptor.
public final class TCPRelay: Sendable {
    public let targetHost: String
    public let targetPort: Int
    private let listener: Acceptor
    private let state = Locked(State())

    private struct State: Sendable {
        var cut = false
        /// The client sockets of the connections relayed now.
        var live: Set<Int32> = []
        var relayed = 0
    }

    public var port: Int { listener.port }
    /// Connections relayed so far.
    public var relayed: Int { state.withLock { $0.relayed } }

    public init(to host: String = "127.0.0.1", port: Int) throws {
        targetHost = host
        targetPort = port
        listener = try Acceptor()
        listener.start(name: "tcp relay") { [self] client, _ in serve(client) }
    }

    private func serve(_ client: Int32) {
        guard state.withLock({ $0.cut ? false : $0.live.insert(client).inserted }) else { return }
        defer { state.withLock { _ = $0.live.remove(client) } }
        guard case .success(let upstream) = listener.connect(host: targetHost, port: targetPort) else { return }
        defer { listener.closeSocket(upstream.id, upstream.fd) }
        guard state.withLock({ state -> Bool in
            state.relayed += 1
            return !state.cut
        }) else { return }
        listener.relay(client, upstream.fd)
    }

    /// Ends every relayed connection and refuses new ones until `restore()`.
    public func cut() {
        state.withLock { state in
            state.cut = true
            for fd in state.live { _ = shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    public func restore() {
        state.withLock { $0.cut = false }
    }

    public func stop() {
        cut()
        _ = listener.stop(timeout: 10)
    }
}
