import Foundation
import XCTest
import HaulCore
import HaulTestSupport

/// Two claimer processes on one database file never hold the same job and together never run
/// more than the per-host cap.
///
/// There is no `haul run` to use as the claimer, so the test binary plays it: the parent test
/// starts this same binary twice, filtered to `testClaimerChild`, which acts only when the
/// `HAUL_TEST_CLAIMER_DB` environment variable is set (and is skipped otherwise).
final class TwoProcessClaimTests: XCTestCase {
    private static let databaseVariable = "HAUL_TEST_CLAIMER_DB"
    private static let reportVariable = "HAUL_TEST_CLAIMER_REPORT"
    private static let seedVariable = "HAUL_TEST_CLAIMER_SEED"
    private static let perHostCap = 2
    private static let jobs = 300
    /// Each child holds at most this many jobs: more than the caps leave for two (3 hosts × 2),
    /// fewer than all of them, so both children keep finding work.
    private static let maximumHeld = 4
    private static let readyMarker = "CLAIMER-READY"

    private struct Report: Codable {
        var claimed: [Int]
        var violations: [String]
        var claimCalls: Int
    }

    /// SQLite's lock is not fair: a busy-waiting process can miss every moment the other one
    /// lets go, so now and then one process does all the work and the round proves nothing. Such
    /// a round is run again (with a fresh database), up to three rounds in all.
    func testTwoProcessesNeverShareAJobOrExceedTheCap() throws {
        guard ProcessInfo.processInfo.environment[Self.databaseVariable] == nil else {
            throw XCTSkip("this process is a claimer child")
        }
        let directory = try makeTempDirectory()
        for round in 1...3 {
            let counts = try claimRound(in: try directory.makeDirectory("round-\(round)"))
            print("round \(round): claims per process \(counts.claims), claim calls \(counts.calls)")
            if counts.claims.allSatisfy({ $0 > 0 }) { return }
        }
        XCTFail("in three rounds, one process always did all the work: the claims never overlapped")
    }

    /// One round: two claimer processes empty a fresh queue; checks everything and returns how
    /// many jobs, and claim calls, each process made.
    private func claimRound(in folder: String) throws -> (claims: [Int], calls: [Int]) {
        let db = folder + "/q.db"
        let hosts = ["a.example", "b.example", "c.example"]
        do {
            let queue = try JobQueue(path: db)
            let resolver = DestinationResolver(directory: folder)
            let lines = try hosts.flatMap { host in
                try (0..<(Self.jobs / hosts.count)).map { number -> InputLine in
                    guard let line = try InputLine.parse(Array("https://\(host)/\(host)-\(number)".utf8), resolver: resolver) else {
                        throw UnexpectedJSON()
                    }
                    return line
                }
            }
            XCTAssertEqual(try queue.add(lines).compactMap { if case .added(let id) = $0 { id } else { nil } }.count, Self.jobs)
        }

        let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var children: [(RunningProcess, Pipe, String)] = []
        for child in 0..<2 {
            let report = folder + "/report-\(child).json"
            let go = Pipe()
            let running = try HaulProcess.start(
                testBinary, ["HaulEndToEndTests.TwoProcessClaimTests/testClaimerChild"],
                environment: HaulProcess.environment([Self.databaseVariable: db, Self.reportVariable: report,
                                                      Self.seedVariable: String(child + 1)]),
                currentDirectory: folder, stdinPipe: go)
            children.append((running, go, report))
        }
        // Both children say when they are ready, then block on their standard input until both
        // are told to go, so they claim at the same time.
        for (running, _, _) in children {
            XCTAssertTrue(running.waitForOutput(Self.readyMarker, timeout: 30), "a claimer child never got ready")
        }
        for (_, go, _) in children {
            try go.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
            try go.fileHandleForWriting.close()
        }
        var reports: [Report] = []
        for (running, _, reportPath) in children {
            let result = running.wait(timeout: 45)
            XCTAssertFalse(result.timedOut, "a claimer child hung")
            XCTAssertEqual(result.status, 0, "claimer child failed:\n\(result.stdoutText.suffix(3000))\n\(result.stderrText.suffix(2000))")
            guard let data = FileManager.default.contents(atPath: reportPath) else {
                XCTFail("no report from a child:\n\(result.stdoutText.suffix(3000))")
                continue
            }
            reports.append(try JSONDecoder().decode(Report.self, from: data))
        }
        XCTAssertEqual(reports.count, 2)
        XCTAssertEqual(reports.flatMap(\.violations), [])
        let claimed = reports.flatMap(\.claimed)
        let twice = Dictionary(grouping: claimed, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        XCTAssertEqual(twice, [], "jobs claimed by both processes (no job is ever handed back in this test)")
        XCTAssertEqual(Set(claimed).count, Self.jobs)
        let database = try Database(path: db, mode: .mustExist)
        XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM jobs WHERE state = 'done'"), Self.jobs)
        // Each job's one attempt finished it, so its record is on the job's row (migration 0017).
        XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM attempts"), 0, "a job was claimed more than once")
        XCTAssertEqual(try database.scalarInt("SELECT count(DISTINCT done_attempt_token) FROM jobs"), Self.jobs)
        XCTAssertEqual(try QueueInvariants.integrityCheck(database), ["ok"])
        XCTAssertEqual(try QueueInvariants.counterMismatches(in: database), [])
        return (reports.map(\.claimed.count), reports.map(\.claimCalls))
    }

    /// The claimer, run only in a child process started by the test above.
    func testClaimerChild() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let db = environment[Self.databaseVariable], let reportPath = environment[Self.reportVariable] else {
            throw XCTSkip("runs only as a child of testTwoProcessesNeverShareAJobOrExceedTheCap")
        }
        FileHandle.standardOutput.write(Data("\(Self.readyMarker)\n".utf8))  // unbuffered
        _ = readLine()  // wait for the parent's go
        let seed = UInt64(environment[Self.seedVariable] ?? "1") ?? 1
        let result = try ClaimWorker.run(path: db, perHostCap: Self.perHostCap, seed: seed, owner: "child-\(getpid())",
                                         maximumHeld: Self.maximumHeld)
        let report = Report(claimed: result.claimed, violations: result.violations, claimCalls: result.claimCalls)
        try JSONEncoder().encode(report).write(to: URL(fileURLWithPath: reportPath))
        XCTAssertEqual(result.violations, [])
    }
}
