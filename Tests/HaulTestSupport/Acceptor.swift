import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The listening half every loopback test server shares (`FaultServer`, `ForwardingProxy`,
/// `SOCKS5Proxy`): a listening socket, an acceptor thread, one thread per connection, a registry
/// of every live socket, and `stop`.
///
/// Guarantees:
/// - binds `host:port` (an IPv4 literal or "localhost"; port 0 picks a free port);
/// - every socket it hands out (accepted, or registered with `register`) is in the registry
///   until it is closed, and is removed (under the lock) before its descriptor is closed, so
///   `stop` never touches a recycled descriptor;
/// - a connection's socket is closed after `serve` returns (`serve` must not close it);
/// - `stop(timeout:)` closes the listener, shuts down every registered socket (which ends every
///   blocking read, write and poll on them), makes `wakeRead` readable for good, and waits until
///   the acceptor and every connection thread have finished (but for the calling thread, when a
///   connection thread calls it); idempotent.
public final class Acceptor: Sendable {
    public struct StartError: Error, CustomStringConvertible {
        public let operation: String
        public let code: Int32
        public var description: String {
            "test server: \(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
        }
    }

    struct Connections: Sendable {
        var sockets: [Int: Int32] = [:]
        var nextSocketID = 0
        var accepted = 0
        var open = 0
        var threads: Set<UInt> = []
        var stopRequested = false
        var acceptorFinished = false
        var pipesClosed = false
    }

    /// A client connection: its socket and its 1-based number.
    typealias Serve = @Sendable (_ client: Int32, _ connectionID: Int) -> Void

    public let host: String
    public let port: Int
    /// Readable once `stop` began: poll it next to a socket to be woken by `stop`.
    let wakeRead: Int32
    private let wakeWrite: Int32
    private let listenFD: Int32
    private let stopped = Atomic<Bool>(false)
    private let table = Locked(Connections())

    public init(host: String = "127.0.0.1", port: Int = 0) throws {
        let (fd, boundPort) = try Self.listen(host: host, port: port)
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            let code = errno
            close(fd)
            throw StartError(operation: "pipe", code: code)
        }
        for p in pipeFDs { _ = fcntl(p, F_SETFD, FD_CLOEXEC) }
        self.host = host
        self.port = boundPort
        self.listenFD = fd
        self.wakeRead = pipeFDs[0]
        self.wakeWrite = pipeFDs[1]
    }

    /// Connections accepted since start.
    public var connectionsAccepted: Int { table.withLock { $0.accepted } }
    /// Connections whose thread has not finished yet.
    public var openConnections: Int { table.withLock { $0.open } }
    /// Whether `stop` began.
    var isStopping: Bool { stopped.load(ordering: .acquiring) }

    /// Starts the acceptor thread; `serve` runs on a thread of its own per connection.
    /// `changed` is called after each connection opens and after it is closed.
    func start(name: String, changed: @escaping @Sendable () -> Void = {}, serve: @escaping Serve) {
        let thread = Thread { [self] in acceptLoop(name: name, changed: changed, serve: serve) }
        thread.name = "\(name) accept"
        thread.start()
    }

    private func acceptLoop(name: String, changed: @escaping @Sendable () -> Void, serve: @escaping Serve) {
        loop: while !isStopping {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            if fds[1].revents != 0 { break }
            if fds[0].revents & Int16(POLLIN) == 0 {
                if fds[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { break }
                continue
            }
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                switch errno {
                case EINTR, EAGAIN, ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    var wake = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                    _ = poll(&wake, 1, 20)
                    continue
                default:
                    break loop
                }
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let accepted = table.update { s -> (socketID: Int, connectionID: Int)? in
                if s.stopRequested { return nil }
                s.accepted += 1
                s.open += 1
                s.nextSocketID += 1
                s.sockets[s.nextSocketID] = fd
                return (s.nextSocketID, s.accepted)
            }
            guard let accepted else {
                close(fd)
                break
            }
            changed()
            let thread = Thread { [self] in
                let me = UInt(pthread_self())
                table.withLock { _ = $0.threads.insert(me) }
                serve(fd, accepted.connectionID)
                table.withLock { s in
                    s.sockets[accepted.socketID] = nil
                    s.threads.remove(me)
                }
                close(fd)
                table.update { $0.open -= 1 }
                changed()
            }
            thread.name = "\(name) conn \(accepted.connectionID)"
            thread.start()
        }
        close(listenFD)
        table.update { $0.acceptorFinished = true }
    }

    /// Closes the listener and every registered socket, and waits (up to `timeout`) for the
    /// acceptor and every connection thread to finish. Idempotent; safe to call from a
    /// connection thread (that one is not waited for). Returns whether they all finished in time.
    @discardableResult
    public func stop(timeout: TimeInterval) -> Bool {
        stopped.store(true, ordering: .releasing)
        let first = table.update { s -> Bool in
            defer { s.stopRequested = true }
            for fd in s.sockets.values { _ = shutdown(fd, Int32(SHUT_RDWR)) }
            return !s.stopRequested
        }
        if first {
            var byte: UInt8 = 1
            _ = Glibc.write(wakeWrite, &byte, 1)  // stays readable: wakes every poll() on it for good
        }
        let me = UInt(pthread_self())
        let finished = table.wait(timeout: timeout) { s in
            s.acceptorFinished && s.open <= (s.threads.contains(me) ? 1 : 0)
        }
        let closePipes = finished && table.withLock { s -> Bool in
            guard !s.pipesClosed, s.open == 0 else { return false }
            s.pipesClosed = true
            return true
        }
        if closePipes {
            close(wakeRead)
            close(wakeWrite)
        }
        return finished
    }

    // MARK: Sockets

    /// Registers a socket the server opened itself (so `stop` shuts it down); nil, and the socket
    /// is closed, when stopping.
    func register(_ fd: Int32) -> Int? {
        let id = table.update { s -> Int? in
            if s.stopRequested { return nil }
            s.nextSocketID += 1
            s.sockets[s.nextSocketID] = fd
            return s.nextSocketID
        }
        if id == nil { close(fd) }
        return id
    }

    /// Unregisters, then closes.
    func closeSocket(_ id: Int, _ fd: Int32) {
        table.withLock { _ = $0.sockets.removeValue(forKey: id) }
        close(fd)
    }

    // MARK: Listening socket

    private static func listen(host: String, port: Int) throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw StartError(operation: "socket", code: errno) }
        func fail(_ op: String) -> StartError {
            let code = errno
            close(fd)
            return StartError(operation: op, code: code)
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(clamping: port)).bigEndian
        let literal = host == "localhost" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, literal, &addr.sin_addr) == 1 else {
            close(fd)
            throw StartError(operation: "inet_pton(\(host))", code: EINVAL)
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw fail("bind(\(host):\(port))") }
        guard Glibc.listen(fd, 128) == 0 else { throw fail("listen") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)  // accept never blocks after poll
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw fail("getsockname") }
        return (fd, Int(UInt16(bigEndian: actual.sin_port)))
    }
}
