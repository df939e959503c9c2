import CCurl
import Foundation
import Synchronization

/// One fetch on a `CurlMultiLoop`: the options it sets on its easy handle, the callbacks that
/// turn libcurl's header lines and body pieces into one `ResponseHead` and `BodySink` calls, the
/// redirects it follows, and how it ends.
///
/// Guarantees: the sink's `head` is called once, with the final response's head, before any of
/// its body bytes reach `body`; a redirect's head and body never reach the sink; a refused head
/// writes nothing (a small body is read to its end and dropped so the connection is kept, a
/// large one cut); `onEnd` is called exactly once.
///
/// `@unchecked Sendable`: once submitted, every property but `cancelRequested` is read and
/// written only on the loop's thread (the libcurl callbacks run there too); the submitting task
/// hands it over through the loop's locked inbox and touches only `cancelRequested` after that.
final class CurlEasyTransfer: @unchecked Sendable {
    /// What the response being read is for.
    private enum Phase {
        /// Reading header lines.
        case head
        /// Streaming an accepted body to the sink.
        case body
        /// Reading a refused body to its end and dropping it, until the deadline.
        case draining(deadline: UInt64)
        /// Reading a redirect's body to its end; then the next hop goes to `target`.
        case redirect(target: URL)
    }

    /// How the transfer ended on its handle: with a result, or with another hop to make.
    enum Completion {
        case finished(FetchResult)
        case redirect(URL)
    }

    let request: FetchRequest
    let sink: BodySink
    /// Called once, on the loop's thread, when the transfer ends.
    var onEnd: (@Sendable (FetchResult) -> Void)?
    /// Set from any thread to ask the loop to cancel this transfer.
    let cancelRequested = Atomic<Bool>(false)

    private(set) var url: URL
    private var redirects: RedirectPolicy
    private let started: UInt64
    private var lastActivity: UInt64
    /// Bytes came in since the loop last looked (`expired`), which then moves `lastActivity` to
    /// its own time: the callbacks, a dozen a response, read no clock.
    private var active = false
    private var phase = Phase.head
    private var status = 0
    /// The fields of the response being read that haul reads (see `ResponseHead.namesRead`).
    private var fields: [ResponseHead.Field] = {
        var fields: [ResponseHead.Field] = []
        fields.reserveCapacity(8)  // one allocation, not four as a response's fields come in
        return fields
    }()
    /// Where an obsolete folded line's text goes: the index in `fields` of the field it
    /// continues, or nil when that field is not kept (or there is none).
    private var lastField: Int?
    private var head: ResponseHead?
    private var failure: FetchFailure?
    private var dropped: Int64 = 0
    /// The rate limits of the run (nil: none), shared by the loop's transfers.
    var limits: CurlRateLimits?
    /// Set while a rate limit holds the transfer: when it may go on.
    private(set) var pausedUntil: UInt64?
    /// "host:port" of the current hop, for per-host limits.
    private var hostKey = ""
    /// The easy handle while the transfer runs, and the header list it points to.
    var easy: CurlEasy?
    private var headerList: CurlHeaderList?

    init(request: FetchRequest, sink: BodySink) {
        self.request = request
        self.sink = sink
        url = request.url
        redirects = RedirectPolicy(start: request.url)
        started = Monotonic.now
        lastActivity = started
    }

    // MARK: Options

    /// Whether the environment names any proxy variable (`http_proxy`, `HTTPS_PROXY`,
    /// `no_proxy`…: any name ending in `_proxy`, in any case), read once: haul never changes its
    /// environment. Where none is set, libcurl would find none either.
    static let proxyVariablesSet: Bool = ProcessInfo.processInfo.environment.keys.contains {
        $0.lowercased().hasSuffix("_proxy")
    }

    /// How long libcurl keeps a name it resolved (see `configure`).
    static let dnsCacheSeconds = 1

    /// Sets every option of this hop on `easy` (already reset).
    func configure(_ easy: CurlEasy, options: CurlTransport.Options) {
        self.easy = easy
        easy.set(CURLOPT_URL, url.absoluteString)
        easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        easy.set(CURLOPT_FOLLOWLOCATION, 0)  // haul follows redirects itself (RedirectPolicy)
        easy.set(CURLOPT_NOSIGNAL, 1)
        easy.set(CURLOPT_BUFFERSIZE, options.receiveBufferSize)
        easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        if url.scheme?.lowercased() == "https" {
            // Over TLS, wait to multiplex on a connection being set up (it may be HTTP/2) rather
            // than open another. Never over plain http: there libcurl 7.88 then queues the
            // transfer behind the connection's current one until that one ends.
            easy.set(CURLOPT_PIPEWAIT, 1)
        }
        easy.set(CURLOPT_TCP_KEEPALIVE, 1)
        // libcurl 7.88 walks its whole DNS cache at each name it resolves, so with its default
        // (an entry kept 60 s) a list spread over many hosts cost time in the square of their
        // number: 20,000 jobs over 20,000 hosts (404s) took 16.1 s against 9.5 s with 1 s, and
        // 2.4 s over 20 hosts; callgrind on 4,000 hosts: 5.82 G instructions, 5.42 G with 1 s,
        // 5.60 G with 0 (every connection resolves again). A second is enough for the requests
        // of one host that start together to share one lookup; a host's later requests mostly
        // reuse a connection, which needs none.
        easy.set(CURLOPT_DNS_CACHE_TIMEOUT, Self.dnsCacheSeconds)
        easy.set(CURLOPT_USERAGENT, request.userAgent ?? options.userAgent)
        if let file = options.caFile { easy.set(CURLOPT_CAINFO, file) }
        if let folder = options.caPath { easy.set(CURLOPT_CAPATH, folder) }
        let connection = options.connection
        if connection.insecure {
            easy.set(CURLOPT_SSL_VERIFYPEER, 0)
            easy.set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        // Where no proxy variable is set at all, libcurl is told so ("": none), so it does not
        // look for them in the environment again for every transfer (five or six getenv calls).
        if let proxy = connection.proxy ?? (Self.proxyVariablesSet ? nil : "") { easy.set(CURLOPT_PROXY, proxy) }
        if let hosts = connection.noProxy ?? (Self.proxyVariablesSet ? nil : "") { easy.set(CURLOPT_NOPROXY, hosts) }
        if connection.http11Only { easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)) }
        // .netrc credentials are looked up for the job's own origin only, like the credential
        // headers: libcurl would look up each hop's host (a `default` entry matches any, and a
        // `machine` entry names no port).
        if let netrc = request.netrcFile, RedirectPolicy.sameOrigin(request.url, url) {
            easy.set(CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
            easy.set(CURLOPT_NETRC_FILE, netrc)
        }
        if connection.perHostRate != nil {
            // As the queue keys hosts (an IPv4 address in any spelling is one host).
            hostKey = (try? HTTPURL(url.absoluteString).hostKey)
                ?? "\(url.host?.lowercased() ?? ""):\(url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80))"
        }
        // No CURLOPT_ACCEPT_ENCODING: bytes are never decoded, and identity is asked for.
        var lines = ["Accept-Encoding: identity"]
        for (name, value) in request.headers(toward: url) where name.lowercased() != "accept-encoding" {
            lines.append("\(name): \(value)")
        }
        let list = CurlHeaderList(lines)
        headerList = list
        easy.set(CURLOPT_HTTPHEADER, list: list.raw)
        let context = Unmanaged.passUnretained(self).toOpaque()
        easy.set(CURLOPT_PRIVATE, pointer: context)
        easy.set(CURLOPT_HEADERFUNCTION, function: CurlCallbacks.header)
        easy.set(CURLOPT_HEADERDATA, pointer: context)
        easy.set(CURLOPT_WRITEFUNCTION, function: CurlCallbacks.write)
        easy.set(CURLOPT_WRITEDATA, pointer: context)
    }

    /// Lets go of the handle and the header list once the handle has left the multi handle.
    func detach() -> CurlEasy? {
        defer { easy = nil; headerList = nil }
        return easy
    }

    // MARK: Callbacks (the loop's thread)

    /// One header line (with its CRLF). Returns false to stop the transfer. Parsed as bytes:
    /// Foundation's trimming cost about 290 k instructions a response (callgrind, 2,000 files);
    /// and a header haul does not read is skipped without making a string of it.
    func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        active = true
        guard case .head = phase else { return true }  // trailers of a chunked body
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        if end == 0 { return headEnded() }
        if end >= 5, bytes[0] == 0x48, bytes[1] == 0x54, bytes[2] == 0x54, bytes[3] == 0x50, bytes[4] == 0x2F {  // "HTTP/"
            // A new response (after a 100 Continue, say): its status, and no headers yet.
            status = Self.status(in: bytes, end: end)
            fields.removeAll(keepingCapacity: true)
            lastField = nil
            return true
        }
        if bytes[0] == 0x20 || bytes[0] == 0x09 {
            // An obsolete folded line continues the previous header.
            if let index = lastField { fields[index].value += " " + Self.text(bytes, Self.trimmed(bytes, 0..<end)) }
            return true
        }
        lastField = nil
        guard let colon = bytes[..<end].firstIndex(of: 0x3A),
              let name = Self.nameRead(bytes, Self.trimmed(bytes, 0..<colon)) else { return true }
        lastField = ResponseHead.Field.add(name, Self.text(bytes, Self.trimmed(bytes, (colon + 1)..<end)), to: &fields)
        return true
    }

    /// `ResponseHead.namesRead` as bytes, to match header names without making strings of them.
    private static let namesRead = ResponseHead.namesRead.map { (name: $0, bytes: Array($0.utf8)) }

    /// The name in `namesRead` that `range` of `bytes` spells, in any case, or nil.
    private static func nameRead(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String? {
        candidates: for candidate in namesRead where candidate.bytes.count == range.count {
            for (offset, expected) in candidate.bytes.enumerated() {
                let byte = bytes[range.lowerBound + offset]
                if (0x41...0x5A).contains(byte) ? byte | 0x20 != expected : byte != expected { continue candidates }
            }
            return candidate.name
        }
        return nil
    }

    /// The status code of a status line ("HTTP/1.1 200 OK", "HTTP/2 404"), or 0.
    private static func status(in bytes: UnsafeRawBufferPointer, end: Int) -> Int {
        guard var index = bytes[..<end].firstIndex(of: 0x20) else { return 0 }
        while index < end, bytes[index] == 0x20 { index += 1 }
        var status = 0
        var digits = 0
        while index < end, digits < 3, (0x30...0x39).contains(bytes[index]) {
            status = status * 10 + Int(bytes[index] - 0x30)
            index += 1
            digits += 1
        }
        return digits == 3 ? status : 0
    }

    /// `range` without the spaces and tabs at either end.
    private static func trimmed(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Range<Int> {
        var lower = range.lowerBound
        var upper = range.upperBound
        while lower < upper, bytes[lower] == 0x20 || bytes[lower] == 0x09 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09 { upper -= 1 }
        return lower..<upper
    }

    private static func text(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// The blank line after a response's headers: decide what its body is for.
    private func headEnded() -> Bool {
        if (100..<200).contains(status) { return true }  // an interim response; the real one follows
        if RedirectPolicy.isRedirect(status) {
            let target = RedirectPolicy.target(location: fields.first(where: { $0.name == "location" })?.value, from: url)
            if let refusal = redirects.follow(to: target) {
                failure = .badRedirect(refusal)
                return false
            }
            phase = .redirect(target: target!)
            return true
        }
        let head = ResponseHead(status: status, fields: fields, url: url)
        self.head = head
        switch sink.head(head) {
        case .accept:
            phase = .body
            return true
        case .reject(let reason):
            failure = .rejected(reason)
            guard let length = head.contentLength, length <= RefusedBody.limit else { return false }
            // Read the small body to its end instead of cutting the connection: the server then
            // sees the request finish before haul sends another one on it.
            phase = .draining(deadline: Monotonic.now + Monotonic.nanoseconds(RefusedBody.time))
            return true
        }
    }

    /// What the write callback answers: the piece was taken, the transfer must stop, or wait.
    enum BodyAnswer { case taken, stop, pause }

    /// Body bytes.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> BodyAnswer {
        active = true
        switch phase {
        case .body:
            if let limits, let wait = limits.admit(bytes.count, host: hostKey, now: Monotonic.now) {
                pausedUntil = wait  // libcurl keeps the piece and hands it over again once unpaused
                return .pause
            }
            do {
                try sink.body(bytes)  // a blocking write: a slow disk stops the socket being read
                return .taken
            } catch {
                failure = .rejected(String(describing: error))
                return .stop
            }
        case .draining, .redirect:
            dropped += Int64(bytes.count)
            return dropped <= RefusedBody.limit ? .taken : .stop
        case .head:
            failure = .transport("the server sent a body before its headers ended")
            return .stop
        }
    }

    /// Takes the transfer out of a rate limit's pause when its time has come; true when it did.
    func unpauseIfDue(now: UInt64) -> Bool {
        guard let until = pausedUntil, until <= now, let easy else { return false }
        pausedUntil = nil
        lastActivity = now  // waiting for the limit is not a stall
        haul_easy_unpause(easy.raw)  // may hand the kept piece to the write callback at once
        return true
    }

    // MARK: Ending

    /// Why the transfer must be stopped now, if it must (`now` in monotonic nanoseconds).
    func expired(now: UInt64) -> FetchFailure? {
        if active {
            active = false
            lastActivity = now
        }
        if case .draining(let deadline) = phase, now > deadline { return failure }
        if let total = request.totalTimeout, now > started + Self.nanoseconds(total) { return .timedOut(total) }
        if now > lastActivity + Self.nanoseconds(request.stallTimeout) { return .stalled(request.stallTimeout) }
        return nil
    }

    /// The next moment `expired` could say yes.
    var nextDeadline: UInt64 {
        var deadline = lastActivity + Self.nanoseconds(request.stallTimeout)
        if let total = request.totalTimeout { deadline = min(deadline, started + Self.nanoseconds(total)) }
        if case .draining(let drain) = phase { deadline = min(deadline, drain) }
        if let pausedUntil { deadline = min(deadline, pausedUntil) }
        return deadline
    }

    /// The handle finished with `code` (or was stopped for `stopped`): the result, or the next hop.
    func complete(_ code: CURLcode, stopped: FetchFailure? = nil) -> Completion {
        if stopped == nil, failure == nil, case .redirect(let target) = phase {
            url = target
            phase = .head
            pausedUntil = nil
            status = 0
            fields.removeAll(keepingCapacity: true)
            lastField = nil
            dropped = 0
            return .redirect(target)
        }
        if failure == nil, stopped == nil, code == CURLE_OK {
            guard head != nil else { return .finished(FetchResult(head: nil, failure: .transport("the server sent no response"))) }
            return .finished(FetchResult(head: head, failure: nil))
        }
        var ending = failure ?? stopped ?? CurlFailure.failure(code, message: easy?.errorMessage ?? "",
                                                             osErrno: easy?.info(CURLINFO_OS_ERRNO) ?? 0, responded: head != nil)
        if head == nil {
            // Out of time before the request could even be sent (libcurl's pre-transfer time is
            // 0: no connection, or no TLS session, in all that time): the host cannot be
            // reached, as when it refuses. A connection that took the request and stayed silent
            // is this request's stall, not the host's (one slow path must not fail the rest).
            if case .stalled(let seconds) = ending, easy?.offsetInfo(CURLINFO_PRETRANSFER_TIME_T) == 0 {
                ending = .unreachable("no connection within \(FetchFailure.seconds(seconds)) s")
            }
            ending = redirects.failureAtEnd(ending, current: url)
        }
        return .finished(FetchResult(head: head, failure: ending))
    }

    private static func nanoseconds(_ seconds: TimeInterval) -> UInt64 {
        seconds >= 1e9 ? UInt64.max / 2 : UInt64(max(0, seconds) * 1e9)
    }
}

/// The C callbacks libcurl calls; each finds its transfer through the context pointer, which the
/// loop's table keeps alive while the handle exists.
enum CurlCallbacks {
    static let header: curl_write_callback = { data, size, count, context in
        let length = size * count
        guard let data, let context else { return 0 }
        let transfer = Unmanaged<CurlEasyTransfer>.fromOpaque(context).takeUnretainedValue()
        return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
    }

    static let write: curl_write_callback = { data, size, count, context in
        let length = size * count
        guard let context else { return 0 }
        let transfer = Unmanaged<CurlEasyTransfer>.fromOpaque(context).takeUnretainedValue()
        guard let data, length > 0 else { return length }
        switch transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: length)) {
        case .taken: return length
        case .stop: return 0
        case .pause: return Int(CURL_WRITEFUNC_PAUSE)
        }
    }
}
