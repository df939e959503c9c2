import Foundation
import HaulCore
import HaulPostgres
import HaulTestSupport
import Synchronization
import XCTest

/// "Prove the promises": a mixed batch over four hosts, `haul run` killed with SIGKILL at random
/// moments again and again, then run to completion; afterwards (and between kills) every
/// promise of the README is checked against the database, the output folder and the servers.
///
/// Sized by environment variables: `HAUL_CRASH_KILLS` (default 5), `HAUL_CRASH_JOBS` (default
/// 200) and `HAUL_CRASH_SEED` (default: a fresh random seed, printed first, so any run can be
/// repeated). The large run: `HAUL_CRASH_KILLS=100 HAUL_CRASH_JOBS=2000 swift test --filter CrashLoop`
/// (both stores; `--filter CrashLoopTests/testCrashLoopKeepsEveryPromiseOnPostgres` for one).
final class CrashLoopTests: XCTestCase {
    private static let perHost = 2
    private static let maxAttempts = 30
    private static let hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]
    private static let runArguments = [
        "run", "--per-host", String(perHost), "-j", "8", "--max-attempts", String(maxAttempts),
        "--max-retry-after", "2", "--stall", "5",
    ]

    private struct Settings {
        var seed: UInt64
        var kills: Int
        var jobs: Int

        static func fromEnvironment() -> Settings {
            let environment = ProcessInfo.processInfo.environment
            func number(_ name: String, _ fallback: Int) -> Int {
                environment[name].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { max(0, $0) } ?? fallback
            }
            let seed = environment["HAUL_CRASH_SEED"].flatMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
                ?? UInt64.random(in: 1...999_999_999)
            return Settings(seed: seed, kills: number("HAUL_CRASH_KILLS", 5), jobs: max(1, number("HAUL_CRASH_JOBS", 200)))
        }
    }

    // MARK: The crash loop

    func testCrashLoopKeepsEveryPromise() throws {
        try crashLoop(database: nil)
    }

    /// The same loop on a PostgreSQL queue (a fresh database on the test support's cluster).
    func testCrashLoopKeepsEveryPromiseOnPostgres() throws {
        try crashLoop(database: try PostgresCluster.shared().makeDatabase())
    }

    /// `database`: a postgres:// URL, or nil for a SQLite file in the harness's folder.
    private func crashLoop(database: String?) throws {
        let settings = Settings.fromEnvironment()
        print("crash loop\(database == nil ? "" : " (PostgreSQL)"): seed \(settings.seed) (HAUL_CRASH_SEED=\(settings.seed) repeats it), "
              + "\(settings.kills) kills, \(settings.jobs) jobs")
        let began = ContinuousClock.now
        let h = try RunHarness(self, database: database)
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try Self.hosts.map { try FaultServer(host: $0, tracker: tracker) }
        defer { for server in servers { server.stop() } }
        let scenario = CrashScenario(seed: settings.seed, count: settings.jobs, servers: servers)
        try h.add(scenario.lines(servers: servers))
        let context = "seed \(settings.seed)"

        // Kill moments come from their own seeded stream: half after a random delay, half once
        // the servers have seen a random number of further requests (so a kill lands mid-work
        // however fast the machine), plus a little more random delay.
        var random = SeededGenerator(seed: settings.seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        var watcher = DestinationWatcher(scenario: scenario, out: h.out)
        var kills = 0
        var endedByItself = 0
        for round in 1...max(1, settings.kills) where settings.kills > 0 {
            let child = try h.start(Self.runArguments + ["--quiet"])
            let result: ProcessResult
            if Bool.random(using: &random) {
                result = child.wait(timeout: Double.random(in: 0.05...2.0, using: &random))
            } else {
                let more = Int.random(in: 1...40, using: &random)
                let extra = Double.random(in: 0...0.2, using: &random)
                scenario.ledger.waitForRequests(atLeast: scenario.ledger.requestCount + more, timeout: 5)
                result = child.wait(timeout: extra)
            }
            if result.timedOut {
                kills += 1
                XCTAssertEqual(result.status, SIGKILL, "\(context), round \(round): \(result.stderrText)")
            } else {
                // The batch finished before this kill came: nothing is left to interrupt.
                endedByItself += 1
                XCTAssertTrue(result.status == 0 || result.status == 1,
                              "\(context), round \(round): haul run exited \(result.status): \(result.stderrText)")
                break
            }
            // Nothing runs now: the queue and the output folder must be sound at this instant.
            try checkBetweenRuns(h, scenario: scenario, watcher: &watcher, context: "\(context), after kill \(kills)")
        }

        let final = try h.run(Self.runArguments + ["--json"], timeout: 900)
        // Exit 1 when a job this run worked on failed; jobs that failed in a killed run before
        // it (every 404 may have) are only noted in its summary.
        let summary = final.stdoutLines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let failedNow = summary?["failed"] as? Int
        XCTAssertNotNil(failedNow, "\(context): the final run's last line is its summary: \(final.stdoutLines.suffix(1))")
        XCTAssertEqual(final.status, (failedNow ?? 0) > 0 ? 1 : 0,
                       "\(context): final run: \(final.stderrText)\n\(final.stdoutLines.suffix(5).joined(separator: "\n"))")
        if scenario.jobs.contains(where: \.mustFail) {
            XCTAssertEqual((failedNow ?? 0) + (summary?["failed_earlier"] as? Int ?? 0), scenario.jobs.filter(\.mustFail).count,
                           "\(context): every 404 failed, in this run or an earlier one")
        }
        let report = try finalChecks(h, scenario: scenario, tracker: tracker, servers: servers, context: context)
        let seconds = Double((ContinuousClock.now - began).components.seconds)
        let caps = servers.map { "\($0.host) \(tracker.maxConcurrent(host: $0.hostKey))" }.joined(separator: ", ")
        print("crash loop figures\(database == nil ? "" : " (PostgreSQL)"): seed \(settings.seed), kills \(kills)\(endedByItself > 0 ? " (the batch finished before kill \(kills + 1))" : ""), "
              + "jobs \(settings.jobs) (\(report.done) done, \(report.failed) failed), jobs lost \(report.lost), "
              + "corrupt/partial files at destinations \(report.corrupt), spliced files \(report.spliced), "
              + "temp files left \(report.temps), max concurrent per host [\(caps)] vs cap \(Self.perHost), "
              + "most attempts \(report.mostAttempts)/\(Self.maxAttempts), requests \(scenario.ledger.requestCount), "
              + "wall time \(Int(seconds)) s")
    }

    /// After a kill: the database is sound and counts every job, and every file at a destination
    /// is whole (placed files are checked once each, by inode).
    private func checkBetweenRuns(_ h: RunHarness, scenario: CrashScenario, watcher: inout DestinationWatcher,
                                  context: String) throws {
        let store = try checkStore(h, context: context)
        let states = try jobStates(store, out: h.out)
        XCTAssertEqual(states.count, scenario.jobs.count, "\(context): jobs lost")
        for problem in watcher.check(states: states) { XCTFail("\(context): \(problem)") }
    }

    private struct Report {
        var done = 0, failed = 0, lost = 0, corrupt = 0, spliced = 0, temps = 0, mostAttempts = 0
    }

    /// Every promise, once the batch is finished.
    private func finalChecks(_ h: RunHarness, scenario: CrashScenario, tracker: FaultServer.ConcurrencyTracker,
                             servers: [FaultServer], context: String) throws -> Report {
        var report = Report()
        let store = try checkStore(h, context: context)

        // No job lost: each one queued is there, done or failed with a reason.
        let states = try jobStates(store, out: h.out)
        report.lost = scenario.jobs.count - states.count
        XCTAssertEqual(states.count, scenario.jobs.count, "\(context): jobs lost")
        for job in scenario.jobs {
            guard let state = states[job.name] else {
                XCTFail("\(context): no job for \(job.name)")
                continue
            }
            report.mostAttempts = max(report.mostAttempts, state.attempts)
            XCTAssertLessThanOrEqual(state.attempts, state.maxAttempts, "\(context): \(job.name) was attempted too often")
            switch state.state {
            case "done":
                report.done += 1
                XCTAssertFalse(job.mustFail, "\(context): \(job.name) is a 404 but is done")
            case "failed":
                report.failed += 1
                XCTAssertTrue(job.mustFail, "\(context): \(job.kind) job \(job.name) failed: \(state.error ?? "no reason")")
                XCTAssertFalse((state.error ?? "").isEmpty, "\(context): \(job.name) failed without a reason")
            default:
                XCTFail("\(context): \(job.name) ended \(state.state)")
            }
        }
        // No destination held a file before the run, so no job may end "kept": a kill between a
        // file's move into place and its record must not make haul take its own file for the user's.
        let kept = states.values.filter(\.kept).count
        XCTAssertEqual(kept, 0, "\(context): \(kept) jobs took haul's own file for one already there")
        // The attempts recorded agree: no job has more attempt records than its maximum.
        var overused: [String] = []
        for state in states.values {
            let recorded = try store.attempts(jobID: state.id).count
            if recorded > state.maxAttempts { overused.append("job \(state.id): \(recorded) attempts recorded, at most \(state.maxAttempts) allowed") }
        }
        XCTAssertEqual(overused, [], context)

        // Destinations: done files byte-identical to what the server served, nothing for a 404.
        for job in scenario.jobs {
            let contents = h.contents(job.name)
            if job.mustFail {
                if contents != nil { report.corrupt += 1 }
                XCTAssertNil(contents, "\(context): the 404 destination \(job.name) exists")
                continue
            }
            switch CrashScenario.verdict(contents, for: job) {
            case .intact: break
            case .missing: XCTFail("\(context): \(job.name) is missing")
            case .spliced:
                report.spliced += 1
                XCTFail("\(context): \(job.name) is spliced from two versions")
            case .corrupt:
                report.corrupt += 1
                XCTFail("\(context): \(job.name) holds \(contents?.count ?? 0) wrong bytes (\(job.kind), \(job.versions.first?.count ?? 0) expected)")
            }
        }
        let temps = h.tempFiles()
        report.temps = temps.count
        XCTAssertEqual(temps, [], "\(context): temp files left")
        let expected = Set(scenario.jobs.filter { !$0.mustFail }.map(\.name))
        let extra = Set(h.outputFiles()).subtracting(expected).subtracting(temps)
        XCTAssertEqual(extra, [], "\(context): files no job accounts for")

        // The servers' wishes: never more than the cap at once on any host.
        for server in servers {
            XCTAssertLessThanOrEqual(tracker.maxConcurrent(host: server.hostKey), Self.perHost,
                                     "\(context): \(server.hostKey) had more requests at once than the cap")
        }
        return report
    }

    // MARK: Two runs on one queue

    /// Two `haul run`s started together on one queue, not killed: every file is fetched whole
    /// exactly once (each process finishes a disjoint set of jobs), the 404s are asked once and
    /// fail, the cap holds over both processes, and the usual promises hold. (RunPerHostTests
    /// checks the cap with plain files; this adds faults, resumes and per-file accounting.)
    func testTwoRunsOnOneQueueFetchEachFileWholeOnceAndKeepTheCap() throws {
        let seed = ProcessInfo.processInfo.environment["HAUL_CRASH_SEED"].flatMap { UInt64($0) } ?? 20_250_601
        let context = "seed \(seed)"
        let h = try RunHarness(self)
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try Self.hosts.map { try FaultServer(host: $0, tracker: tracker) }
        defer { for server in servers { server.stop() } }
        // Flipping resources are left out: their refused resumes are fetched whole by design.
        var mix = CrashScenario.defaultMix
        mix[.flipping] = nil
        let scenario = CrashScenario(seed: seed, count: 160, servers: servers, mix: mix)
        try h.add(scenario.lines(servers: servers))

        let first = try h.start(Self.runArguments + ["--json"])
        let second = try h.start(Self.runArguments + ["--json"])
        let results = [first.wait(timeout: 300), second.wait(timeout: 300)]

        var finishedBy: [Set<Int>] = []
        for (index, result) in results.enumerated() {
            XCTAssertFalse(result.timedOut, "\(context): run \(index + 1) did not finish")
            XCTAssertEqual(result.status, 1, "\(context): run \(index + 1) (the 404s fail): \(result.stderrText)")
            var finished = Set<Int>()
            for line in result.stdoutLines {
                guard let event = runTestJSON(line) else { continue }
                if event["event"] as? String == "done", let id = event["id"] as? Int {
                    XCTAssertTrue(finished.insert(id).inserted, "\(context): run \(index + 1) finished job \(id) twice")
                }
                if event["event"] as? String == "warning" {
                    XCTFail("\(context): run \(index + 1) warned: \(event["message"] ?? "")")
                }
            }
            finishedBy.append(finished)
        }
        print("two runs on one queue: jobs finished per process \(finishedBy.map(\.count)), "
              + "max concurrent per host \(servers.map { tracker.maxConcurrent(host: $0.hostKey) }) vs cap \(Self.perHost)")
        XCTAssertEqual(finishedBy[0].intersection(finishedBy[1]), [], "\(context): a job was finished by both runs")

        let states = try jobStates(try JobQueue(path: h.db, mode: .mustExist), out: h.out)
        let doneIDs = Set(states.values.filter { $0.state == "done" }.map(\.id))
        XCTAssertEqual(finishedBy[0].union(finishedBy[1]), doneIDs, "\(context): the runs' done events and the queue disagree")
        for job in scenario.jobs {
            let state = states[job.name]
            let answers = scenario.ledger.entries(path: job.path)
            if job.mustFail {
                XCTAssertEqual(state?.state, "failed", "\(context): \(job.name)")
                XCTAssertEqual(answers.count, 1, "\(context): \(job.name) (404) was asked \(answers.count) times")
                XCTAssertNil(h.contents(job.name), "\(context): the 404 destination \(job.name) exists")
            } else {
                XCTAssertEqual(state?.state, "done", "\(context): \(job.kind) job \(job.name): \(state?.error ?? "")")
                XCTAssertEqual(scenario.ledger.wholeSuccesses(path: job.path), 1,
                               "\(context): \(job.kind) job \(job.name) was served whole \(scenario.ledger.wholeSuccesses(path: job.path)) times")
                XCTAssertEqual(CrashScenario.verdict(h.contents(job.name), for: job), .intact, "\(context): \(job.name)")
            }
            if let state { XCTAssertLessThanOrEqual(state.attempts, state.maxAttempts, "\(context): \(job.name)") }
        }
        for server in servers {
            XCTAssertLessThanOrEqual(tracker.maxConcurrent(host: server.hostKey), Self.perHost,
                                     "\(context): \(server.hostKey) had more requests at once than the cap")
        }
        XCTAssertGreaterThanOrEqual(tracker.maxConcurrent, 2, "\(context): the transfers never overlapped")
        XCTAssertEqual(h.tempFiles(), [], context)
        _ = try checkStore(h, context: context)
    }

    // MARK: A fresh start after a kill

    /// The validator stored for a partial file must always describe the bytes in it. A server
    /// whose version flips (two backends mid-deploy) serves A, then B, then A again: run 1 records
    /// A's ETag and is killed before any body byte; run 2 starts over (nothing to resume), gets B
    /// and is killed with B's first bytes on disk, before its periodic progress write; run 3
    /// must not resume those B bytes with `If-Range: A` (the server would say yes, and the file
    /// would be spliced from two versions).
    ///
    /// Large enough to be kept under its temp file's name from the head on (a smaller fresh
    /// download is unnamed until it ends, so a kill leaves no bytes at all to splice).
    func testAFreshStartKilledEarlyNeverLeavesTheOldValidatorOnItsBytes() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let versionA = runTestData(Int(DownloadAttempt.resumableSize) + 200_000, seed: 71)
        let versionB = runTestData(Int(DownloadAttempt.resumableSize) + 200_000, seed: 72)
        let served = ServedCount()
        server.route("/flip.bin") { request in
            switch served.next() {
            case 1: return FaultServer.fileResponse(versionA, request: request, etag: "\"A\"").stalledAfterHeaders(.forever)
            case 2: return FaultServer.fileResponse(versionB, request: request, etag: "\"B\"").slowBody(bytesPerChunk: 16_384, delay: 0.2)
            default: return FaultServer.fileResponse(versionA, request: request, etag: "\"A\"")
            }
        }
        try h.add([server.url("/flip.bin").absoluteString + " out=flip.bin"])
        let database = try Database(path: h.db, mode: .mustExist)
        func stored() throws -> String? {
            try database.firstRow("SELECT etag FROM jobs WHERE id = 1", [], { $0.optionalString(0) }) ?? nil
        }
        let arguments = ["run", "--max-attempts", "5", "--quiet"]

        // Run 1: A's head, no body; its ETag reaches the database.
        let first = try h.start(arguments)
        XCTAssertTrue(RunHarness.poll(timeout: 10) { (try? stored()) == "\"A\"" }, "run 1 never recorded A's ETag")
        kill(first.processIdentifier, SIGKILL)
        XCTAssertEqual(first.wait(timeout: 10).status, SIGKILL)
        XCTAssertEqual(h.tempFileSize(), 0)

        // Run 2: starts from zero, gets B; killed as soon as B's first bytes are on disk.
        let second = try h.start(arguments)
        XCTAssertTrue(RunHarness.poll(timeout: 10) { h.tempFileSize() > 0 }, "run 2 never wrote B's bytes")
        kill(second.processIdentifier, SIGKILL)
        XCTAssertEqual(second.wait(timeout: 10).status, SIGKILL)
        let kept = h.tempFileSize()
        XCTAssertTrue(kept > 0 && kept < versionB.count, "temp file holds \(kept) bytes")
        let validator = try stored()
        XCTAssertTrue(validator == nil || validator == "\"B\"",
                      "the temp file holds B's bytes but the database keeps the validator \(validator ?? "none") for them")

        // Run 3: must not splice.
        let third = try h.run(arguments)
        XCTAssertEqual(third.status, 0, third.stdoutText + third.stderrText)
        let contents = h.contents("flip.bin")
        XCTAssertTrue(contents == versionA || contents == versionB,
                      "flip.bin holds \(contents?.count ?? 0) bytes that are neither version: "
                      + "prefix of B \(contents.map { $0.prefix(kept) == versionB.prefix(kept) } ?? false), "
                      + "request 3 had Range \(server.requests(path: "/flip.bin").last?.rangeHeader ?? "none")")
        XCTAssertEqual(h.tempFiles(), [])
    }

    // MARK: Helpers

    struct JobRow {
        var id: Int
        var state: String
        var attempts: Int
        var maxAttempts: Int
        var error: String?
        var kept = false
    }

    /// The queue at `h.db`, through the port; a SQLite file is first checked whole (integrity,
    /// and its counters against its rows).
    private func checkStore(_ h: RunHarness, context: String) throws -> any JobStore {
        if h.db.hasPrefix("postgres://") { return try PostgresJobStore(url: h.db) }
        let database = try Database(path: h.db, mode: .mustExist)
        XCTAssertEqual(try QueueInvariants.integrityCheck(database), ["ok"], context)
        XCTAssertEqual(try QueueInvariants.counterMismatches(in: database), [], context)
        return try JobQueue(path: h.db, mode: .mustExist)
    }

    /// Every job's row, keyed by its destination relative to `out`.
    private func jobStates(_ store: any JobStore, out: String) throws -> [String: JobRow] {
        var rows: [String: JobRow] = [:]
        try store.forEachJob(state: nil) { job in
            let destination = job.destination
            let name = destination.hasPrefix(out + "/") ? String(destination.dropFirst(out.count + 1)) : destination
            rows[name] = JobRow(id: job.id, state: job.state.rawValue, attempts: job.attempts, maxAttempts: job.maxAttempts,
                                error: job.lastError, kept: job.kept)
        }
        return rows
    }
}

/// Watches the destinations between runs: a file that appeared or was replaced since the last
/// look (new inode or size) is compared with what the server served; a done job must have its
/// file; a temp file never sits at a destination.
struct DestinationWatcher {
    let scenario: CrashScenario
    let out: String
    private var seen: [String: (inode: UInt64, size: Int64)] = [:]

    init(scenario: CrashScenario, out: String) {
        self.scenario = scenario
        self.out = out
    }

    mutating func check(states: [String: CrashLoopTests.JobRow]) -> [String] {
        var problems: [String] = []
        for job in scenario.jobs {
            let path = out + "/" + job.name
            var info = stat()
            guard lstat(path, &info) == 0 else {
                seen[job.name] = nil
                if states[job.name]?.state == "done" { problems.append("\(job.name) is done but has no file") }
                continue
            }
            let identity = (inode: UInt64(info.st_ino), size: Int64(info.st_size))
            if let last = seen[job.name], last == identity { continue }
            seen[job.name] = identity
            let contents = FileManager.default.contents(atPath: path)
            let verdict = job.mustFail ? .corrupt : CrashScenario.verdict(contents, for: job)
            if verdict != .intact {
                problems.append("\(job.name) (\(job.kind)) holds \(contents?.count ?? 0) bytes that are \(verdict)")
            }
        }
        return problems
    }
}

/// Numbers the requests a handler sees: 1, 2, 3…
final class ServedCount: Sendable {
    private let count = Mutex(0)
    func next() -> Int { count.withLock { $0 += 1; return $0 } }
}
