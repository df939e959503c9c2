import Foundation

/// One HTTP GET to perform.
public struct FetchRequest: Sendable {
    public var url: URL
    /// Extra request headers (e.g. Range, If-Range). The transport adds its own
    /// `Accept-Encoding: identity` and `User-Agent`.
    public var headers: [String: String]
    /// Cancel when no body byte arrives for this long.
    public var stallTimeout: TimeInterval
    /// Cancel when the whole exchange takes longer than this (nil: no limit).
    public var totalTimeout: TimeInterval?
    /// A User-Agent to send instead of the transport's own (`-A`).
    public var userAgent: String?
    /// A .netrc file to take credentials from, by host (`--netrc`, `--netrc-file`).
    public var netrcFile: String?

    public init(url: URL, headers: [String: String] = [:], stallTimeout: TimeInterval = 60, totalTimeout: TimeInterval? = nil,
                userAgent: String? = nil, netrcFile: String? = nil) {
        self.url = url
        self.headers = headers
        self.stallTimeout = stallTimeout
        self.totalTimeout = totalTimeout
        self.userAgent = userAgent
        self.netrcFile = netrcFile
    }

    /// The headers to send to `target`, a hop of this request: all of them on the request's
    /// own origin, none of the credential headers anywhere else (see `RedirectPolicy`).
    public func headers(toward target: URL) -> [String: String] {
        RedirectPolicy.headers(headers, from: url, toward: target)
    }
}

/// The status line and headers of a response. Header names are matched case-insensitively.
///
/// Guarantees: every header named in `namesRead` that the response carried is kept (a repeated
/// one with its values joined by ", "); a transport may drop the others (libcurl's does: reading
/// only these took its header callback from 15.5 k to 8.7 k instructions a response, callgrind
/// on 2,000 files), so reading a header not named there is a programming error, caught by an
/// assertion in debug builds.
public struct ResponseHead: Sendable, Equatable {
    /// One header field: its name lower-cased, and its value.
    struct Field: Sendable, Equatable {
        let name: String
        var value: String

        /// Adds a field named `name` (lower-cased) to `fields`, or joins `value` to the one
        /// already there with ", " (a repeated header); returns its index.
        @discardableResult
        static func add(_ name: String, _ value: String, to fields: inout [Field]) -> Int {
            if let index = fields.firstIndex(where: { $0.name == name }) {
                fields[index].value += ", " + value
                return index
            }
            fields.append(Field(name: name, value: value))
            return fields.count - 1
        }
    }

    /// The headers haul reads, lower-cased.
    static let namesRead = ["content-length", "content-range", "content-encoding", "content-type", "etag",
                            "last-modified", "date", "retry-after", "location"]

    public let status: Int
    /// The fields kept, in the order they came (a handful: a lookup walks them).
    let fields: [Field]
    /// The URL that answered, after redirects.
    public let url: URL?
    /// The body reaches the sink as the server sent it (libcurl's transport); false where the
    /// transport decodes a Content-Encoding itself (URLSession's).
    public var bodyAsSent = true

    /// A head from a dictionary (URLSession's): only the headers in `namesRead` are kept, as
    /// libcurl's transport keeps them, so both transports' heads read and compare alike. Names
    /// that differ only in case are joined in the order of their names.
    public init(status: Int, headers: [String: String], url: URL?) {
        var fields: [Field] = []
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            let lowered = name.lowercased()
            if Self.namesRead.contains(lowered) { Field.add(lowered, value, to: &fields) }
        }
        self.init(status: status, fields: fields, url: url)
    }

    /// A head whose field names are already lower-case and distinct (as libcurl's transport reads them).
    init(status: Int, fields: [Field], url: URL?) {
        self.status = status
        self.fields = fields
        self.url = url
    }

    /// The headers kept, by lower-cased name.
    public var headers: [String: String] {
        Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    public subscript(_ name: String) -> String? {
        // Names asked for are nearly always written lower-case, as the fields' names are: those
        // are found as given, and only a name with an upper-case letter is lower-cased and
        // looked up again (a scan of the name for one cost about 350 instructions a lookup,
        // eight lookups a response).
        for field in fields where field.name == name { return field.value }
        let hasUpperCase = name.utf8.withContiguousStorageIfAvailable { $0.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) }
            ?? name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A })
        guard hasUpperCase else {
            assert(Self.namesRead.contains(name), "ResponseHead: \(name) is not in namesRead, so libcurl's transport drops it")
            return nil
        }
        return self[name.lowercased()]
    }

    public static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.status == b.status && a.url == b.url && a.headers == b.headers
    }

    /// Content-Length as a number, when present and well-formed. Several fields (or a list)
    /// with one same value count as that value (RFC 9110 §8.6); differing values give nil.
    public var contentLength: Int64? {
        guard let text = self["content-length"] else { return nil }
        guard text.utf8.contains(UInt8(ascii: ",")) else { return Self.length(text) }
        let values = text.split(separator: ",", omittingEmptySubsequences: false).map { Self.length(Substring($0)) }
        guard let first = values.first, let value = first, values.allSatisfy({ $0 == value }) else { return nil }
        return value
    }

    private static func length(_ text: some StringProtocol) -> Int64? {
        // Digits between optional spaces or tabs, read as bytes (Foundation's trimming cost
        // more than the rest of a small file's head).
        var value: Int64 = 0
        var digits = 0
        var ended = false
        for byte in text.utf8 {
            switch byte {
            case 0x20, 0x09:
                if digits > 0 { ended = true }
            case 0x30...0x39 where !ended:
                let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(Int64(byte - 0x30))
                if overflowTimes || overflowSum { return nil }
                value = sum
                digits += 1
            default:
                return nil
            }
        }
        return digits > 0 ? value : nil
    }
}

/// Why a fetch did not complete.
public enum FetchFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// A redirect haul will not follow (scheme, loop, too many hops). Permanent.
    case badRedirect(String)
    /// No byte for the stall timeout.
    case stalled(TimeInterval)
    /// The total timeout passed.
    case timedOut(TimeInterval)
    /// Connection reset mid-body, truncated body, an answer that is not HTTP…
    case transport(String)
    /// Nothing of a response arrived: refused, DNS failure, connect timeout, TLS handshake
    /// failure, closed or reset before any byte. The host, not the job, is at fault.
    case unreachable(String)
    /// The body sink refused the response or a write (its reason).
    case rejected(String)
    /// Cancelled by haul (stopping, or the lease was lost).
    case cancelled
    /// TLS verification failed: waiting will not help. Permanent.
    case untrusted(String)
    /// The transport cannot make this request as asked (an option it lacks). Permanent.
    case unsupported(String)

    public var description: String {
        switch self {
        case .badRedirect(let why): return why
        case .stalled(let seconds): return "stalled: no data for \(Self.seconds(seconds)) s"
        case .timedOut(let seconds): return "timed out after \(Self.seconds(seconds)) s"
        case .transport(let why), .unreachable(let why): return why
        case .rejected(let why): return why
        case .cancelled: return "cancelled"
        case .untrusted(let why), .unsupported(let why): return why
        }
    }

    /// Whole seconds as such ("60"), a fraction as given ("0.5", where `Int` said "0").
    static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(format: "%g", value)
    }
}

/// How every transport treats a body the sink refused: one up to `limit` bytes (an error page)
/// is read to its end and dropped, for at most `time`, so the request ends cleanly at the server
/// and the connection stays open for the next one; a larger one, or a slower one, is cut.
public enum RefusedBody {
    public static let limit: Int64 = 64 * 1024
    public static let time = Duration.seconds(5)
}

/// What a transport does with a response, decided by the body sink when the head arrives.
public enum HeadDisposition: Sendable, Equatable {
    /// Stream the body to the sink.
    case accept
    /// Stop now: the body is not wanted (error page, wrong range…). The reason is kept.
    case reject(String)
}

/// Receives one response. A transport calls it from one thread at a time, in order:
/// `head` once, then `body` zero or more times.
public protocol BodySink: AnyObject, Sendable {
    func head(_ head: ResponseHead) -> HeadDisposition
    /// Takes body bytes; throwing stops the transfer with `.rejected(reason)`.
    func body(_ bytes: UnsafeRawBufferPointer) throws
}

/// How a fetch ended. `head` is the final response's head when one arrived.
public struct FetchResult: Sendable {
    public let head: ResponseHead?
    public let failure: FetchFailure?

    public init(head: ResponseHead?, failure: FetchFailure?) {
        self.head = head
        self.failure = failure
    }
}

/// Something that performs HTTP GETs and streams bodies, so another transport can be added
/// later. Guarantees of every implementation: only http and https are fetched, redirects
/// included (at most 10 hops, no loops); the request asks for `Accept-Encoding: identity`;
/// the body is streamed to the sink as it arrives, never held whole in memory.
public protocol Transport: Sendable {
    func fetch(_ request: FetchRequest, into sink: BodySink) async -> FetchResult
    /// Starts a fetch without waiting for it: `completion` is called exactly once, on any
    /// thread, when it ends (also when it is cancelled through the handle).
    func start(_ request: FetchRequest, into sink: BodySink,
               completion: @escaping @Sendable (FetchResult) -> Void) -> FetchHandle
    /// Cancels every fetch in flight.
    func cancelAll()
    /// Where the transport ends its fetches, when it runs them on a thread of its own: work
    /// handed to it runs on that thread, so what follows a fetch's end (starting the next one)
    /// needs no hand-over to another thread; it keeps the user's timer too. Nil when the
    /// transport has no such thread.
    var workQueue: (any TimerWorkQueue)? { get }
}

/// Runs blocks one at a time.
///
/// Guarantees: blocks run in the order they were handed in from any one thread, never two at
/// once, and a block handed in by a running block runs after it, never inside it.
public protocol WorkQueue: Sendable {
    func enqueue(_ block: @escaping @Sendable () -> Void)
}

/// A `WorkQueue` whose own thread also keeps one timer, so a wake-up needs no other thread
/// (a dispatch timer wakes libdispatch's manager thread each time it is set, then a thread of
/// its queue, which hands the tick back).
///
/// Guarantees: call it on the queue only; `block` runs on the queue, once, no earlier than
/// `milliseconds` from now (and about then); setting the timer again replaces the block not
/// yet run, and `cancelTimer` drops it.
public protocol TimerWorkQueue: WorkQueue {
    func setTimer(afterMilliseconds milliseconds: Int, _ block: @escaping @Sendable () -> Void)
    func cancelTimer()
}

/// A fetch in flight, started by `Transport.start`.
public protocol FetchHandle: Sendable {
    /// Ends the fetch as `.cancelled` (at once, or as soon as the transport can).
    func cancel()
}

extension Transport {
    public var workQueue: (any TimerWorkQueue)? { nil }

    /// A fetch in a task of its own, for transports without a native way to start one.
    public func start(_ request: FetchRequest, into sink: BodySink,
                      completion: @escaping @Sendable (FetchResult) -> Void) -> FetchHandle {
        TaskFetchHandle(task: Task { completion(await fetch(request, into: sink)) })
    }
}

/// Cancels the task a fetch runs in.
struct TaskFetchHandle: FetchHandle {
    let task: Task<Void, Never>
    func cancel() { task.cancel() }
}
