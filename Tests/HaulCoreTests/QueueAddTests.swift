import Foundation
import Synchronization
import XCTest
@testable import HaulCore
import HaulTestSupport

/// `JobQueue.add`: idempotence, unique destinations, host keys and counters.
final class QueueAddTests: XCTestCase {
    func testAddingTheSameURLForTheSameDestinationTwiceIsOneJob() throws {
        let (queue, directory) = try makeQueue()
        let first = try add(["https://example.org/file.iso"], to: queue, in: directory.path)
        guard case .added(let id)? = first.first else { return XCTFail("\(first)") }
        let second = try add(["https://example.org/file.iso"], to: queue, in: directory.path)
        XCTAssertEqual(second, [.alreadyQueued(jobID: id)])
        // …also within one batch, and with an explicit out= naming the same file.
        let third = try add(["https://example.org/file.iso", "https://example.org/file.iso out=file.iso"], to: queue, in: directory.path)
        XCTAssertEqual(third, [.alreadyQueued(jobID: id), .alreadyQueued(jobID: id)])
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM jobs"), 1)
        XCTAssertEqual(try queue.status().counts[.queued], 1, "the counters must not count the repeats")
        XCTAssertEqual(try queue.database.scalarInt("SELECT queued FROM hosts"), 1)
        try assertCountersConsistent(queue.database)
    }

    /// Two URLs whose names are the longest a file may have and the same: the second takes the
    /// suffix too, the name shortened to keep it within 255 bytes (it was cut off, and the URL
    /// refused as the first one's).
    func testANameAtTheLengthLimitStillTakesItsSuffix() throws {
        let (queue, directory) = try makeQueue()
        let long = String(repeating: "é", count: 124) + "-x.tar.gz"  // 257 bytes: made 255 on a character boundary
        let outcomes = try add(["https://a.example/\(long)", "https://b.example/\(long)"], to: queue, in: directory.path)
        guard case .added = outcomes[0], case .added(let second) = outcomes[1] else { return XCTFail("\(outcomes)") }
        let name = try XCTUnwrap(try queue.job(id: second)?.destination).split(separator: "/").last.map(String.init) ?? ""
        XCTAssertLessThanOrEqual(name.utf8.count, 255, name)
        XCTAssertTrue(name.hasSuffix(".gz") && name.contains("-"), name)
        // Again: found under its suffixed name.
        XCTAssertEqual(try add(["https://b.example/\(long)"], to: queue, in: directory.path), [.alreadyQueued(jobID: second)])
    }

    func testReaddingAFinishedJobDoesNotRequeueIt() throws {
        let (queue, directory) = try makeQueue()
        let id = try XCTUnwrap(try add(["https://example.org/a"], to: queue, in: directory.path).first?.jobID)
        let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)).first)
        try queue.complete(jobID: lease.jobID, token: lease.token, status: 200, bytes: 3)
        XCTAssertEqual(try add(["https://example.org/a"], to: queue, in: directory.path), [.alreadyQueued(jobID: id)])
        XCTAssertEqual(try queue.job(id: id)?.state, .done)
        try assertCountersConsistent(queue.database)
    }

    /// A destination another URL holds: an `out=` naming it is rejected; a name made from the
    /// URL takes a stable suffix from the URL's hash instead, so adding it again finds it.
    func testADestinationTakenByAnotherURLIsRejectedOrSuffixed() throws {
        let (queue, directory) = try makeQueue()
        let lines = [
            "https://a.example/dir/x.iso",
            "https://b.example/other/x.iso",          // same default name, other host
            "https://a.example/y out=x.iso",          // same file through out=
            "https://a.example/dir/x.iso?v=2",        // another URL (query differs), same name
        ]
        let outcomes = try add(lines, to: queue, in: directory.path)
        guard case .added(let id)? = outcomes.first else { return XCTFail("\(outcomes)") }
        XCTAssertEqual(outcomes[2], .rejected(.destinationTaken(byJob: id, url: "https://a.example/dir/x.iso")))
        guard case .added(let b) = outcomes[1], case .added(let v2) = outcomes[3] else { return XCTFail("\(outcomes)") }
        let b64 = JobBatch.suffixed(directory.file("x.iso"), for: "https://b.example/other/x.iso")
        XCTAssertEqual(try queue.job(id: b)?.destination, b64)
        XCTAssertTrue(b64.hasSuffix(".iso") && b64.contains("/x-"), b64)
        XCTAssertNotEqual(try queue.job(id: v2)?.destination, b64)
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM jobs"), 3)
        XCTAssertEqual(try queue.database.rows("SELECT host, queued FROM hosts ORDER BY host") { "\($0.string(0)) \($0.int(1))" },
                       ["a.example:443 2", "b.example:443 1"])
        try assertCountersConsistent(queue.database)
        // Again: the same jobs, found under their suffixed names.
        XCTAssertEqual(try add(lines, to: queue, in: directory.path),
                       [.alreadyQueued(jobID: id), .alreadyQueued(jobID: b), outcomes[2], .alreadyQueued(jobID: v2)])
        try assertCountersConsistent(queue.database)
    }

    func testTheTakenMessageHidesCredentials() throws {
        let (queue, directory) = try makeQueue()
        try add(["https://user:secret@a.example/x.iso"], to: queue, in: directory.path)
        let outcome = try add(["https://b.example/y out=x.iso"], to: queue, in: directory.path)
        guard case .rejected(let reason)? = outcome.first else { return XCTFail("\(outcome)") }
        XCTAssertFalse(reason.description.contains("secret"), reason.description)
        XCTAssertTrue(reason.description.contains("***@a.example"), reason.description)
    }

    func testOneURLMayFillSeveralDestinations() throws {
        let (queue, directory) = try makeQueue()
        let outcomes = try add(["https://e.org/f", "https://e.org/f out=copy"], to: queue, in: directory.path)
        XCTAssertEqual(outcomes.compactMap(\.jobID).count, 2)
        XCTAssertEqual(try queue.jobs(url: "https://e.org/f").map(\.destination), [directory.path + "/f", directory.path + "/copy"])
    }

    func testHostKeysAndCountersPerHost() throws {
        let (queue, directory) = try makeQueue()
        try add(["HTTPS://Example.ORG/1", "https://example.org:443/2", "http://example.org/3", "http://example.org:8080/4",
                 "https://user@EXAMPLE.org./5", "https://[::1]:8443/6"], to: queue, in: directory.path, maxAttempts: 7)
        XCTAssertEqual(try queue.database.rows("SELECT host, queued FROM hosts ORDER BY host") { "\($0.string(0)) \($0.int(1))" },
                       ["[::1]:8443 1", "example.org:443 3", "example.org:80 1", "example.org:8080 1"])
        XCTAssertEqual(Set(try queue.list(JobFilter()).map(\.maxAttempts)), [7])
        XCTAssertEqual(try queue.list(JobFilter(host: "EXAMPLE.ORG:443")).count, 3)
        try assertCountersConsistent(queue.database)
    }

    func testAddedJobsStartQueuedWithNothingRecorded() throws {
        let clock = TestClock(1_000_000)
        let (queue, directory) = try makeQueue(clock: clock)
        let sha = String(repeating: "ab", count: 32)
        let id = try XCTUnwrap(try add(["https://e.org/f sha256=\(sha)"], to: queue, in: directory.path).first?.jobID)
        let job = try XCTUnwrap(try queue.job(id: id))
        XCTAssertEqual(job.state, .queued)
        XCTAssertEqual(job.attempts, 0)
        XCTAssertEqual(job.nextAttemptAt, 0)
        XCTAssertNil(job.leaseToken)
        XCTAssertNil(job.expectedBytes)
        XCTAssertEqual(job.checksum, "sha256=\(sha)")
        XCTAssertEqual(job.createdAt, 1_000_000)
        XCTAssertEqual(job.destination, directory.path + "/f")
        XCTAssertEqual(try queue.status().unknownSize, 1)
    }

    /// Every algorithm's checksum is stored as ALGORITHM=HEX, lower-case, through the multi-row
    /// insert and through the one-row insert of a name that gives way to a suffixed one.
    func testEveryChecksumIsStoredWithItsAlgorithm() throws {
        let (queue, directory) = try makeQueue()
        var lines: [String] = []
        var expected: [String: String] = [:]  // URL → stored checksum
        for (index, algorithm) in Checksum.Algorithm.allCases.enumerated() {
            let hex = String(repeating: "Ab", count: algorithm.hexDigits / 2)
            // Two hosts, one file name: the second line's job gets a suffixed name.
            for host in ["a", "b"] {
                lines.append("https://\(host).example/f\(index) \(algorithm.rawValue)=\(hex)")
                expected["https://\(host).example/f\(index)"] = "\(algorithm.rawValue)=\(hex.lowercased())"
            }
        }
        lines.append("https://a.example/none")
        let outcomes = try add(lines, to: queue, in: directory.path)
        XCTAssertEqual(outcomes.compactMap(\.jobID).count, lines.count, "\(outcomes)")
        let jobs = try queue.list(JobFilter())
        XCTAssertEqual(jobs.count, lines.count)
        for job in jobs { XCTAssertEqual(job.checksum, expected[job.url], job.url) }
        XCTAssertEqual(jobs.filter { ($0.destination as NSString).lastPathComponent.contains("-") }.count, Checksum.Algorithm.allCases.count, "the suffixed names")
        for job in jobs {
            if let stored = job.checksum { XCTAssertEqual(Checksum(stored: stored)?.description, stored) }
        }
    }

    func testALargeBatchThroughTheImporterKeepsCountersRight() throws {
        let (queue, directory) = try makeQueue()
        var text = ""
        for number in 0..<30_000 {
            text += "https://h\(number % 7).example/files/\(number).bin\n"
            if number % 1000 == 0 { text += "https://h0.example/files/0.bin\nftp://nope/\(number)\n" }
        }
        let path = try directory.write("urls.txt", Data(text.utf8))
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path), batchSize: 4096) { _, _, _ in }
        var summary = URLListImporter.Summary()
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        try importer.importLines(from: descriptor, into: &summary)
        XCTAssertEqual(summary.added, 30_000)
        XCTAssertEqual(summary.alreadyQueued, 30)
        XCTAssertEqual(summary.rejected, 30)
        XCTAssertEqual(try queue.status().counts[.queued], 30_000)
        try assertCountersConsistent(queue.database)
    }

    /// An import that is not streaming asks the allocator to give freed memory back after each
    /// batch it wrote (the haul executable's jemalloc would keep it for seconds); a streaming one
    /// (`haul get`, small batches) does not.
    func testAnImportReleasesFreedMemoryAfterEachBatchUnlessStreaming() throws {
        let directory = try makeTempDirectory()
        let text = (0..<10).map { "https://h\($0 % 3).example/files/\($0).bin\n" }.joined()
        let path = try directory.write("urls.txt", Data(text.utf8))
        let releases = Mutex(0)
        for streams in [false, true] {
            let queue = try JobQueue(path: directory.file("q\(streams).db"))
            var importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path), batchSize: 4) { _, _, _ in }
            importer.releaseFreedMemory = { releases.withLock { $0 += 1 } }
            if streams { importer.streaming = .init(firstBatchSize: 4, batchSize: 4, afterBatch: {}) }
            var summary = URLListImporter.Summary()
            let descriptor = open(path, O_RDONLY)
            defer { close(descriptor) }
            try importer.importLines(from: descriptor, into: &summary)
            XCTAssertEqual(summary.added, 10)
            XCTAssertEqual(releases.withLock { $0 }, 3, streams ? "none more when streaming" : "one after each of the 3 batches")
        }
    }

    /// A batch of several statements over several hosts: every outcome belongs to its line, ids
    /// follow line order, and the first line with a destination gets it.
    func testOutcomesAndIdsFollowTheLines() throws {
        let (queue, directory) = try makeQueue()
        var texts: [String] = []
        for number in 0..<700 { texts.append("https://h\(number % 3).example/f/\(number).bin") }
        texts.insert("https://h2.example/contested", at: 5)
        texts.insert("https://h0.example/other out=contested", at: 9)
        texts.insert("https://h0.example/f/3.bin", at: 300)  // repeats a line of the same batch
        let outcomes = try add(texts, to: queue, in: directory.path)
        XCTAssertEqual(outcomes.count, texts.count)
        let jobs = Dictionary(uniqueKeysWithValues: try queue.database.rows("SELECT id, url FROM jobs") { ($0.int(0), $0.string(1)) })
        var addedIDs: [Int] = []
        for (text, outcome) in zip(texts, outcomes) {
            switch outcome {
            case .added(let id):
                XCTAssertEqual(jobs[id], text, "the job added for '\(text)'")
                addedIDs.append(id)
            case .alreadyQueued(let id):
                XCTAssertEqual(text, "https://h0.example/f/3.bin")
                XCTAssertEqual(jobs[id], text)
            case .rejected(let reason):
                XCTAssertEqual(text, "https://h0.example/other out=contested")
                guard case .destinationTaken(let id, let url) = reason else { return XCTFail("\(reason)") }
                XCTAssertEqual(url, "https://h2.example/contested")
                XCTAssertEqual(jobs[id], url)
            }
        }
        XCTAssertEqual(jobs.count, texts.count - 2)
        XCTAssertEqual(addedIDs, Array(1...addedIDs.count), "ids in line order")

        // Again, with new lines among them: statements where some rows are new and some not.
        var again = texts
        for number in 700..<1000 { again.insert("https://h\(number % 3).example/f/\(number).bin", at: number - 650) }
        let second = try add(again, to: queue, in: directory.path)
        let added = Dictionary(uniqueKeysWithValues: try queue.database.rows("SELECT id, url FROM jobs") { ($0.int(0), $0.string(1)) })
        for (text, outcome) in zip(again, second) {
            switch outcome {
            case .added(let id):
                XCTAssertNil(jobs[id], "'\(text)' was added before")
                XCTAssertEqual(added[id], text)
            case .alreadyQueued(let id): XCTAssertEqual(added[id], text)
            case .rejected: XCTAssertEqual(text, "https://h0.example/other out=contested")
            }
        }
        let secondIDs = second.compactMap { if case .added(let id) = $0 { return id } else { return nil } }
        XCTAssertEqual(secondIDs, Array((jobs.count + 1)...(jobs.count + 300)), "ids in line order, after the first batch's")
        XCTAssertEqual(try queue.status().counts[.queued], texts.count - 2 + 300)
        try assertCountersConsistent(queue.database)
    }

    /// The add turns CHECK constraints off for its inserts only.
    func testCheckConstraintsStillHoldAfterAnAdd() throws {
        let (queue, directory) = try makeQueue()
        try add(["https://e.org/a", "https://e.org/b"], to: queue, in: directory.path)
        XCTAssertThrowsError(try queue.database.run("UPDATE jobs SET state = 'lost'")) { error in
            XCTAssertTrue(String(describing: error).contains("CHECK"), "\(error)")
        }
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM jobs WHERE state = 'queued'"), 2)
    }

    func testJobIDsFollowTheLargestIdAndRefuseAGap() throws {
        var ids = JobIDs(after: 10)
        XCTAssertEqual(try ids.take(0, lastInserted: 10, sql: ""), 10..<10)
        XCTAssertEqual(try ids.take(3, lastInserted: 13, sql: ""), 11..<14)
        XCTAssertEqual(ids.last, 13)
        XCTAssertThrowsError(try ids.take(2, lastInserted: 99, sql: ""))
        var full = JobIDs(after: Int.max - 1)
        XCTAssertThrowsError(try full.take(1, lastInserted: Int.max, sql: ""), "no id after the last one")
    }
}
