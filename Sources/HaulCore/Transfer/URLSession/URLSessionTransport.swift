import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The URLSession (FoundationNetworking) transport: one shared, configured session for every
/// fetch.
///
/// Guarantees: `Accept-Encoding: identity` and `User-Agent: haul/<version>` (or the request's
/// own) on every request; credential headers only toward the request's own origin;
/// no cache, no cookies; redirects followed only to http/https, at most `maximumRedirects`
/// hops, never in a loop (a refused redirect fails the fetch with `.badRedirect` and nothing is
/// requested from its target); a fetch with no body byte for its stall timeout, or over its
/// total timeout, is cancelled; body bytes go to the sink as they arrive.
public final class URLSessionTransport: Transport {
    private let session: URLSession
    private let delegate: SessionDelegate
    private let watchdog: Task<Void, Never>

    /// - Parameter maxConnectionsPerHost: the session's connection limit per host. Pass at least
    ///   the number of transfers run at once: the engine, not the session, holds the per-host cap.
    public init(maxConnectionsPerHost: Int = 16, userAgent: String = "haul/\(HaulVersion.string)") {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maxConnectionsPerHost
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.urlCache = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieStorage = nil
        // Without this, FoundationNetworking parses every response header line for cookies.
        configuration.httpCookieAcceptPolicy = .never
        // Our own watchdog enforces stall and total timeouts; these are only a backstop.
        configuration.timeoutIntervalForRequest = 24 * 3600
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        configuration.httpAdditionalHeaders = ["User-Agent": userAgent, "Accept-Encoding": "identity"]
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "haul.transport"
        let delegate = SessionDelegate()
        self.delegate = delegate
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
        watchdog = Task.detached { [weak delegate] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                guard let delegate else { return }
                delegate.enforceTimeouts()
            }
        }
    }

    deinit {
        watchdog.cancel()
        session.invalidateAndCancel()
    }

    public func fetch(_ request: FetchRequest, into sink: BodySink) async -> FetchResult {
        if let refusal = RedirectPolicy.refusal(toStart: request.url) {
            return FetchResult(head: nil, failure: .badRedirect(refusal))
        }
        if request.netrcFile != nil {
            return FetchResult(head: nil, failure: .unsupported(
                "this job's --netrc credentials need the libcurl transport: URLSession cannot read .netrc; run it without --transport urlsession"))
        }
        // FoundationNetworking follows 301, 302, 303 and 307 itself (through the delegate, which
        // checks each hop); a 308 ends its task, so haul follows it here with the same checks.
        var current = request
        var trail = RedirectPolicy(start: request.url)
        while true {
            if Task.isCancelled { return FetchResult(head: nil, failure: .cancelled) }
            switch await perform(current, trail: trail, into: sink) {
            case .finished(let result):
                return result
            case .permanentRedirect(let target, let newTrail):
                current.url = target
                trail = newTrail
            }
        }
    }

    private func perform(_ request: FetchRequest, trail: RedirectPolicy, into sink: BodySink) async -> TaskOutcome {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = "GET"
        // `request.url` is this hop's; `trail.start` the URL the fetch began with.
        for (name, value) in RedirectPolicy.headers(request.headers, from: trail.start, toward: request.url) {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        if let userAgent = request.userAgent { urlRequest.setValue(userAgent, forHTTPHeaderField: "User-Agent") }
        urlRequest.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        let task = session.dataTask(with: urlRequest)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                delegate.register(task: task, request: request, trail: trail, sink: sink, continuation: continuation)
                // A cancellation that came before the registration found nothing to cancel.
                if Task.isCancelled { delegate.cancel(taskIdentifier: task.taskIdentifier) }
                task.resume()
            }
        } onCancel: {
            delegate.cancel(taskIdentifier: task.taskIdentifier)
        }
    }

    public func cancelAll() {
        delegate.cancelAll()
    }
}

/// How one URLSession task ended: with a result, or with a 308 redirect for haul to follow.
private enum TaskOutcome: Sendable {
    case finished(FetchResult)
    case permanentRedirect(URL, RedirectPolicy)
}

/// Per-task state and the URLSession callbacks. All callbacks for the session run on its serial
/// delegate queue; the watchdog and cancellations run elsewhere, so the table is under a mutex.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct Entry {
        let task: URLSessionTask
        let sink: BodySink
        let request: FetchRequest
        let continuation: CheckedContinuation<TaskOutcome, Never>
        let started: ContinuousClock.Instant
        var lastActivity: ContinuousClock.Instant
        var head: ResponseHead?
        var failure: FetchFailure?
        var trail: RedirectPolicy
        /// Set when a 308 is to be followed by a new task.
        var permanentRedirect: URL?
        /// Set while a small unwanted body (an error page) is read to its end and dropped, so the
        /// request ends cleanly at the server and the connection stays open for the next one: when
        /// the drain is given up and the connection cut after all (a trickled error page).
        var drainDeadline: ContinuousClock.Instant?
        var draining: Bool { drainDeadline != nil }
    }

    private let entries = Mutex<[Int: Entry]>([:])

    func register(task: URLSessionTask, request: FetchRequest, trail: RedirectPolicy, sink: BodySink,
                  continuation: CheckedContinuation<TaskOutcome, Never>) {
        let now = ContinuousClock.now
        entries.withLock {
            $0[task.taskIdentifier] = Entry(task: task, sink: sink, request: request, continuation: continuation,
                                            started: now, lastActivity: now, trail: trail)
        }
    }

    /// Marks a task as failed for `reason` (unless it already failed) and, unless told not to,
    /// cancels it.
    private func stop(_ identifier: Int, _ failure: FetchFailure, cancel: Bool = true) {
        let task: URLSessionTask? = entries.withLock { table in
            guard var entry = table[identifier] else { return nil }
            if entry.failure == nil { entry.failure = failure }
            table[identifier] = entry
            return entry.task
        }
        if cancel { task?.cancel() }
    }

    func cancel(taskIdentifier: Int) { stop(taskIdentifier, .cancelled) }

    func cancelAll() {
        let ids = entries.withLock { Array($0.keys) }
        for id in ids { stop(id, .cancelled) }
    }

    func enforceTimeouts() {
        let now = ContinuousClock.now
        var expired: [(Int, FetchFailure)] = []
        entries.withLock { table in
            for (id, entry) in table where entry.failure == nil || entry.draining {
                if let deadline = entry.drainDeadline, now > deadline {
                    expired.append((id, .stalled(entry.request.stallTimeout)))  // keeps its failure: only cut
                } else if let total = entry.request.totalTimeout, now - entry.started > .seconds(total) {
                    expired.append((id, .timedOut(total)))
                } else if now - entry.lastActivity > .seconds(entry.request.stallTimeout) {
                    expired.append((id, .stalled(entry.request.stallTimeout)))
                }
            }
        }
        for (id, failure) in expired { stop(id, failure) }  // a draining task keeps its failure
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        let id = task.taskIdentifier
        // FoundationNetworking resolves Location itself, and wrongly: a relative reference
        // replaces the whole path, and a URL without a host (file:///etc/passwd) becomes a path on
        // the current host. Resolve it here (RFC 3986) against the URL that answered.
        let target = RedirectPolicy.target(location: Self.location(of: response), from: response.url ?? task.currentRequest?.url)
        let refusal: String? = entries.withLock { table in
            guard var entry = table[id] else { return "unknown task" }
            entry.lastActivity = .now
            defer { table[id] = entry }
            return entry.trail.follow(to: target)
        }
        if let refusal {
            // Not cancelled: FoundationNetworking traps when a redirect's completion handler runs
            // after its task was cancelled. A nil request ends the task with the 3xx response,
            // and the failure recorded here reports the refusal.
            stop(id, .badRedirect(refusal), cancel: false)
            completionHandler(nil)
            return
        }
        var redirected = request
        redirected.url = target
        if let start = entries.withLock({ $0[id]?.trail.start }), let target, !RedirectPolicy.sameOrigin(start, target) {
            for name in RedirectPolicy.credentialHeaders { redirected.setValue(nil, forHTTPHeaderField: name) }
        }
        completionHandler(redirected)
    }

    /// The Location header of a redirect response.
    private static func location(of response: HTTPURLResponse) -> String? {
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, name.lowercased() == "location", let value = value as? String { return value }
        }
        return nil
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let id = dataTask.taskIdentifier
        guard let http = response as? HTTPURLResponse else {
            stop(id, .transport("not an HTTP response"))
            completionHandler(.cancel)
            return
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        if http.statusCode == 308 {
            // Not followed by FoundationNetworking: end this task and follow it in `fetch`.
            let target = RedirectPolicy.target(location: Self.location(of: http), from: http.url)
            let refusal: String? = entries.withLock { table in
                guard var entry = table[id] else { return "unknown task" }
                entry.lastActivity = .now
                let refusal = entry.trail.follow(to: target)
                if refusal == nil { entry.permanentRedirect = target }
                table[id] = entry
                return refusal
            }
            if let refusal { stop(id, .badRedirect(refusal), cancel: false) }
            completionHandler(.cancel)
            return
        }
        var head = ResponseHead(status: http.statusCode, headers: headers, url: http.url)
        head.bodyAsSent = false  // Foundation decodes gzip and deflate (and fails on bytes that are not)
        let sink: BodySink? = entries.withLock { table in
            guard var entry = table[id], entry.failure == nil else { return nil }
            entry.head = head
            entry.lastActivity = .now
            table[id] = entry
            return entry.sink
        }
        guard let sink else { completionHandler(.cancel); return }
        switch sink.head(head) {
        case .accept:
            completionHandler(.allow)
        case .reject(let reason):
            if let length = head.contentLength, length <= RefusedBody.limit {
                // Read the small body to its end instead of cutting the connection: the server
                // then sees the request finish before haul sends another one.
                stop(id, .rejected(reason), cancel: false)
                entries.withLock { $0[id]?.drainDeadline = .now + RefusedBody.time }
                completionHandler(.allow)
            } else {
                stop(id, .rejected(reason))
                completionHandler(.cancel)
            }
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let id = dataTask.taskIdentifier
        let sink: BodySink? = entries.withLock { table in
            guard var entry = table[id], entry.failure == nil || entry.draining else { return nil }
            entry.lastActivity = .now
            table[id] = entry
            return entry.draining ? nil : entry.sink
        }
        guard let sink else { return }
        do {
            try data.withUnsafeBytes { try sink.body($0) }
        } catch {
            stop(id, .rejected(String(describing: error)))
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let id = task.taskIdentifier
        guard let entry = entries.withLock({ $0.removeValue(forKey: id) }) else { return }
        if entry.failure == nil, let target = entry.permanentRedirect {
            entry.continuation.resume(returning: .permanentRedirect(target, entry.trail))
            return
        }
        var failure = entry.failure
        if failure == nil, let error {
            failure = Self.failure(error, responded: entry.head != nil)
        }
        if failure == nil, entry.head == nil, let http = task.response as? HTTPURLResponse, (300..<400).contains(http.statusCode) {
            // FoundationNetworking ends a redirect without a Location quietly: no error, and its
            // response never reaches `didReceive response`.
            failure = .badRedirect("redirect (HTTP \(http.statusCode)) without a usable Location")
        }
        if let known = failure, entry.head == nil {
            failure = entry.trail.failureAtEnd(known, current: task.currentRequest?.url)
        }
        entry.continuation.resume(returning: .finished(FetchResult(head: entry.head, failure: failure)))
    }

    /// A TLS verification failure is permanent (FoundationNetworking on Linux reports it as
    /// URLError -1 with libcurl's message); anything else may pass with time.
    static func failure(_ error: any Error, responded: Bool = true) -> FetchFailure {
        let reason = describe(error)
        if let code = (error as? URLError)?.code {
            switch code {
            case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .secureConnectionFailed:
                return .unreachable(reason)
            case .networkConnectionLost where !responded, .timedOut where !responded, .badServerResponse where !responded,
                 .zeroByteResource where !responded:
                return .unreachable(reason)
            default:
                break
            }
        }
        if reason.contains("SSL certificate problem") || reason.contains("certificate verify failed") {
            return .untrusted("certificate not trusted (\(reason)); URLSession on Linux trusts only the system's CA store: "
                              + "run without --transport urlsession to pass --cacert FILE or -k")
        }
        return .transport(reason)
    }

    static func describe(_ error: any Error) -> String {
        guard let urlError = error as? URLError else { return String(describing: error) }
        switch urlError.code {
        case .cannotConnectToHost: return "connection refused"
        case .cannotFindHost, .dnsLookupFailed: return "host not found (DNS)"
        case .networkConnectionLost: return "connection lost mid-transfer"
        case .timedOut: return "timed out"
        case .notConnectedToInternet: return "network unreachable"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            return "TLS failure: \(urlError.localizedDescription)"
        default: return "transfer failed: \(urlError.localizedDescription) (URLError \(urlError.code.rawValue))"
        }
    }
}
