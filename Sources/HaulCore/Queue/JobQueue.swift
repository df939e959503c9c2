import CFileSync
import Foundation
import Synchronization

/// The persistent job queue: every URL of a batch, its state, its leases and its attempts.
///
/// Guarantees: every change is one SQLite transaction, so a crash at any instant leaves each
/// job whole in exactly one state; a job in `running` always carries a lease (token, owner,
/// expiry), and only the current lease holder can move it on. Several `JobQueue`s — in one
/// process or many — may share one database file. Not thread-safe: one `JobQueue` belongs to
/// one thread or actor, like the `Database` it owns.
///
/// The statements that claim, renew and finish one job at a time are written `UPDATE OR FAIL` /
/// `INSERT OR FAIL`: with SQLite's default (ABORT) conflict policy, a statement that fires
/// triggers (the attempts' foreign key, the counting trigger on DELETE) and may break a
/// constraint keeps a statement journal (every page it touches copied first, so it alone can be
/// undone). These statements only run inside a transaction that is rolled back whole on any
/// error, so undoing one statement alone is never needed. No trigger runs on an UPDATE of a job:
/// the queue keeps its counters itself (`JobQueue+Counting.swift`).
public final class JobQueue {
    /// The connection: `package`, so the tests of this package may look inside; SQL stays in Queue.
    package let database: Database
    /// The current time in Unix milliseconds. Replaceable so tests can move time.
    public var clock: @Sendable () -> Int = { Int(Date().timeIntervalSince1970 * 1000) }
    /// When `exchange` last looked for expired leases (Unix ms).
    var lastExpiry = Int.min / 2
    public init(database: Database) {
        self.database = database
    }

    /// Twelve rounds in hand (see `JobStore.claimAheadRounds`). An exchange and the preparation
    /// of what it claims (temp files opened on other threads, handed back to libcurl's loop
    /// between its turns) take 2–3 ms on average and up to 10 ms on workload A, while 16
    /// transfers of small files start jobs in bursts of up to 10,000 a second. With two rounds a
    /// third of the transfers started before their file was ready and libcurl ran 11.7 of 16
    /// transfers on average; with four, 13.9 (88 % ready in time); six were faster than four in 6
    /// of 7 alternating runs of workload A (medians 1.50 s, 1.71 s). Once A ran at 10,000 files a
    /// second, a trace of its exchanges showed the hand of six rounds empty before the claim's
    /// answer in about one exchange of four (a claim sent at four rounds left, answered 5–12 ms
    /// later). Over 8 alternated runs, slots free with no job to start while a claim was on its
    /// way: 473 slot-milliseconds a run with six rounds, 342 with twelve claimed below eight
    /// (see `claimBelowRounds`); transfers running on average 15.25 and 15.46 of 16.
    public var claimAheadRounds: Int { 12 }

    /// Claims once fewer than eight rounds are in hand (see `EngineCore`'s `claimBelow`): each
    /// exchange is a transaction that writes every page it touched however few jobs it moved;
    /// on workload A claiming every quarter round made 521 exchanges and 30,800 writes to the
    /// journal for 10,000 files, claiming below four of six rounds 319 and 15,200. Claims still
    /// take four rounds at a time.
    public var claimBelowRounds: Int { 8 }

    /// Opens the database at `path` (see `Database.OpenMode`) and wraps it.
    public convenience init(path: String, mode: Database.OpenMode = .createIfMissing, busyTimeout: Double = 10) throws {
        self.init(database: try Database(path: path, mode: mode, busyTimeout: busyTimeout))
    }

    /// A fresh, unguessable lease token: 90 random bits in 15 characters of `0-9A-Za-z-_`.
    /// Fifteen bytes is what Swift keeps inside a string value: a token is copied, compared and
    /// hashed in the engine's maps at every step of a job without a heap object or a reference
    /// count (a 33-character hex token cost both).
    static func newToken() -> String {
        let (high, low) = TokenBytes.next()
        return String(unsafeUninitializedCapacity: 15) { buffer in
            var bits = high
            for index in 0..<10 {  // 60 bits
                buffer[index] = tokenAlphabet[Int(bits & 63)]
                bits >>= 6
            }
            bits = low
            for index in 10..<15 {  // 30 more
                buffer[index] = tokenAlphabet[Int(bits & 63)]
                bits >>= 6
            }
            return 15
        }
    }

    private static let tokenAlphabet: [UInt8] = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_".utf8)
}

/// Random bytes for lease tokens, read from the system's generator (getrandom) a page at a
/// time rather than eight bytes at a time: two system calls a claimed job, before.
///
/// Guarantees: every pair handed out is fresh from the system's cryptographic generator and
/// handed out once, to one caller (the pool is under a mutex).
enum TokenBytes {
    private struct Pool {
        var words = [UInt64](repeating: 0, count: 512)
        var next = 512
    }
    private static let pool = Mutex(Pool())

    static func next() -> (UInt64, UInt64) {
        pool.withLock { pool in
            if pool.next + 2 > pool.words.count {
                // One read fills the page where the platform allows; else word by word.
                let filled = pool.words.withUnsafeMutableBytes { haul_random_bytes($0.baseAddress, UInt($0.count)) == $0.count }
                if !filled {
                    var generator = SystemRandomNumberGenerator()
                    for index in pool.words.indices { pool.words[index] = generator.next() }
                }
                pool.next = 0
            }
            defer { pool.next += 2 }
            return (pool.words[pool.next], pool.words[pool.next + 1])
        }
    }
}
