import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP forward proxy for tests: absolute-form requests (`GET http://host:port/p HTTP/1.1`)
/// are sent on to the origin in origin-form, and `CONNECT host:port` opens a tunnel (so https can
/// go through it too).
///
/// Guarantees:
/// - listens on 127.0.0.1 only (port 0 = a free port); one thread per client connection, one
///   request per client connection (the client connection is closed after each response);
/// - every request head it can parse is logged (`requests`) with all its header fields as received,
///   Proxy-Authorization included, before the proxy sends anything for it, to the origin or back
///   to the client: a client that got any answer finds its request in the log;
/// - an absolute-form `http://` request goes to the origin as `METHOD /path?query VERSION`, with
///   the client's fields in order minus the hop-by-hop ones (Connection and every field it names,
///   Proxy-Connection, Proxy-Authorization, Keep-Alive, TE, Trailer, Upgrade) plus
///   `Connection: close` (and a Host field from the target when the client sent none); a request
///   body and the whole response are relayed as bytes, unchanged (so Transfer-Encoding is kept),
///   until the origin closes, then the client connection is closed;
/// - `CONNECT host:port` is answered `HTTP/1.1 200 Connection established` once the origin is
///   connected, then bytes are relayed both ways, untouched, until both sides have closed;
/// - the proxy answers by itself, with `Connection: close`: 400 to a target it does not understand
///   (origin-form, a scheme other than http), 407 with `Proxy-Authenticate: Basic realm="haul-test"`
///   when `requireAuthorization` is set and `Proxy-Authorization` is not `Basic base64(user:pass)`
///   (such a request never reaches an origin), 502 when the origin cannot be connected;
/// - `stop(timeout:)` (also on deinit) closes the listener and every client and origin socket,
///   and waits for every thread to finish.
///
/// ```swift
/// let proxy = try ForwardingProxy()
/// defer { proxy.stop() }
/// // curl --proxy \(proxy.url) \(server.url("/f"))
/// XCTAssertEqual(proxy.requests.first?.target, server.url("/f").absoluteString)
/// ```
/// Its log and lifecycle (`requests`, `waitForRequests`, `connectionsAccepted`, `stop`) come
/// from `RecordingServer`.
public final class ForwardingProxy: RecordingServer {
    /// One request head as the proxy received it, and what it did with it.
    public struct Request: Sendable, CustomStringConvertible {
        public let method: String
        /// As sent: `http://host:port/path?query` (absolute-form) or `host:port` (CONNECT).
        public let target: String
        public let version: String
        /// Every header field as received, in order (Proxy-Authorization and Proxy-Connection included).
        public let headers: FaultServer.Headers
        /// The origin named by the target; nil when the target was not understood.
        public let originHost: String?
        public let originPort: Int?
        /// The request-target sent to the origin (`/path?query`); nil for CONNECT and when not forwarded.
        public let originTarget: String?
        /// The status the proxy answered by itself (400, 407, 502, or 200 for CONNECT); nil when
        /// the origin's response was relayed.
        public let proxyStatus: Int?
        /// Which client connection carried it (1-based).
        public let connectionID: Int

        public var description: String { "\(method) \(target) \(version) → \(proxyStatus.map(String.init) ?? "origin")" }
    }

    public let host = "127.0.0.1"
    public let port: Int
    /// `http://127.0.0.1:PORT`, the form curl's `--proxy`, `CURLOPT_PROXY` and `http_proxy` take.
    public var url: String { "http://\(host):\(port)" }

    public let acceptor: Acceptor
    /// Every request head received, in arrival order.
    public let requestLog = RequestLog<Request>()

    /// Binds 127.0.0.1:`port` (0 = a free port) and starts accepting. `requireAuthorization`
    /// (`"user:pass"`) makes the proxy answer 407 to requests without those Basic credentials.
    public init(port: Int = 0, requireAuthorization: String? = nil) throws {
        let listener = try Acceptor(port: port)
        acceptor = listener
        self.port = listener.port
        let session = Session(
            listener: listener, log: requestLog,
            expected: requireAuthorization.map { "Basic " + Data($0.utf8).base64EncodedString() })
        listener.start(name: "ForwardingProxy \(listener.port)") { session.serve(client: $0, connectionID: $1) }
    }

    deinit { acceptor.stop(timeout: 5) }
}

/// What a connection thread needs (not the `ForwardingProxy` itself, so that can deinit → stop).
private struct Session: Sendable {
    let listener: Acceptor
    let log: RequestLog<ForwardingProxy.Request>
    /// The whole `Proxy-Authorization` value required, if any.
    let expected: String?

    func serve(client: Int32, connectionID: Int) {
        guard let (headBytes, rest) = Acceptor.readHead(client) else { return }
        guard let head = HeadParser.parse(headBytes) else {
            Acceptor.sendAll(client, Self.answer(400))
            return
        }
        func record(_ origin: (host: String, port: Int, target: String?)?, status: Int?) {
            log.append(.init(
                method: head.method, target: head.target, version: head.version, headers: head.headers,
                originHost: origin?.host, originPort: origin?.port, originTarget: origin?.target,
                proxyStatus: status, connectionID: connectionID))
        }
        let isConnect = head.method.uppercased() == "CONNECT"
        let parsed: (host: String, port: Int, target: String?)? = isConnect
            ? Self.authority(Substring(head.target), defaultPort: nil).map { (host: $0.host, port: $0.port, target: String?.none) }
            : Self.absoluteForm(head.target)
        guard let origin = parsed else {
            record(nil, status: 400)
            Acceptor.sendAll(client, Self.answer(400))
            return
        }
        if let expected, head.headers["Proxy-Authorization"] != expected {
            record(origin, status: 407)
            Acceptor.sendAll(client, Self.answer(407, "Proxy-Authenticate: Basic realm=\"haul-test\"\r\n"))
            return
        }
        guard case .success(let upstream) = listener.connect(host: origin.host, port: origin.port) else {
            record(origin, status: 502)
            Acceptor.sendAll(client, Self.answer(502))
            return
        }
        defer { listener.closeSocket(upstream.id, upstream.fd) }
        if isConnect {
            record(origin, status: 200)
            guard Acceptor.sendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n"),
                  Acceptor.sendAll(upstream.fd, rest) else { return }
            listener.relay(client, upstream.fd)
        } else {
            record(origin, status: nil)
            let forwarded = Self.originHead(head, target: origin.target ?? "/", authority: "\(origin.host):\(origin.port)")
            guard Acceptor.sendAll(upstream.fd, Array(forwarded.utf8) + rest) else { return }
            listener.relay(client, upstream.fd, endsWith: upstream.fd)
        }
    }

    /// The head sent to the origin: origin-form target, hop-by-hop fields dropped, `Connection: close`.
    static func originHead(_ head: ParsedHead, target: String, authority: String) -> String {
        let named = head.headers.values("Connection").flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let hopByHop = Set(["connection", "proxy-connection", "proxy-authorization", "keep-alive", "te",
                            "trailer", "upgrade"] + named)
        var text = "\(head.method) \(target) \(head.version)\r\n"
        if !head.headers.contains("Host") { text += "Host: \(authority)\r\n" }
        for field in head.headers where !hopByHop.contains(field.name.lowercased()) {
            text += "\(field.name): \(field.value)\r\n"
        }
        return text + "Connection: close\r\n\r\n"
    }

    /// `http://[userinfo@]host[:port][/path][?query][#fragment]` → host, port, `/path?query`.
    static func absoluteForm(_ target: String) -> (host: String, port: Int, target: String?)? {
        guard target.lowercased().hasPrefix("http://") else { return nil }
        let rest = target.dropFirst("http://".count)
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<end]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        guard let (host, port) = Self.authority(authority, defaultPort: 80) else { return nil }
        var path = rest[end...]
        if let hash = path.firstIndex(of: "#") { path = path[..<hash] }
        let originTarget = path.hasPrefix("/") ? String(path) : "/" + path
        return (host, port, originTarget)
    }

    /// `host:port`, `[v6]:port`, or (with a default port) a bare host.
    static func authority(_ text: Substring, defaultPort: Int?) -> (host: String, port: Int)? {
        var host = text
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { return nil }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        let port: Int? = if let portText { Int(portText) } else { defaultPort }
        guard let port, (1...65535).contains(port), !host.isEmpty else { return nil }
        return (String(host), port)
    }

    static func answer(_ status: Int, _ extraFields: String = "") -> String {
        let reason = [400: "Bad Request", 407: "Proxy Authentication Required", 502: "Bad Gateway"][status] ?? ""
        let body = "\(status) \(reason) (ForwardingProxy)\n"
        return "HTTP/1.1 \(status) \(reason)\r\n\(extraFields)"
            + "Content-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    }
}
