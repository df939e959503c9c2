import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The plumbing `ForwardingProxy` and `SOCKS5Proxy` share: a loopback listener, one thread per
/// client connection, a registry of every live socket, blocking reads and writes, connecting to
/// an origin, and a two-way relay.
///
/// Guarantees:
/// - listens on 127.0.0.1 only; port 0 picks a free port;
/// - every socket it hands out (client or origin) is in the registry until it is closed, and is
///   removed (under the lock) before its descriptor is closed, so `stop` never touches a recycled
///   descriptor;
/// - `stop(timeout:)` closes the listener, shuts down every registered socket (which ends every
///   blocking read, write and relay) and waits until the acceptor and every connection thread
///   have finished; idempotent.
final class ProxyListener: Sendable {
    struct State: Sendable {
        var sockets: [Int: Int32] = [:]
        var nextSocketID = 0
        var connectionsAccepted = 0
        var openConnections = 0
        var stopRequested = false
        var acceptorFinished = false
        var pipesClosed = false
    }

    /// A client connection: its socket and its 1-based number.
    typealias Serve = @Sendable (_ client: Int32, _ connectionID: Int) -> Void

    let port: Int
    let state = Locked(State())
    private let listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopped = Atomic<Bool>(false)

    init(port: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FaultServer.StartError(operation: "socket", code: errno) }
        func fail(_ operation: String) -> FaultServer.StartError {
            let code = errno
            close(fd)
            return FaultServer.StartError(operation: operation, code: code)
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(clamping: port)).bigEndian
        addr.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw fail("bind(127.0.0.1:\(port))") }
        guard listen(fd, 128) == 0 else { throw fail("listen") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)  // accept never blocks after poll
        let named = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw fail("getsockname") }
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { throw fail("pipe") }
        for p in pipeFDs { _ = fcntl(p, F_SETFD, FD_CLOEXEC) }
        self.listenFD = fd
        self.wakeRead = pipeFDs[0]
        self.wakeWrite = pipeFDs[1]
        self.port = Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Starts the acceptor thread; `serve` runs on a thread of its own per connection. The client
    /// socket is closed after `serve` returns (`serve` must not close it).
    func start(name: String, serve: @escaping Serve) {
        let thread = Thread { [self] in acceptLoop(name: name, serve: serve) }
        thread.name = "\(name) accept"
        thread.start()
    }

    private func acceptLoop(name: String, serve: @escaping Serve) {
        while !stopped.load(ordering: .acquiring) {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { break } }
            if fds[1].revents != 0 { break }
            if fds[0].revents & Int16(POLLIN) == 0 { break }  // POLLERR, POLLHUP, POLLNVAL
            let fd = accept(listenFD, nil, nil)
            if fd < 0 { if [EINTR, EAGAIN, ECONNABORTED].contains(errno) { continue } else { break } }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            let accepted = state.update { s -> (Int, Int)? in
                if s.stopRequested { return nil }
                s.connectionsAccepted += 1
                s.openConnections += 1
                s.nextSocketID += 1
                s.sockets[s.nextSocketID] = fd
                return (s.nextSocketID, s.connectionsAccepted)
            }
            guard let (socketID, connectionID) = accepted else { close(fd); break }
            let thread = Thread { [self] in
                serve(fd, connectionID)
                closeSocket(socketID, fd)
                state.update { $0.openConnections -= 1 }
            }
            thread.name = "\(name) conn \(connectionID)"
            thread.start()
        }
        close(listenFD)
        state.update { $0.acceptorFinished = true }
    }

    @discardableResult
    func stop(timeout: TimeInterval) -> Bool {
        stopped.store(true, ordering: .releasing)
        let first = state.update { s -> Bool in
            defer { s.stopRequested = true }
            for fd in s.sockets.values { _ = shutdown(fd, Int32(SHUT_RDWR)) }
            return !s.stopRequested
        }
        if first {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)  // stays readable: wakes the acceptor and every relay for good
        }
        let finished = state.wait(timeout: timeout) { $0.acceptorFinished && $0.openConnections == 0 }
        let closePipes = finished && state.withLock { s -> Bool in
            defer { s.pipesClosed = true }
            return !s.pipesClosed
        }
        if closePipes {
            close(wakeRead)
            close(wakeWrite)
        }
        return finished
    }

    // MARK: Sockets

    /// Connects to `host:port` (a literal or a name, resolved with getaddrinfo; each address is
    /// tried in turn) and registers the socket. Returns it and its registry id, or the errno of
    /// the last failure (`EHOSTUNREACH` when the name does not resolve, `ECANCELED` when stopping).
    func connect(host: String, port: Int) -> Result<(fd: Int32, id: Int), Errno> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let list else { return .failure(Errno(EHOSTUNREACH)) }
        defer { freeaddrinfo(list) }
        var code = EHOSTUNREACH
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let info = entry?.pointee {
            entry = info.ai_next
            let fd = socket(info.ai_family, info.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.ai_protocol)
            guard fd >= 0 else { code = errno; continue }
            guard Glibc.connect(fd, info.ai_addr, info.ai_addrlen) == 0 else { code = errno; close(fd); continue }
            let id = state.update { s -> Int? in
                if s.stopRequested { return nil }
                s.nextSocketID += 1
                s.sockets[s.nextSocketID] = fd
                return s.nextSocketID
            }
            guard let id else { close(fd); return .failure(Errno(ECANCELED)) }
            return .success((fd, id))
        }
        return .failure(Errno(code))
    }

    /// Unregisters, then closes.
    func closeSocket(_ id: Int, _ fd: Int32) {
        state.withLock { _ = $0.sockets.removeValue(forKey: id) }
        close(fd)
    }

    struct Errno: Error { let code: Int32; init(_ code: Int32) { self.code = code } }

    /// Writes every byte; false if the socket failed (or was shut down by `stop`).
    @discardableResult
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n > 0 { offset += n } else if n < 0, errno == EINTR { continue } else { return false }
            }
            return true
        }
    }

    @discardableResult
    static func sendAll(_ fd: Int32, _ text: String) -> Bool { sendAll(fd, Array(text.utf8)) }

    /// Exactly `count` bytes, or nil if the stream ended first.
    static func read(_ fd: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let n = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, count - offset, 0) }
            if n > 0 { offset += n } else if n < 0, errno == EINTR { continue } else { return nil }
        }
        return bytes
    }

    /// Reads up to the blank line ending an HTTP head (at most 64 KiB): the head, and the bytes
    /// already read beyond it. Nil if the stream ended first or the head is too large.
    static func readHead(_ fd: Int32) -> (head: [UInt8], rest: [UInt8])? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while buffer.count <= 64 * 1024 {
            if let (end, consumed) = Core.findHeadEnd(buffer, from: max(0, buffer.count - chunk.count - 3)) {
                return (Array(buffer[..<end]), Array(buffer[consumed...]))
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { buffer.append(contentsOf: chunk[..<n]) } else if n < 0, errno == EINTR { continue } else { return nil }
        }
        return nil
    }

    /// Copies bytes both ways between `a` and `b`. When one side ends its stream, the other's
    /// write side is shut down (a half-close passed on). Returns once both sides have ended, once
    /// `endsWith` (if given) has ended, on any error, or when the listener stops.
    func relay(_ a: Int32, _ b: Int32, endsWith: Int32? = nil) {
        var open = [a: true, b: true]
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while open[a]! || open[b]! {
            var fds = [pollfd(fd: open[a]! ? a : -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: open[b]! ? b : -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 3, -1) < 0 { if errno == EINTR { continue } else { return } }
            if fds[2].revents != 0 { return }
            for (from, to, revents) in [(a, b, fds[0].revents), (b, a, fds[1].revents)] where revents != 0 {
                let n = chunk.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    guard Self.sendAll(to, Array(chunk[..<n])) else { return }
                } else if n == 0 {
                    if from == endsWith { return }
                    open[from] = false
                    _ = shutdown(to, Int32(SHUT_WR))
                } else if errno != EINTR {
                    return
                }
            }
        }
    }
}
