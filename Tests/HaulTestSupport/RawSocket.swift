import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal blocking TCP client for tests that need to see the exact bytes (keep-alive, extra bytes,
/// resets) rather than what URLSession makes of them. Not thread-safe: use from one thread.
public final class RawSocket {
    public enum End: Equatable, Sendable { case eof, reset, timeout, error(Int32) }

    public struct Response: Sendable {
        public var statusLine: String
        public var status: Int
        public var headers: FaultServer.Headers
        public var body: Data
    }

    public struct Failure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public let fd: Int32
    private var buffer: [UInt8] = []
    /// How the stream ended, once a read hit the end.
    public private(set) var end: End?

    /// Connects to `host:port`; each read gives up after `timeout` seconds of silence.
    public init(host: String, port: Int, timeout: TimeInterval = 5) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(message: "socket: errno \(errno)") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(clamping: port)).bigEndian
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &addr.sin_addr) == 1 else {
            close(fd)
            throw Failure(message: "bad host \(host)")
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            let code = errno
            close(fd)
            throw Failure(message: "connect \(host):\(port): errno \(code)")
        }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        self.fd = fd
    }

    public convenience init(_ server: FaultServer, timeout: TimeInterval = 5) throws {
        try self.init(host: server.host, port: server.port, timeout: timeout)
    }

    deinit { close(fd) }

    public func send(_ text: String) throws { try send(Data(text.utf8)) }

    public func send(_ data: Data) throws {
        let ok = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n > 0 { offset += n } else if n < 0, errno == EINTR { continue } else { return false }
            }
            return true
        }
        if !ok { throw Failure(message: "send failed: errno \(errno)") }
    }

    /// Sends `GET path` with the given extra header lines (e.g. "Range: bytes=0-").
    public func sendGet(_ path: String, host: String = "test", headers: [String] = [], close: Bool = false) throws {
        var text = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\n"
        for h in headers { text += h + "\r\n" }
        if close { text += "Connection: close\r\n" }
        try send(text + "\r\n")
    }

    /// Reads more bytes into the buffer; false at end of stream (see `end`).
    @discardableResult
    private func fill() -> Bool {
        if end != nil { return false }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer.append(contentsOf: chunk[..<n])
                return true
            }
            if n == 0 { end = .eof; return false }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: end = .timeout
            case ECONNRESET: end = .reset
            default: end = .error(errno)
            }
            return false
        }
    }

    /// Everything until the server closes (or resets, or the read times out) and how it ended.
    public func readToEnd() -> (Data, End) {
        while fill() {}
        let data = Data(buffer)
        buffer.removeAll()
        return (data, end ?? .eof)
    }

    /// Exactly `count` bytes, or nil if the stream ended first.
    public func read(count: Int) -> Data? {
        while buffer.count < count { guard fill() else { return nil } }
        let data = Data(buffer[..<count])
        buffer.removeFirst(count)
        return data
    }

    /// Bytes up to and including `delimiter`, or nil if the stream ended first.
    public func read(through delimiter: String) -> Data? {
        let d = Array(delimiter.utf8)
        var searchFrom = 0
        while true {
            if buffer.count >= d.count {
                var i = searchFrom
                while i + d.count <= buffer.count {
                    if buffer[i..<(i + d.count)].elementsEqual(d) {
                        let data = Data(buffer[..<(i + d.count)])
                        buffer.removeFirst(i + d.count)
                        return data
                    }
                    i += 1
                }
                searchFrom = max(0, buffer.count - d.count + 1)
            }
            guard fill() else { return nil }
        }
    }

    /// Bytes already received but not consumed (e.g. an extra byte after a Content-Length body).
    public func pendingBytes() -> Data { Data(buffer) }

    /// Reads one response: head, then a body per Content-Length, chunked, or until close.
    /// `head: true` for responses to HEAD (no body). Nil if the stream ends before the head/body is complete.
    public func readResponse(head isHead: Bool = false) -> Response? {
        guard let headData = read(through: "\r\n\r\n") else { return nil }
        let text = String(decoding: headData, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard !lines.isEmpty else { return nil }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
        var headers = FaultServer.Headers()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Data()
        if isHead || (100..<200).contains(status) || status == 204 || status == 304 {
            // no body
        } else if headers["Transfer-Encoding"]?.lowercased().contains("chunked") == true {
            while true {
                guard let sizeLine = read(through: "\r\n"),
                      let size = Int(String(decoding: sizeLine, as: UTF8.self)
                        .trimmingCharacters(in: .whitespacesAndNewlines)
                        .split(separator: ";").first ?? "", radix: 16)
                else { return nil }
                if size == 0 {
                    guard read(through: "\r\n") != nil else { return nil }
                    break
                }
                guard let chunk = read(count: size), read(count: 2) != nil else { return nil }
                body.append(chunk)
            }
        } else if let length = headers["Content-Length"].flatMap({ Int($0) }) {
            guard let data = read(count: length) else { return nil }
            body = data
        } else {
            body = readToEnd().0
        }
        return Response(statusLine: statusLine, status: status, headers: headers, body: body)
    }
}
