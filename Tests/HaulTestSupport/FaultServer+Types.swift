import Foundation

extension FaultServer {
    /// Scripted route body: decides the response for one request. Runs on the connection's own thread,
    /// so it may block (e.g. on a `Gate`) without affecting other connections.
    public typealias Handler = @Sendable (Request) -> Response

    // MARK: - Headers

    /// Ordered header fields with case-insensitive lookup. Duplicates are kept in order.
    public struct Headers: Sendable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
        public struct Field: Sendable, Hashable {
            public var name: String
            public var value: String
            public init(name: String, value: String) {
                self.name = name
                self.value = value
            }
        }

        public private(set) var fields: [Field]

        public init(_ fields: [Field] = []) {
            self.fields = fields
        }

        public init(_ pairs: [(String, String)]) {
            self.fields = pairs.map { Field(name: $0.0, value: $0.1) }
        }

        public init(dictionaryLiteral elements: (String, String)...) {
            self.init(elements)
        }

        /// First value of the named field, case-insensitively; `nil` if absent.
        public subscript(name: String) -> String? {
            let key = name.lowercased()
            return fields.first { $0.name.lowercased() == key }?.value
        }

        /// All values of the named field, in order.
        public func values(_ name: String) -> [String] {
            let key = name.lowercased()
            return fields.filter { $0.name.lowercased() == key }.map(\.value)
        }

        public func contains(_ name: String) -> Bool { self[name] != nil }

        /// Appends a field (keeps existing ones with the same name).
        public mutating func add(_ name: String, _ value: String) {
            fields.append(Field(name: name, value: value))
        }

        /// Replaces every field with this name by a single one.
        public mutating func set(_ name: String, _ value: String) {
            remove(name)
            add(name, value)
        }

        public mutating func remove(_ name: String) {
            let key = name.lowercased()
            fields.removeAll { $0.name.lowercased() == key }
        }

        public var count: Int { fields.count }

        public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

        public var description: String {
            fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
        }
    }

    // MARK: - Request

    /// One parsed request, as the handler sees it and as the server records it.
    public struct Request: Sendable, CustomStringConvertible {
        /// e.g. `GET`.
        public let method: String
        /// The request-target exactly as sent (`/a/b?x=1`).
        public let target: String
        /// The target's path, without the query (absolute-form targets are reduced to their path).
        public let path: String
        /// The query string after `?`, if any.
        public let query: String?
        /// e.g. `HTTP/1.1`.
        public let version: String
        /// The raw request line, without CRLF.
        public let requestLine: String
        public let headers: Headers
        /// The request body (read via Content-Length; empty otherwise).
        public let body: Data
        /// Wall-clock time the request was fully received.
        public let receivedAt: Date
        /// Monotonic time the request was fully received (use for intervals, e.g. Retry-After checks).
        public let receivedInstant: ContinuousClock.Instant
        /// Which accepted connection carried it (1-based, per server), to observe keep-alive reuse.
        public let connectionID: Int
        /// 0 for the first request on its connection, 1 for the next, ...
        public let indexOnConnection: Int

        /// Case-insensitive header lookup.
        public func header(_ name: String) -> String? { headers[name] }

        /// Whether the client asked to keep the connection open (HTTP/1.1 default; HTTP/1.0 needs keep-alive).
        public var wantsKeepAlive: Bool {
            let tokens = headers.values("Connection")
                .flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if tokens.contains("close") { return false }
            if version == "HTTP/1.0" { return tokens.contains("keep-alive") }
            return true
        }

        public var description: String { "\(requestLine) [conn \(connectionID)#\(indexOnConnection)]" }
    }

    // MARK: - Response

    /// A scripted response: status, headers, body, framing and optional faults.
    ///
    /// Wire order: [delayBeforeHeaders] → status line + headers → [stallAfterHeaders] → body (paced by
    /// `pacing`, cut after `bodyByteLimit` payload bytes, repeated forever if `endless`) → chunked
    /// terminator (unless cut or `omitsChunkedTerminator`) → `extraBytes` → `ending`.
    public struct Response: Sendable {
        public enum Framing: Sendable, Equatable {
            /// `Content-Length` (the body's size, or `declaredContentLength`). Default.
            case contentLength
            /// `Transfer-Encoding: chunked`, payload split into chunks of `chunkSize` (or `pacing.bytesPerChunk`).
            case chunked(chunkSize: Int)
            /// No length at all: the body ends when the server closes the connection.
            case closeDelimited
        }

        public enum Stall: Sendable, Equatable {
            /// Silence for this long, then carry on.
            case seconds(TimeInterval)
            /// Silence until the server stops or the client disconnects.
            case forever
        }

        /// What happens to the connection once the body bytes (and extra bytes) are written.
        public enum Ending: Sendable, Equatable {
            /// Keep the connection alive if HTTP allows it, else close it gracefully.
            case normal
            /// Close gracefully (FIN) — with a cut body this is a truncated response.
            case close
            /// Abortive close: `SO_LINGER` 0 then close, so the client sees a connection reset (RST).
            case reset
            /// Go silent, then close gracefully.
            case stall(Stall)
        }

        public struct Pacing: Sendable, Equatable {
            public var bytesPerChunk: Int
            public var delay: TimeInterval
            public init(bytesPerChunk: Int, delay: TimeInterval) {
                self.bytesPerChunk = max(1, bytesPerChunk)
                self.delay = delay
            }
        }

        public var status: Int
        /// Reason phrase; `nil` uses the standard one for `status`.
        public var reason: String?
        /// Sent as given. The server adds Content-Length / Transfer-Encoding / Connection: close only
        /// when the field is not already present here.
        public var headers: Headers
        public var body: Data
        public var framing: Framing = .contentLength
        /// Overrides the Content-Length value sent (the body sent is still `body`).
        public var declaredContentLength: Int?
        public var delayBeforeHeaders: TimeInterval = 0
        public var stallAfterHeaders: Stall?
        public var pacing: Pacing?
        /// Send only this many body payload bytes (then `ending` applies; the chunked terminator is skipped).
        public var bodyByteLimit: Int?
        /// Repeat `body` (or a default pattern if empty) until the client disconnects or the server stops.
        public var endless: Bool = false
        public var omitsChunkedTerminator: Bool = false
        /// Bytes written after the body (e.g. one byte beyond Content-Length).
        public var extraBytes: Data = Data()
        public var ending: Ending = .normal
        /// Force `Connection: close` and close after this response.
        public var closesConnection: Bool = false
        /// Nothing is written: the connection is closed (or reset, with `ending: .reset`) as
        /// soon as the request is read, as by a host that is down behind a load balancer.
        public var answersNothing: Bool = false

        public init(status: Int = 200, reason: String? = nil, headers: Headers = [:], body: Data = Data()) {
            self.status = status
            self.reason = reason
            self.headers = headers
            self.body = body
        }

        public init(status: Int = 200, reason: String? = nil, headers: Headers = [:], body: String) {
            self.init(status: status, reason: reason, headers: headers, body: Data(body.utf8))
        }

        // Declarative constructors.

        public static func ok(_ body: Data, headers: Headers = [:]) -> Response {
            Response(status: 200, headers: headers, body: body)
        }

        public static func text(_ text: String, status: Int = 200, headers: Headers = [:]) -> Response {
            var headers = headers
            if !headers.contains("Content-Type") { headers.add("Content-Type", "text/plain; charset=utf-8") }
            return Response(status: status, headers: headers, body: Data(text.utf8))
        }

        /// A bodiless (Content-Length: 0) response with the given status, e.g. `.status(503, headers: ["Retry-After": "1"])`.
        public static func status(_ status: Int, reason: String? = nil, headers: Headers = [:]) -> Response {
            Response(status: status, reason: reason, headers: headers)
        }

        /// No answer at all: the connection is closed (`reset`: reset) once the request is read.
        public static func hangUp(reset: Bool = false) -> Response {
            var r = Response(status: 200)
            r.answersNothing = true
            r.ending = reset ? .reset : .close
            return r
        }

        public static func redirect(to location: String, status: Int = 302) -> Response {
            Response(status: status, headers: ["Location": location])
        }

        /// A body that never ends: `pattern` (or a 64 KiB default) repeated until the client disconnects or
        /// the server stops. Close-delimited unless you pick chunked framing or declare a Content-Length.
        public static func endless(status: Int = 200, headers: Headers = [:], pattern: Data = Data()) -> Response {
            var r = Response(status: status, headers: headers, body: pattern)
            r.endless = true
            r.framing = .closeDelimited
            return r
        }

        // Fault / framing modifiers (each returns a modified copy).

        public func delayed(_ seconds: TimeInterval) -> Response {
            var r = self; r.delayBeforeHeaders = seconds; return r
        }

        /// Headers, then silence (for `seconds`, or `.forever` until stop / client disconnect).
        public func stalledAfterHeaders(_ stall: Stall) -> Response {
            var r = self; r.stallAfterHeaders = stall; return r
        }

        public func slowBody(bytesPerChunk: Int, delay: TimeInterval) -> Response {
            var r = self; r.pacing = Pacing(bytesPerChunk: bytesPerChunk, delay: delay); return r
        }

        /// Declares the full length but sends only `bytes` body bytes, then closes gracefully.
        public func truncated(afterBytes bytes: Int) -> Response {
            var r = self; r.bodyByteLimit = bytes; r.ending = .close; return r
        }

        /// Sends `bytes` body bytes then resets the connection (SO_LINGER 0 + close).
        public func reset(afterBytes bytes: Int) -> Response {
            var r = self; r.bodyByteLimit = bytes; r.ending = .reset; return r
        }

        /// Sends `bytes` body bytes then goes silent (then closes).
        public func stalled(afterBytes bytes: Int, _ stall: Stall) -> Response {
            var r = self; r.bodyByteLimit = bytes; r.ending = .stall(stall); return r
        }

        public func chunked(chunkSize: Int = 16 * 1024) -> Response {
            var r = self; r.framing = .chunked(chunkSize: max(1, chunkSize)); return r
        }

        public func closeDelimited() -> Response {
            var r = self; r.framing = .closeDelimited; return r
        }

        /// Chunked body without the final `0\r\n\r\n`, then `ending` (default here: close).
        public func withoutChunkedTerminator(then ending: Ending = .close) -> Response {
            var r = self
            if case .chunked = r.framing {} else { r.framing = .chunked(chunkSize: 16 * 1024) }
            r.omitsChunkedTerminator = true
            r.ending = ending
            return r
        }

        /// Writes `extra` after a correctly-framed body (default: one byte beyond Content-Length).
        public func withExtraBytes(_ extra: Data = Data("X".utf8)) -> Response {
            var r = self; r.extraBytes = extra; return r
        }

        public func declaringContentLength(_ length: Int) -> Response {
            var r = self; r.framing = .contentLength; r.declaredContentLength = length; return r
        }

        public func closingConnection() -> Response {
            var r = self; r.closesConnection = true; return r
        }

        public func ending(_ ending: Ending) -> Response {
            var r = self; r.ending = ending; return r
        }

        public func withHeader(_ name: String, _ value: String) -> Response {
            var r = self; r.headers.add(name, value); return r
        }

        /// This response as a handler (ignores the request).
        public var handler: Handler {
            let response = self
            return { _ in response }
        }
    }

    // MARK: - Gate

    /// A one-shot latch: handlers `wait()` on it, the test `open()`s it. Lets a test hold requests
    /// in flight deterministically (e.g. until `waitForRequests(count:)` reports all have arrived).
    public final class Gate: Sendable {
        private let state = Locked(false)

        public init() {}

        public func open() { state.update { $0 = true } }

        public var isOpen: Bool { state.withLock { $0 } }

        /// Blocks until opened or `timeout` passes; returns whether it is open.
        @discardableResult
        public func wait(timeout: TimeInterval = 10) -> Bool {
            state.wait(timeout: timeout) { $0 }
        }
    }

    // MARK: - Cross-server concurrency tracking

    /// In-flight request counting shared by several servers (each server = one host), to check both a
    /// global cap and per-host caps. Pass the same tracker to each `FaultServer` init.
    public final class ConcurrencyTracker: Sendable {
        struct State: Sendable {
            var inFlight = 0
            var maxConcurrent = 0
            var inFlightByHost: [String: Int] = [:]
            var maxByHost: [String: Int] = [:]
        }

        private let state = Locked(State())

        public init() {}

        /// Requests in flight across all servers using this tracker.
        public var inFlight: Int { state.withLock { $0.inFlight } }
        /// Highest `inFlight` seen across all servers.
        public var maxConcurrent: Int { state.withLock { $0.maxConcurrent } }
        /// Keyed by `FaultServer.hostKey` ("127.0.0.2:PORT").
        public func inFlight(host: String) -> Int { state.withLock { $0.inFlightByHost[host] ?? 0 } }
        public func maxConcurrent(host: String) -> Int { state.withLock { $0.maxByHost[host] ?? 0 } }
        public var maxConcurrentByHost: [String: Int] { state.withLock { $0.maxByHost } }

        /// Forgets maxima (current in-flight counts stay).
        public func resetMaxima() {
            state.update { s in
                s.maxConcurrent = s.inFlight
                s.maxByHost = s.inFlightByHost
            }
        }

        /// Blocks until `inFlight` across all servers reaches `count` (or timeout).
        @discardableResult
        public func waitForInFlight(atLeast count: Int, timeout: TimeInterval = 10) -> Bool {
            state.wait(timeout: timeout) { $0.inFlight >= count }
        }

        func begin(host: String) {
            state.update { s in
                s.inFlight += 1
                s.maxConcurrent = max(s.maxConcurrent, s.inFlight)
                let n = (s.inFlightByHost[host] ?? 0) + 1
                s.inFlightByHost[host] = n
                s.maxByHost[host] = max(s.maxByHost[host] ?? 0, n)
            }
        }

        func end(host: String) {
            state.update { s in
                s.inFlight -= 1
                s.inFlightByHost[host, default: 1] -= 1
            }
        }
    }
}

/// Short aliases for use in tests.
public typealias FaultRequest = FaultServer.Request
public typealias FaultResponse = FaultServer.Response

extension FaultServer {
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 412: "Precondition Failed"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }
}
