import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 server for integration tests, scriptable per path with normal responses and
/// faults (delays, stalls, slow/truncated/reset/endless bodies, broken chunking, extra bytes).
///
/// - One thread per connection; persistent connections (keep-alive) with `Connection: close` honoured.
/// - Each instance binds its own loopback address (127.0.0.1, 127.0.0.2, ...) so one instance = one host.
/// - Every request is recorded; in-flight and max-concurrent counts are kept per instance (and across
///   instances through an optional shared `ConcurrencyTracker`).
/// - Tests synchronise with `waitForRequests(count:path:timeout:)` / `wait(timeout:until:)` / `Gate`,
///   which block on a condition variable — no sleeps needed.
/// - `stop()` (also run on deinit) closes the listener and every live connection, interrupts all
///   scripted delays and stalls, and waits for the connection threads to finish.
///
/// ```swift
/// let server = try FaultServer(host: "127.0.0.2")
/// defer { server.stop() }
/// server.route("/f", sequence: [
///     FaultServer.Response.status(503, headers: ["Retry-After": "1"]).handler,
///     FaultServer.file(data, etag: "\"v1\"", lastModified: nil),
/// ])
/// server.route("/cut", FaultServer.Response.ok(data).truncated(afterBytes: 100))
/// // ... point the client at server.url("/f") ...
/// XCTAssertTrue(server.waitForRequests(count: 2, path: "/f", timeout: 5))
/// XCTAssertEqual(server.requests(path: "/f").last?.headers["Range"], "bytes=0-")
/// ```
public final class FaultServer: Sendable {
    public typealias StartError = Acceptor.StartError

    /// Everything observable about the server at one instant.
    public struct Snapshot: Sendable {
        public var requests: [Request]
        public var inFlight: Int
        public var maxConcurrent: Int
        public var connectionsAccepted: Int
        public var openConnections: Int

        public func requests(path: String?) -> [Request] {
            guard let path else { return requests }
            return requests.filter { $0.path == path }
        }
    }

    public let host: String
    public let port: Int
    private let core: Core

    /// Binds `host:port` (port 0 = ephemeral) and starts accepting immediately.
    /// `host` must be an IPv4 literal (any 127.x.y.z works on Linux) or "localhost".
    public init(host: String = "127.0.0.1", port: Int = 0, tracker: ConcurrencyTracker? = nil) throws {
        let acceptor = try Acceptor(host: host, port: port)
        self.host = host
        self.port = acceptor.port
        let core = Core(acceptor: acceptor, hostKey: "\(host):\(acceptor.port)", tracker: tracker)
        self.core = core
        // Opening and closing connections wakes whoever waits on the server's state.
        acceptor.start(name: "FaultServer \(host):\(acceptor.port)", changed: { core.state.update { _ in } }) {
            core.serve(fd: $0, connectionID: $1)
        }
    }

    deinit {
        core.stop(timeout: 5)
    }

    /// `http://HOST:PORT` (no trailing slash).
    public var baseURLString: String { "http://\(host):\(port)" }
    public var baseURL: URL { URL(string: baseURLString)! }
    /// Key used by `ConcurrencyTracker` for this server: `HOST:PORT`.
    public var hostKey: String { "\(host):\(port)" }

    /// Absolute URL for `path` (which should start with `/`; may include a query).
    public func url(_ path: String) -> URL {
        URL(string: baseURLString + (path.hasPrefix("/") ? path : "/" + path))!
    }

    /// Closes the listener and all live connections, interrupts delays/stalls, and waits (up to
    /// `timeout`) for every connection thread to finish. Idempotent; safe to call from a handler.
    /// Returns whether all threads finished in time (only a handler blocking in its own code can stop that).
    @discardableResult
    public func stop(timeout: TimeInterval = 5) -> Bool {
        core.stop(timeout: timeout)
    }

    // MARK: Routes

    /// Serves `path` with `handler` (replaces any previous route for it). `path` matches the request's
    /// path without query; a key containing `?` matches the full request-target instead.
    public func route(_ path: String, _ handler: @escaping Handler) {
        route(path, sequence: [handler])
    }

    /// Always answers `path` with `response`.
    public func route(_ path: String, _ response: Response) {
        route(path, sequence: [response.handler])
    }

    /// Answers successive requests to `path` with `responses` in order; the last one repeats.
    public func route(_ path: String, responses: [Response]) {
        route(path, sequence: responses.map(\.handler))
    }

    /// Answers successive requests to `path` with `handlers` in order; the last one repeats.
    /// E.g. `[Response.status(503, headers: ["Retry-After": "1"]).handler, FaultServer.file(data)]`.
    public func route(_ path: String, sequence handlers: [Handler]) {
        precondition(!handlers.isEmpty, "a route needs at least one handler")
        core.state.update { $0.routes[path] = Route(handlers: handlers) }
    }

    public func removeRoute(_ path: String) {
        core.state.update { $0.routes[path] = nil }
    }

    /// Handler for paths without a route (default: 404 "not found").
    public func setFallback(_ handler: Handler?) {
        core.state.update { $0.fallback = handler }
    }

    // MARK: Recording

    /// Every request received, in arrival order (the log `allRequests`, `requests(path:)`,
    /// `requestCount(path:)` and `waitForRequests` read).
    public var requestLog: RequestLog<Request> { core.log }

    public var allRequests: [Request] { core.log.entries }

    public func requests(path: String) -> [Request] {
        core.log.entries { $0.path == path }
    }

    public func requestCount(path: String? = nil) -> Int {
        core.log.count(where: Self.onPath(path))
    }

    /// A filter for requests to `path`; nil (every request) when `path` is nil.
    private static func onPath(_ path: String?) -> (@Sendable (Request) -> Bool)? {
        guard let path else { return nil }
        return { (request: Request) -> Bool in request.path == path }
    }

    /// Requests currently between "parsed" and "response fully sent / connection closed".
    public var inFlight: Int { core.state.withLock { $0.inFlight } }
    /// Highest `inFlight` seen since start (or `resetRecording()`).
    public var maxConcurrent: Int { core.state.withLock { $0.maxConcurrent } }
    public var connectionsAccepted: Int { core.acceptor.connectionsAccepted }
    public var openConnections: Int { core.acceptor.openConnections }

    public var snapshot: Snapshot { core.state.withLock { core.snapshot($0) } }

    /// Clears recorded requests, resets `maxConcurrent` to the current `inFlight` and restarts every
    /// route's response sequence.
    public func resetRecording() {
        core.state.update { s in
            core.log.removeAll()
            s.maxConcurrent = s.inFlight
            for key in s.routes.keys { s.routes[key]?.served = 0 }
        }
    }

    // MARK: Waiting (condition variable; no sleeping)

    /// Blocks until `predicate` holds for the server's state (re-checked on every request start/end and
    /// connection open/close), or `timeout` passes. Returns whether it held.
    @discardableResult
    public func wait(timeout: TimeInterval = 10, until predicate: (Snapshot) -> Bool) -> Bool {
        core.state.wait(timeout: timeout) { predicate(core.snapshot($0)) }
    }

    /// Blocks until at least `count` requests (to `path`, or any path if nil) have been received.
    @discardableResult
    public func waitForRequests(count: Int, path: String? = nil, timeout: TimeInterval = 10) -> Bool {
        core.log.wait(count: count, where: Self.onPath(path), timeout: timeout)
    }

    /// Blocks until at least `count` requests are in flight at once.
    @discardableResult
    public func waitForInFlight(atLeast count: Int, timeout: TimeInterval = 10) -> Bool {
        core.state.wait(timeout: timeout) { $0.inFlight >= count }
    }

    /// Blocks until no request is in flight (and, if asked, no connection is open).
    @discardableResult
    public func waitUntilIdle(includingConnections: Bool = false, timeout: TimeInterval = 10) -> Bool {
        core.state.wait(timeout: timeout) { s in
            s.inFlight == 0 && (!includingConnections || core.acceptor.openConnections == 0)
        }
    }

    /// Async form of `waitForRequests`: blocks a dedicated thread, not the cooperative pool.
    @discardableResult
    public func waitForRequests(count: Int, path: String? = nil, timeout: TimeInterval = 10) async -> Bool {
        await core.log.wait(count: count, where: Self.onPath(path), timeout: timeout)
    }

    /// Async form of `waitForInFlight`.
    @discardableResult
    public func waitForInFlight(atLeast count: Int, timeout: TimeInterval = 10) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Thread {
                continuation.resume(returning: self.waitForInFlight(atLeast: count, timeout: timeout))
            }.start()
        }
    }

}

// MARK: - Engine

struct Route: Sendable {
    var handlers: [FaultServer.Handler]
    var served = 0
}

struct ServerState: Sendable {
    var routes: [String: Route] = [:]
    var fallback: FaultServer.Handler?
    var inFlight = 0
    var maxConcurrent = 0
    /// The connections with a request in flight (connection id → descriptor).
    var inFlightConnections: [Int: Int32] = [:]
}

/// The part of the server the threads hold on to (so `FaultServer` itself can deinit → stop).
final class Core: Sendable {
    typealias Request = FaultServer.Request
    typealias Response = FaultServer.Response

    let acceptor: Acceptor
    let hostKey: String
    let tracker: FaultServer.ConcurrencyTracker?
    let state = Locked(ServerState())
    let log = RequestLog<Request>()

    static let maxHeadBytes = 64 * 1024
    static let pollRDHUP: Int16 = 0x2000  // POLLRDHUP (needs _GNU_SOURCE, not imported)

    var wakeRead: Int32 { acceptor.wakeRead }

    /// What the server shows at one instant: call with the state lock held (the request log and
    /// the acceptor's counts are read under it, so the parts agree).
    func snapshot(_ s: ServerState) -> FaultServer.Snapshot {
        FaultServer.Snapshot(
            requests: log.entries, inFlight: s.inFlight, maxConcurrent: s.maxConcurrent,
            connectionsAccepted: acceptor.connectionsAccepted, openConnections: acceptor.openConnections)
    }

    init(acceptor: Acceptor, hostKey: String, tracker: FaultServer.ConcurrencyTracker?) {
        self.acceptor = acceptor
        self.hostKey = hostKey
        self.tracker = tracker
    }

    // MARK: Lifecycle

    @discardableResult
    func stop(timeout: TimeInterval) -> Bool {
        let finished = acceptor.stop(timeout: timeout)
        if finished {
            // Drop handlers: breaks retain cycles from handlers that capture their own server.
            state.withLock { s in
                s.routes.removeAll()
                s.fallback = nil
            }
        }
        return finished
    }

    // MARK: Connection

    enum Action { case keepAlive, close, reset }

    /// Serves one connection until it ends; the acceptor closes the socket afterwards.
    func serve(fd: Int32, connectionID: Int) {
        var buffer: [UInt8] = []
        var index = 0
        var action = Action.close

        loop: while !acceptor.isStopping {
            let head: [UInt8]
            switch readHead(fd: fd, buffer: &buffer) {
            case .closed:
                break loop
            case .tooLarge:
                _ = sendAll(fd, Array("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
                break loop
            case .head(let bytes):
                head = bytes
            }
            guard let parsed = HeadParser.parse(head) else {
                _ = sendAll(fd, Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
                break loop
            }

            // Request body: skip (but keep) Content-Length bytes; anything else can't be delimited → close after.
            var keepAlive = true
            var body = Data()
            if parsed.headers.contains("Transfer-Encoding") {
                keepAlive = false
            } else if let lengthText = parsed.headers["Content-Length"] {
                guard let length = Int(lengthText.trimmingCharacters(in: .whitespaces)), length >= 0 else {
                    _ = sendAll(fd, Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
                    break loop
                }
                if length > buffer.count,
                   parsed.headers["Expect"]?.lowercased() == "100-continue" {
                    _ = sendAll(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                }
                guard let bytes = readBody(fd: fd, length: length, buffer: &buffer) else { break loop }
                body = Data(bytes)
            }

            let request = Request(
                method: parsed.method, target: parsed.target, path: parsed.path, query: parsed.query,
                version: parsed.version, requestLine: parsed.requestLine, headers: parsed.headers,
                body: body, receivedAt: Date(), receivedInstant: .now,
                connectionID: connectionID, indexOnConnection: index)
            keepAlive = keepAlive && request.wantsKeepAlive

            let handler = begin(request, fd: fd)
            let response = handler(request)
            // The request stops counting as in flight just before its last byte is sent: a
            // client that has the whole response may start its next request at once, and must
            // not be counted twice because this thread had not yet run its bookkeeping.
            var ended = false
            action = write(response, for: request, fd: fd, keepAlive: keepAlive) {
                if !ended { ended = true; end(connectionID) }
            }
            if !ended { end(connectionID) }
            index += 1
            if action != .keepAlive { break loop }
        }

        if action == .reset {
            var lingerOption = linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingerOption, socklen_t(MemoryLayout<linger>.size))
        } else {
            _ = shutdown(fd, Int32(SHUT_WR))
        }
    }

    /// Records the request, counts it in flight, and picks its handler (advancing the route's sequence).
    ///
    /// A request whose client has hung up (it cut the connection, e.g. after refusing the head)
    /// is over for the client even if this server's thread has not noticed yet: such requests
    /// stop counting now, before the new one is counted.
    private func begin(_ request: Request, fd: Int32) -> FaultServer.Handler {
        let abandoned = state.update { s -> Int in
            let gone = s.inFlightConnections.filter { Self.peerHungUp($0.value) }.map(\.key)
            for id in gone { s.inFlightConnections[id] = nil }
            s.inFlight -= gone.count
            return gone.count
        }
        for _ in 0..<abandoned { tracker?.end(host: hostKey) }
        // Tracker first: once the request is observable through the server (waitForRequests), the
        // shared tracker already counts it.
        tracker?.begin(host: hostKey)
        return state.update { s -> FaultServer.Handler in
            log.append(request)  // under the state lock: a test that saw it sees it in flight too
            s.inFlightConnections[request.connectionID] = fd
            s.inFlight += 1
            s.maxConcurrent = max(s.maxConcurrent, s.inFlight)
            let key = s.routes[request.target] != nil ? request.target : request.path
            if var route = s.routes[key] {
                let handler = route.handlers[min(route.served, route.handlers.count - 1)]
                route.served += 1
                s.routes[key] = route
                return handler
            }
            return s.fallback ?? { _ in Response.text("not found\n", status: 404) }
        }
    }

    /// Ends the connection's request, unless `begin` already ended it as abandoned.
    private func end(_ connectionID: Int) {
        let counted = state.update { s -> Bool in
            guard s.inFlightConnections.removeValue(forKey: connectionID) != nil else { return false }
            s.inFlight -= 1
            return true
        }
        if counted { tracker?.end(host: hostKey) }
    }

    /// Whether the client closed (or reset) its side of the connection.
    static func peerHungUp(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: pollRDHUP, revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return false }
        return entry.revents & (pollRDHUP | Int16(POLLHUP | POLLERR)) != 0
    }

    // MARK: Reading

    enum HeadResult { case head([UInt8]), closed, tooLarge }

    private func readHead(fd: Int32, buffer: inout [UInt8]) -> HeadResult {
        var scanFrom = 0
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // Tolerate empty lines before the request line (RFC 9112 §2.2).
            let leading = buffer.prefix { $0 == 13 || $0 == 10 }.count
            if leading > 0 {
                buffer.removeFirst(leading)
                scanFrom = 0
            }
            if let (headEnd, consumed) = Self.findHeadEnd(buffer, from: scanFrom) {
                let head = Array(buffer[..<headEnd])
                buffer.removeFirst(consumed)
                return .head(head)
            }
            if buffer.count > Self.maxHeadBytes { return .tooLarge }
            scanFrom = max(0, buffer.count - 3)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer.append(contentsOf: chunk[..<n])
            } else if n < 0, errno == EINTR {
                continue
            } else {
                return .closed
            }
        }
    }

    /// Finds the blank line ending the head: returns (end of the last header line, bytes to consume).
    static func findHeadEnd(_ b: [UInt8], from start: Int) -> (Int, Int)? {
        var i = start
        while i < b.count {
            if b[i] == 10 {
                if i + 1 < b.count, b[i + 1] == 10 { return (i, i + 2) }
                if i + 2 < b.count, b[i + 1] == 13, b[i + 2] == 10 { return (i, i + 3) }
            }
            i += 1
        }
        return nil
    }

    private func readBody(fd: Int32, length: Int, buffer: inout [UInt8]) -> [UInt8]? {
        var body = [UInt8]()
        let fromBuffer = min(length, buffer.count)
        body.append(contentsOf: buffer[..<fromBuffer])
        buffer.removeFirst(fromBuffer)
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while body.count < length {
            let want = min(chunk.count, length - body.count)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, want, 0) }
            if n > 0 {
                body.append(contentsOf: chunk[..<n])
            } else if n < 0, errno == EINTR {
                continue
            } else {
                return nil
            }
        }
        return body
    }

    // MARK: Writing

    /// Sends all but the last byte, calls `beforeLastByte`, then sends the last byte: the client
    /// cannot see the response complete before the call.
    private func sendAll(_ fd: Int32, _ bytes: [UInt8], callingBeforeLastByte beforeLastByte: () -> Void) -> Bool {
        guard let last = bytes.last else { beforeLastByte(); return true }
        guard sendAll(fd, Array(bytes.dropLast())) else { return false }
        beforeLastByte()
        return sendAll(fd, [last])
    }

    private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { sendAll(fd, $0) }
    }

    private func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n > 0 {
                offset += n
            } else if n < 0, errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    enum PauseResult { case elapsed, stopped, peerClosed }

    /// Waits `seconds` (nil = forever) but returns early when the server stops or the peer hangs up.
    private func pause(_ seconds: TimeInterval?, fd: Int32) -> PauseResult {
        let deadline = seconds.map { ContinuousClock.now + .seconds(max(0, $0)) }
        while true {
            if acceptor.isStopping { return .stopped }
            var timeout: Int32 = -1
            if let deadline {
                let remaining = deadline - .now
                if remaining <= .zero { return .elapsed }
                let (s, atto) = remaining.components
                let ms = s * 1000 + atto / 1_000_000_000_000_000 + 1
                timeout = Int32(clamping: ms)
            }
            var fds = [
                pollfd(fd: fd, events: Self.pollRDHUP, revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let rc = poll(&fds, 2, timeout)
            if rc < 0 {
                if errno == EINTR { continue }
                return .peerClosed
            }
            if fds[1].revents != 0 { return .stopped }
            if fds[0].revents & (Self.pollRDHUP | Int16(POLLHUP | POLLERR | POLLNVAL)) != 0 { return .peerClosed }
        }
    }

    private func pause(_ stall: Response.Stall, fd: Int32) -> PauseResult {
        switch stall {
        case .seconds(let s): pause(s, fd: fd)
        case .forever: pause(nil, fd: fd)
        }
    }

    /// Writes the response; calls `beforeLastByte` just before the send that completes a
    /// response the client can see as complete (never for cut, endless or close-delimited ones).
    private func write(_ r: Response, for request: Request, fd: Int32, keepAlive: Bool,
                       beforeLastByte: () -> Void) -> Action {
        if r.delayBeforeHeaders > 0, pause(r.delayBeforeHeaders, fd: fd) != .elapsed { return .close }
        if r.answersNothing { return r.ending == .reset ? .reset : .close }

        let bodyForbidden = (100..<200).contains(r.status) || r.status == 204 || r.status == 304
        let sendsBody = request.method != "HEAD" && !bodyForbidden
        var framing = r.framing
        if r.endless, framing == .contentLength, r.declaredContentLength == nil { framing = .closeDelimited }
        let userClose = r.headers.values("Connection").contains { $0.lowercased().contains("close") }
        let closeAfter = r.closesConnection || !keepAlive || userClose || framing == .closeDelimited
            || r.endless || r.ending != .normal || r.bodyByteLimit != nil

        var head = "HTTP/1.1 \(r.status) \(r.reason ?? FaultServer.reasonPhrase(r.status))\r\n"
        for field in r.headers { head += "\(field.name): \(field.value)\r\n" }
        if !bodyForbidden {
            switch framing {
            case .contentLength:
                if !r.headers.contains("Content-Length") {
                    head += "Content-Length: \(r.declaredContentLength ?? r.body.count)\r\n"
                }
            case .chunked:
                if !r.headers.contains("Transfer-Encoding") { head += "Transfer-Encoding: chunked\r\n" }
            case .closeDelimited:
                break
            }
        }
        if closeAfter, !r.headers.contains("Connection") { head += "Connection: close\r\n" }
        head += "\r\n"
        let completes = framing != .closeDelimited && !r.endless && r.bodyByteLimit == nil
            && (r.declaredContentLength == nil || r.declaredContentLength == r.body.count)
            && !(r.omitsChunkedTerminator && framing != .contentLength)
        let headIsLast = !sendsBody || (framing == .contentLength && r.body.isEmpty)
        if completes, headIsLast, r.extraBytes.isEmpty, r.stallAfterHeaders == nil {
            guard sendAll(fd, Array(head.utf8), callingBeforeLastByte: beforeLastByte) else { return .close }
        } else {
            guard sendAll(fd, Array(head.utf8)) else { return .close }
        }

        if let stall = r.stallAfterHeaders, pause(stall, fd: fd) != .elapsed { return .close }
        if sendsBody {
            let bodyEnds = completes && r.extraBytes.isEmpty
            guard writeBody(r, framing: framing, fd: fd, beforeLastByte: { if bodyEnds { beforeLastByte() } }) else { return .close }
        }
        if !r.extraBytes.isEmpty {
            guard sendAll(fd, Array(r.extraBytes), callingBeforeLastByte: completes ? beforeLastByte : {}) else { return .close }
        }
        switch r.ending {
        case .normal: return closeAfter ? .close : .keepAlive
        case .close: return .close
        case .reset: return .reset
        case .stall(let stall):
            _ = pause(stall, fd: fd)
            return .close
        }
    }

    private static let defaultEndlessPattern: [UInt8] = (0..<256).map { UInt8($0) }

    /// Returns false if the connection failed or the server stopped mid-body.
    private func writeBody(_ r: Response, framing: Response.Framing, fd: Int32, beforeLastByte: () -> Void) -> Bool {
        let chunked: Bool
        let chunkSize: Int
        if case .chunked(let size) = framing {
            chunked = true
            chunkSize = size
        } else {
            chunked = false
            chunkSize = 64 * 1024
        }
        let segmentSize = r.pacing?.bytesPerChunk ?? chunkSize
        let payload: [UInt8] = r.endless && r.body.isEmpty ? Self.defaultEndlessPattern : Array(r.body)
        // For endless bodies: the pattern repeated enough that any segment is a contiguous slice.
        var ring: [UInt8] = []
        if r.endless {
            let copies = (segmentSize + payload.count - 1) / payload.count + 1
            ring.reserveCapacity(copies * payload.count)
            for _ in 0..<copies { ring.append(contentsOf: payload) }
        }
        var ringPosition = 0
        var offset = 0
        var sent = 0
        var first = true

        while r.endless || offset < payload.count {
            if let limit = r.bodyByteLimit, sent >= limit { return true }  // cut: no terminator
            if acceptor.isStopping { return false }
            if !first, let pacing = r.pacing, pacing.delay > 0,
               pause(pacing.delay, fd: fd) != .elapsed { return false }
            first = false

            let segment: ArraySlice<UInt8>
            if r.endless {
                segment = ring[ringPosition..<(ringPosition + segmentSize)]
                ringPosition = (ringPosition + segmentSize) % payload.count
            } else {
                segment = payload[offset..<min(offset + segmentSize, payload.count)]
                offset += segment.count
            }
            var allowed = segment.count
            if let limit = r.bodyByteLimit { allowed = min(allowed, limit - sent) }

            var out: [UInt8] = []
            out.reserveCapacity(allowed + 16)
            if chunked { out.append(contentsOf: Array((String(segment.count, radix: 16) + "\r\n").utf8)) }
            out.append(contentsOf: segment.prefix(allowed))
            if chunked, allowed == segment.count { out.append(contentsOf: [13, 10]) }
            if !chunked, !r.endless, offset == payload.count {
                guard sendAll(fd, out, callingBeforeLastByte: beforeLastByte) else { return false }
            } else {
                guard sendAll(fd, out) else { return false }
            }
            sent += allowed
            if allowed < segment.count { return true }  // cut mid-segment
        }
        if chunked, !r.omitsChunkedTerminator {
            guard sendAll(fd, Array("0\r\n\r\n".utf8), callingBeforeLastByte: beforeLastByte) else { return false }
        }
        return true
    }
}

// MARK: - Request head parsing

struct ParsedHead {
    var requestLine: String
    var method: String
    var target: String
    var path: String
    var query: String?
    var version: String
    var headers: FaultServer.Headers
}

enum HeadParser {
    /// Parses request line + header fields (CRLF or bare LF line ends, obs-fold joined). Nil = malformed.
    static func parse(_ bytes: [UInt8]) -> ParsedHead? {
        // Split on bytes: as Characters, "\r\n" is a single grapheme and would not split on "\n".
        var lines = bytes.split(separator: 10, omittingEmptySubsequences: false).map { line -> String in
            String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self)
        }
        guard !lines.isEmpty else { return nil }
        let requestLine = String(lines.removeFirst())
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/"), !parts[0].isEmpty else { return nil }
        let method = String(parts[0])
        let target = String(parts[1])
        let version = String(parts[2])

        var fields: [FaultServer.Headers.Field] = []
        for line in lines {
            if line.isEmpty { continue }
            if line.first == " " || line.first == "\t" {
                guard !fields.isEmpty else { return nil }
                fields[fields.count - 1].value += " " + line.trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "\t" }) else { return nil }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            fields.append(.init(name: name, value: value))
        }

        var pathAndQuery = Substring(target)
        if let scheme = pathAndQuery.range(of: "://") {  // absolute-form: keep the path part
            let afterAuthority = pathAndQuery[scheme.upperBound...]
            pathAndQuery = afterAuthority.firstIndex(of: "/").map { afterAuthority[$0...] } ?? "/"
        }
        let path: String
        var query: String?
        if let q = pathAndQuery.firstIndex(of: "?") {
            path = String(pathAndQuery[..<q])
            query = String(pathAndQuery[pathAndQuery.index(after: q)...])
        } else {
            path = String(pathAndQuery)
        }
        return ParsedHead(
            requestLine: requestLine, method: method, target: target, path: path, query: query,
            version: version, headers: FaultServer.Headers(fields))
    }
}
