import Foundation
import HaulCore
import HaulPostgres
import HaulTestSupport
import Synchronization

/// The two queue backends the conformance suite runs on.
enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case postgres
    var description: String { rawValue }
}

/// One queue on one backend for one test, with as many connections to it as the test opens and
/// one clock for them all that the test moves by hand (SQLite: the queue's clock; PostgreSQL: an
/// offset on the server's clock).
final class StoreFixture {
    let kind: StoreKind
    let directory: TempDirectory
    /// The SQLite file, or the PostgreSQL database's URL.
    let location: String
    private let clock = TestClock(Int(Date().timeIntervalSince1970 * 1000))
    private var offset = 0
    private(set) var stores: [any JobStore] = []

    init(_ kind: StoreKind) throws {
        self.kind = kind
        directory = try TempDirectory()
        switch kind {
        case .sqlite: location = directory.file("haul.db")
        case .postgres:
            location = try PostgresCluster.shared().makeDatabase()
            // Tests of leases move the clock by minutes: a worker's heartbeat must not lapse
            // first (the test of heartbeats sets its own timeout).
            try PostgresJobStore(url: location).setWorkerTimeout(milliseconds: 3_600_000)
        }
    }

    deinit { directory.remove() }

    /// A new connection to the queue.
    func open() throws -> any JobStore {
        let store: any JobStore
        switch kind {
        case .sqlite:
            let queue = try JobQueue(path: location)
            queue.clock = clock.function
            store = queue
        case .postgres:
            let queue = try PostgresJobStore(url: location)
            queue.clockOffset = offset
            store = queue
        }
        stores.append(store)
        return store
    }

    /// Moves every connection's clock on by `milliseconds`.
    func advance(by milliseconds: Int) {
        clock.advance(by: milliseconds)
        offset += milliseconds
        for case let store as PostgresJobStore in stores { store.clockOffset = offset }
    }

    /// Adds URL lines (each must parse) for destinations in the fixture's folder.
    @discardableResult
    func add(_ urls: [String], to store: any JobStore, maxAttempts: Int = 5, ifExists: ExistingFilePolicy = .skip) throws -> [AddOutcome] {
        let resolver = DestinationResolver(directory: directory.path)
        let lines = try urls.map { text -> InputLine in
            guard let line = try InputLine.parse(Array(text.utf8), resolver: resolver) else { throw TestError("'\(text)' is not a job line") }
            return line
        }
        return try store.add(lines, maxAttempts: maxAttempts, ifExists: ifExists)
    }

    /// The id of `host` (`name:port`), from a job of it.
    func hostID(_ store: any JobStore, _ host: String) throws -> Int {
        guard let job = try store.list(JobFilter(host: host, limit: 1)).first else { throw TestError("no job of \(host)") }
        return job.hostID
    }
}
