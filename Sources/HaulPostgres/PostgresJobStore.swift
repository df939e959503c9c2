import Foundation
import HaulCore

/// The job queue on a PostgreSQL server, shared by `haul` workers on many machines: the second
/// implementation of `JobStore`, held to the same conformance tests as the SQLite `JobQueue`.
///
/// Guarantees (beyond `JobStore`'s):
/// - every operation is one transaction on the server; a deadlock or serialization failure is
///   rolled back and the operation run again, so callers see it succeed or fail whole;
/// - time is the database server's clock (`clock_timestamp()`), never a worker's: leases, slots,
///   pauses and heartbeats are compared on one clock; times a worker sends (retry times, pauses)
///   are moved from its clock onto the server's by the skew measured in the same transaction;
/// - live slots of a host never number more than its cap over every worker on every machine: a
///   slot is granted only under the host row's lock, counted by a statement that starts after the
///   lock is taken;
/// - jobs are claimed `FOR UPDATE SKIP LOCKED`, so concurrent claimers never take one job twice
///   and never wait on each other's rows;
/// - a worker registers with its first exchange and beats its heart with later ones; a worker
///   silent for the queue's `worker_timeout_ms` is removed by the next one that looks, once that
///   one has itself been heard from for the timeout (so a database outage that silenced them
///   all does not make the first back remove the others), and its jobs and slots come back at
///   once; each exchange tells the worker how long it may stay silent
///   (`ExchangeResult.silenceLimit`); a worker that finds its own registration gone is told so
///   (`WorkerEvicted`) and must stop taking work.
///
/// Not thread-safe: one store owns one connection and belongs to one thread at a time.
public final class PostgresJobStore: JobStore {
    private(set) var connection: PostgresConnection
    let url: String
    /// Milliseconds added to the server's clock: lets tests move time. 0 in use.
    public var clockOffset = 0
    /// The server's clock less this machine's, from the last transaction (ms).
    var skew = 0
    /// When this store last swept expired leases and silent workers (server ms).
    var lastExpiry = Int.min / 2
    /// The owner this store registered for, and when it last beat its heart (server ms).
    var registeredOwner: String?
    var lastHeartbeat = Int.min / 2
    /// Since when (server ms) this store's heartbeats have followed each other closer than half
    /// the worker timeout: its first after connecting, or after a longer gap. It evicts other
    /// workers only once this is a timeout ago (`evictSilentSQL`): back from an outage that
    /// silenced every worker (the database down, or this machine cut off), it gives the others
    /// the timeout to come back too, instead of taking their work and stopping them.
    var beatingSince = Int.max / 2
    /// The queue's worker timeout (ms), read when the session begins and with every heartbeat.
    var workerTimeout = 30_000
    /// Whether the session's settings are made (`configureSession`): a reconnection whose
    /// settings failed makes them at the next call.
    private var sessionConfigured = false
    /// This claimer's round-robin place among the hosts: the last host id it claimed from.
    var claimCursor = 0

    /// Connects to `url` (`postgres://USER@HOST:PORT/DB`, or any libpq connection string; a
    /// password from the URL, `PGPASSWORD` or `~/.pgpass`) and brings the schema up to date.
    /// `create` false: a database without a queue is refused (`PostgresError.Kind.noQueue`),
    /// for the commands that only read or change existing jobs.
    public init(url: String, create: Bool = true) throws {
        self.url = url
        connection = try PostgresConnection(url: url)
        try PostgresMigrator().migrate(connection, create: create)
        try configureSession()
        sessionConfigured = true
    }

    /// The session's settings: see `limitIdleTransactions`; and no JIT compilation. The sweep's
    /// statements, on generic plans, are estimated above `jit_above_cost` and were compiled every
    /// time, 15–40 ms of the server's CPU for statements that run in well under a millisecond
    /// (measured with pg_stat_statements under haul-queue-bench); no statement of haul's reads
    /// enough rows for compiled expressions to pay back.
    private func configureSession() throws {
        try limitIdleTransactions()
        try connection.execute("SET jit = off")
    }

    /// A worker stopped in the middle of a transaction (SIGSTOP, a machine that froze) would hold
    /// its row locks, and every other worker would wait on them: the server ends such a session
    /// after a quarter of the worker timeout, so the others go on and, once the timeout passes,
    /// take its work back.
    private func limitIdleTransactions() throws {
        let timeout = try one("SELECT value FROM queue_settings WHERE name = 'worker_timeout_ms'").int(0)
        workerTimeout = timeout
        try connection.execute("SET idle_in_transaction_session_timeout = \(max(100, timeout / 4))")
    }

    /// Opens a new session when the server ended the old one (it was idle in a transaction too
    /// long, or the server restarted). Nothing is run again: what failed with the old session was
    /// reported to its caller. A new session may follow a stall, so the next exchange checks this
    /// worker's registration before anything else.
    func ensureConnected() throws {
        if !connection.isConnected {
            connection = try PostgresConnection(url: url)
            sessionConfigured = false
            lastHeartbeat = Int.min / 2
        }
        if !sessionConfigured {
            try configureSession()
            sessionConfigured = true
        }
    }

    public var location: String { connection.location }

    /// Sixteen rounds in hand, and a claim once fewer than twelve are left (so each claim takes
    /// at least four rounds). An exchange here takes 2–6 ms and up to 20 ms with a batch of
    /// outcomes (four round trips to the server, which shares the machine's cores), in which 16
    /// transfers of small files finish up to 100 jobs: twelve rounds (192 jobs at `-j 16`) outlast
    /// the slowest. It was eight rounds with a claim every quarter round: the hand stayed full,
    /// but exchanges ran back to back, 288 transactions for workload A's 10,000 files in one
    /// process and 534 in two (each claimed as often as one alone, half as much each time). With
    /// sixteen and twelve: 216 and 264–304, and in five alternating rounds of workload H the
    /// medians went from 1.44 s to 1.37 s in one process and from 1.56 s to 1.44 s in two, the
    /// whole machine's busy CPU in two from 2.96 s to 2.69 s. 32 and 24 changed neither further.
    /// (Eight rounds with a claim below four emptied the hand: a claim issued at four rounds left,
    /// then a slow exchange.)
    public var claimAheadRounds: Int { 16 }
    public var claimBelowRounds: Int { 12 }

    /// How often a worker sweeps expired leases and silent workers (one worker at a time), in ms.
    static let expiryInterval = 1000
    /// How often a worker's exchanges beat its heart, in ms.
    static let heartbeatInterval = 1000

    public func now() throws -> Int {
        try serverNow()
    }

    func serverNow() throws -> Int {
        try one(Self.clockSQL).int(0) + clockOffset
    }

    static let clockSQL = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"

    static func localNow() -> Int { Int(Date().timeIntervalSince1970 * 1000) }

    /// One write transaction with the server's time at its start.
    ///
    /// `genericPlans`: the transaction's statements run on their generic plans, planned once per
    /// connection. Left to choose, the server plans the claim anew on every call (0.2 ms each,
    /// measured), since it knows the length of each array only then; the hot path's statements
    /// look rows up by key, which a generic plan does as well. Not for statements that filter on
    /// a state given as a parameter (a generic plan cannot use a partial index for it).
    @discardableResult
    func write<T>(genericPlans: Bool = false, _ body: (_ now: Int) throws -> T) throws -> T {
        try ensureConnected()
        return try connection.transaction {
            var first = Pipeline()
            if genericPlans { first.add("SET LOCAL plan_cache_mode = force_generic_plan") }
            let clock = first.add(Self.clockSQL)
            let now = try send(first)[clock].rows[0].int(0) + clockOffset
            skew = now - (Self.localNow() + clockOffset)
            return try body(now)
        }
    }

    /// One read-only transaction on one snapshot.
    func read<T>(_ body: (_ now: Int) throws -> T) throws -> T {
        try ensureConnected()
        return try connection.transaction(.repeatableRead) {
            try body(try serverNow())
        }
    }

    /// Sets how long a silent worker keeps its jobs and slots, for every worker of the queue.
    public func setWorkerTimeout(milliseconds: Int) throws {
        precondition(milliseconds > 0, "a timeout is positive")
        try run("UPDATE queue_settings SET value = $1 WHERE name = 'worker_timeout_ms'", [.int(milliseconds)])
    }

    /// Takes a worker whose run ended off the list (one evicted stays, marked, until the sweep
    /// forgets it).
    public func leave(owner: String) throws {
        try ensureConnected()
        try run("DELETE FROM workers WHERE owner = $1 AND evicted_at IS NULL", [.text(owner)])
        if registeredOwner == owner { registeredOwner = nil }
    }

    /// Workers registered and not evicted, with their names and last heartbeats (server ms).
    public func workers() throws -> [(owner: String, name: String, heartbeatAt: Int)] {
        try rows("SELECT owner, name, heartbeat_at FROM workers WHERE evicted_at IS NULL ORDER BY owner").map {
            (owner: $0.string(0), name: $0.string(1), heartbeatAt: $0.int(2))
        }
    }
}
