import Foundation

/// What a test server received, in arrival order: the one recording type `FaultServer`,
/// `ForwardingProxy`, `SOCKS5Proxy` and `ResponseLedger` hold, so counting and waiting for
/// requests works (and is checked) the same everywhere.
///
/// Waiting blocks on a condition variable woken by each `append`: no sleeping.
public final class RequestLog<Entry: Sendable>: Sendable {
    private let storage = Locked([Entry]())

    public init() {}

    /// Every entry so far, in arrival order.
    public var entries: [Entry] { storage.withLock { $0 } }

    /// The entries that satisfy `predicate`, in arrival order.
    public func entries(where predicate: (Entry) -> Bool) -> [Entry] {
        storage.withLock { $0.filter(predicate) }
    }

    /// How many entries there are (that satisfy `predicate`, if given).
    public func count(where predicate: ((Entry) -> Bool)? = nil) -> Int {
        storage.withLock { Self.count($0, predicate) }
    }

    /// Blocks until at least `count` entries (that satisfy `predicate`, if given) are logged, or
    /// `timeout` passes. Returns whether they were.
    @discardableResult
    public func wait(count: Int, where predicate: ((Entry) -> Bool)? = nil, timeout: TimeInterval = 10) -> Bool {
        storage.wait(timeout: timeout) { Self.count($0, predicate) >= count }
    }

    /// Async form of `wait`: blocks a dedicated thread, not the cooperative pool.
    @discardableResult
    public func wait(count: Int, where predicate: (@Sendable (Entry) -> Bool)? = nil,
                     timeout: TimeInterval = 10) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Thread { continuation.resume(returning: self.wait(count: count, where: predicate, timeout: timeout)) }.start()
        }
    }

    /// Logs `entry` and wakes every waiter.
    public func append(_ entry: Entry) {
        storage.update { $0.append(entry) }
    }

    /// Forgets every entry.
    public func removeAll() {
        storage.update { $0.removeAll() }
    }

    private static func count(_ entries: [Entry], _ predicate: ((Entry) -> Bool)?) -> Int {
        guard let predicate else { return entries.count }
        return entries.count(where: predicate)
    }
}

/// A test server whose requests are kept in a `RequestLog` and whose connections come through
/// an `Acceptor`: `requests`, `waitForRequests`, `connectionsAccepted` and `stop` once for all.
public protocol RecordingServer: Sendable {
    associatedtype Recorded: Sendable
    var requestLog: RequestLog<Recorded> { get }
    var acceptor: Acceptor { get }
}

extension RecordingServer {
    /// Every request received so far, in arrival order.
    public var requests: [Recorded] { requestLog.entries }

    /// Blocks until at least `count` requests are logged (or `timeout` passes); returns whether they were.
    @discardableResult
    public func waitForRequests(count: Int, timeout: TimeInterval = 10) -> Bool {
        requestLog.wait(count: count, timeout: timeout)
    }

    public var connectionsAccepted: Int { acceptor.connectionsAccepted }

    /// Closes the listener and every socket, and waits (up to `timeout`) for every thread to
    /// finish. Idempotent. Returns whether they all finished in time.
    @discardableResult
    public func stop(timeout: TimeInterval = 5) -> Bool { acceptor.stop(timeout: timeout) }
}
