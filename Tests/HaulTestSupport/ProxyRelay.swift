import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What `ForwardingProxy` and `SOCKS5Proxy` add to the shared `Acceptor`: connecting to an
/// origin (the socket registered, so `stop` shuts it down), blocking reads and writes, and a
/// two-way relay that `stop` ends.
extension Acceptor {
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
            guard let id = register(fd) else { return .failure(Errno(ECANCELED)) }
            return .success((fd, id))
        }
        return .failure(Errno(code))
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
