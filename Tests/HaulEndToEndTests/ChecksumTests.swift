import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// Checksums in the input, end to end: `md5=`, `sha1=`, `sha256=` and `sha512=` after a URL, and
/// aria2's `checksum=TYPE=HEX` lines, are checked before a file is placed; a mismatch never
/// reaches the destination and fails naming its algorithm; a checksum haul cannot take is
/// refused by line, and the other lines are queued all the same.
final class ChecksumTests: XCTestCase {
    /// The digest of `data`, as lower-case hex.
    private static func digest(_ data: Data, _ algorithm: Checksum.Algorithm) -> String {
        var digest = algorithm.makeDigest()
        digest.update(data)
        return digest.finalize()
    }

    /// For each algorithm, a right checksum (given in upper case) places the file and a wrong one
    /// leaves no file, not even a temp file, and fails with "ALGORITHM mismatch: expected …,
    /// got …"; show and list --json give the checksum as ALGORITHM=HEX.
    func testRightChecksumIsPlacedAndAWrongOneNeverIs() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let algorithms = Checksum.Algorithm.allCases
        var lines: [String] = []
        var bodies: [Checksum.Algorithm: Data] = [:]
        for (index, algorithm) in algorithms.enumerated() {
            let data = runTestData(40_000 + index, seed: 600 + UInt64(index))
            bodies[algorithm] = data
            server.route("/right-\(algorithm).bin", FaultServer.file(data, etag: "\"r\(index)\""))
            server.route("/wrong-\(algorithm).bin", FaultServer.file(data, etag: "\"w\(index)\""))
            lines += [
                "\(server.url("/right-\(algorithm).bin").absoluteString) \(algorithm)=\(Self.digest(data, algorithm).uppercased())",
                "\(server.url("/wrong-\(algorithm).bin").absoluteString) \(algorithm)=\(Self.digest(data + [0], algorithm))",
            ]
        }
        try h.add(lines)

        let result = try h.run(["run", "--max-attempts", "1"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.outputFiles(), algorithms.map { "right-\($0).bin" }.sorted(), "no wrong file, and no temp file")
        let listed: [[String: Any]] = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: try h.run(["list", "--json"]).stdout) as? [[String: Any]])
        for (index, algorithm) in algorithms.enumerated() {
            let data = try XCTUnwrap(bodies[algorithm])
            let right = Self.digest(data, algorithm), wrong = Self.digest(data + [0], algorithm)
            XCTAssertEqual(h.contents("right-\(algorithm).bin"), data, "\(algorithm)")
            let placed = try h.show(2 * index + 1)
            XCTAssertEqual(placed["state"] as? String, "done", "\(algorithm)")
            XCTAssertEqual(placed["checksum"] as? String, "\(algorithm)=\(right)", "stored lower-case")
            let refused = try h.show(2 * index + 2)
            XCTAssertEqual(refused["state"] as? String, "failed", "\(algorithm)")
            let reason = refused["last_error"] as? String ?? ""
            XCTAssertTrue(reason.hasSuffix(": \(algorithm) mismatch: expected \(wrong), got \(right)"), reason)
            XCTAssertEqual(listed[2 * index + 1]["checksum"] as? String, "\(algorithm)=\(wrong)", "list --json")
            // The field scripts read before there were other algorithms: a sha256's hex, else null.
            XCTAssertEqual(listed[2 * index]["sha256"] as? String, algorithm == .sha256 ? right : nil, "\(algorithm)")
            let shown = try h.run(["show", String(2 * index + 2)])
            XCTAssertTrue(shown.stdoutText.contains("\n  checksum:     \(algorithm)=\(wrong)\n"), shown.stdoutText)
        }
        XCTAssertEqual(server.requestCount(), 2 * algorithms.count, "one attempt each")
    }

    /// A resumed body is checked from its first byte: the bytes of the partial file are hashed
    /// before the rest arrives, so the right checksum places the file after a resume.
    func testResumedBodyIsCheckedFromItsFirstByte() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let cut = 30_000
        var lines: [String] = []
        var bodies: [Checksum.Algorithm: Data] = [:]
        for (index, algorithm) in Checksum.Algorithm.allCases.enumerated() {
            let data = runTestData(100_000, seed: 700 + UInt64(index))
            bodies[algorithm] = data
            let etag = "\"c\(index)\""
            server.route("/\(algorithm).bin", sequence: [
                { request in FaultServer.fileResponse(data, request: request, etag: etag).truncated(afterBytes: cut) },
                FaultServer.file(data, etag: etag),
            ])
            lines.append("\(server.url("/\(algorithm).bin").absoluteString) \(algorithm)=\(Self.digest(data, algorithm))")
        }
        try h.add(lines)

        let result = try h.run(["run", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        for algorithm in Checksum.Algorithm.allCases {
            XCTAssertEqual(h.contents("\(algorithm).bin"), bodies[algorithm], "\(algorithm)")
            let requests = server.requests(path: "/\(algorithm).bin")
            XCTAssertEqual(requests.map(\.rangeHeader), [nil, "bytes=\(cut)-"], "\(algorithm): the second request must resume")
        }
        XCTAssertEqual(h.outputFiles(), Checksum.Algorithm.allCases.map { "\($0).bin" }.sorted())
    }

    /// aria2's checksum=sha-1= and checksum=SHA-512= lines are checked like sha1= and sha512=;
    /// sha-384 (which aria2 knows and haul does not compute), hex of the wrong length and a
    /// second checksum refuse their URL, naming the option's line; nothing is fetched for them.
    func testAria2ChecksumLinesAreCheckedAndTheOthersRefusedByLine() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let a = runTestData(20_000, seed: 801), b = runTestData(20_001, seed: 802)
        for (name, data) in [("a", a), ("b", b), ("c", a), ("d", a), ("e", a)] {
            server.route("/\(name).bin", FaultServer.file(data, etag: "\"\(name)\""))
        }
        let text = """
            \(server.url("/a.bin").absoluteString)
              checksum=sha-1=\(Self.digest(a, .sha1))
            \(server.url("/b.bin").absoluteString)
              out=b-renamed.bin
              checksum=SHA-512=\(Self.digest(b, .sha512).uppercased())
            \(server.url("/c.bin").absoluteString)
              checksum=sha-384=\(String(repeating: "ab", count: 48))
            \(server.url("/d.bin").absoluteString)
            \tchecksum=md5=\(Self.digest(a, .md5).dropLast())
            \(server.url("/e.bin").absoluteString) md5=\(Self.digest(a, .md5))
              checksum=sha-1=\(Self.digest(a, .sha1))

            """
        let list = try h.temp.write("aria.txt", Data(text.utf8))

        let added = try h.run(["add", "-i", list, "-d", h.out])

        XCTAssertEqual(added.status, 1, added.stderrText)
        XCTAssertEqual(added.stdoutText, "added 2, already queued 0, rejected 3\n")
        XCTAssertEqual(added.stderrLines.count, 3, added.stderrText)
        let reasons = added.stderrLines.map { String($0.prefix(while: { $0 != "—" })) }
        XCTAssertEqual(reasons.first, "haul: \(list):6: checksum type 'sha-384' on line 7 is not supported (haul checks md5, sha-1, sha-256, sha-512); the URL is not queued ")
        XCTAssertEqual(reasons.dropFirst().first,
                       "haul: \(list):8: malformed md5 '\(Self.digest(a, .md5).prefix(20))…' (checksum= on line 9): expected 32 hex digits, found 31 ")
        XCTAssertEqual(reasons.last,
                       "haul: \(list):10: a second checksum, sha1= (checksum= on line 11), after md5=: haul checks one per URL; keep one ")

        let run = try h.run(["run", "--max-attempts", "1"])

        XCTAssertEqual(run.status, 0, run.stdoutText + run.stderrText)
        XCTAssertEqual(h.outputFiles(), ["a.bin", "b-renamed.bin"])
        XCTAssertEqual(h.contents("a.bin"), a)
        XCTAssertEqual(h.contents("b-renamed.bin"), b)
        XCTAssertEqual(try h.show(1)["checksum"] as? String, "sha1=\(Self.digest(a, .sha1))")
        XCTAssertEqual(try h.show(2)["checksum"] as? String, "sha512=\(Self.digest(b, .sha512))")
        XCTAssertEqual(server.allRequests.map(\.path).sorted(), ["/a.bin", "/b.bin"])
    }

    /// After a URL, a checksum's hex must have its algorithm's length: a wrong length or a
    /// character that is not hex is refused naming the algorithm, the digits it takes and the
    /// line; the good lines are queued all the same.
    func testMalformedChecksumsAfterAURLAreRefusedByLine() throws {
        let h = try RunHarness(self)
        let text = """
            https://e.org/1 md5=abc
            https://e.org/2 sha1=\(String(repeating: "a", count: 64))
            https://e.org/3 sha512=\(String(repeating: "a", count: 127))x
            https://e.org/4 sha256=\(String(repeating: "A", count: 64))
            https://e.org/5 md5=\(String(repeating: "a", count: 32)) sha1=\(String(repeating: "b", count: 40))
            https://e.org/6 sha512=\(String(repeating: "c", count: 128))
            https://e.org/7 sha1=\(String(repeating: "d", count: 41))

            """
        let list = try h.temp.write("urls.txt", Data(text.utf8))

        let added = try h.run(["add", "-i", list, "-d", h.out])

        XCTAssertEqual(added.status, 1, added.stderrText)
        XCTAssertEqual(added.stdoutText, "added 2, already queued 0, rejected 5\n")
        let reasons = added.stderrLines.map { String($0.prefix(while: { $0 != "—" })) }
        XCTAssertEqual(reasons, [
            "haul: \(list):1: malformed md5 'abc': expected 32 hex digits, found 3 ",
            "haul: \(list):2: malformed sha1 'aaaaaaaaaaaaaaaaaaaa…': expected 40 hex digits, found 64 (the length of a sha256: give it as sha256=) ",
            "haul: \(list):3: malformed sha512 'aaaaaaaaaaaaaaaaaaaa…': expected 128 hex digits, found a character that is not one (0-9, a-f) ",
            "haul: \(list):5: a second checksum, sha1=, after md5=: haul checks one per URL; keep one ",
            "haul: \(list):7: malformed sha1 'dddddddddddddddddddd…': expected 40 hex digits, found 41 ",
        ], added.stderrText)
        let jobs: [[String: Any]] = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: try h.run(["list", "--json"]).stdout) as? [[String: Any]])
        XCTAssertEqual(jobs.compactMap { $0["checksum"] as? String },
                       ["sha256=" + String(repeating: "a", count: 64), "sha512=" + String(repeating: "c", count: 128)])
    }

    /// A job queued before checksums of other algorithms (its sha256 in the old column) is still
    /// checked once the database is upgraded: its right sha256 places it, a wrong one fails it.
    func testSHA256QueuedBeforeTheUpgradeIsStillChecked() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(30_000, seed: 901)
        server.route("/old-right.bin", FaultServer.file(data, etag: "\"o1\""))
        server.route("/old-wrong.bin", FaultServer.file(data, etag: "\"o2\""))
        let right = Self.digest(data, .sha256), wrong = Self.digest(data + [1], .sha256)
        do {
            // The queue as a haul without 0006_checksums.sql left it, rows written as its add did.
            let old = try Database(path: h.db, migrations: Migration.embedded.filter { $0.version < 6 })
            XCTAssertEqual(try old.scalarInt("SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'sha256'"), 1)
            try old.run("INSERT INTO hosts (id, host) VALUES (1, ?)", "127.0.0.1:\(server.port)")
            try old.run("""
                INSERT INTO jobs (url, host_id, destination, destination_key, max_attempts, sha256, created_at, updated_at) VALUES
                    (?, 1, ?, 1, 1, ?, 0, 0), (?, 1, ?, 2, 1, ?, 0, 0)
                """, server.url("/old-right.bin").absoluteString, h.out + "/old-right.bin", right,
                    server.url("/old-wrong.bin").absoluteString, h.out + "/old-wrong.bin", wrong)
            try old.execute("""
                UPDATE job_totals SET jobs = 2, unknown_size = 2 WHERE state = 'queued';
                UPDATE hosts SET queued = 2;
                """)
        }

        let result = try h.run(["run", "--max-attempts", "1"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.outputFiles(), ["old-right.bin"])
        XCTAssertEqual(h.contents("old-right.bin"), data)
        let placed = try h.show(1)
        XCTAssertEqual(placed["state"] as? String, "done")
        XCTAssertEqual(placed["checksum"] as? String, "sha256=\(right)")
        let refused = try h.show(2)
        XCTAssertEqual(refused["state"] as? String, "failed")
        let reason = refused["last_error"] as? String ?? ""
        XCTAssertTrue(reason.hasSuffix(": sha256 mismatch: expected \(wrong), got \(right)"), reason)
    }

    /// A checksum the queue holds but cannot read (the database changed by hand) is never
    /// skipped: the job fails before any request, saying what to do.
    func testUnreadableStoredChecksumFailsTheJobUnfetched() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        server.route("/f.bin", FaultServer.file(runTestData(1_000, seed: 950)))
        try h.add(["\(server.url("/f.bin").absoluteString) md5=\(String(repeating: "a", count: 32))"])
        do {
            let database = try Database(path: h.db)
            try database.run("UPDATE jobs SET checksum = 'crc32=1234abcd'")
        }

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requestCount(), 0, "nothing is fetched unchecked")
        XCTAssertEqual(h.outputFiles(), [])
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        let reason = job["last_error"] as? String ?? ""
        XCTAssertTrue(reason.contains("checksum 'crc32=1234abcd' for job 1") && reason.contains("haul retry 1"), reason)
    }

    /// A resumed download whose checksum does not match (here the server changed the file but
    /// not its ETag, so the rest it sent belongs to another version) is tried once more from
    /// zero, whatever its attempt's number, and the whole new file matches.
    func testAResumedDownloadThatMismatchesIsTriedAgainFromZero() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let versionA = runTestData(100_000, seed: 640)
        let versionB = runTestData(100_000, seed: 641)
        server.route("/same-tag.bin", sequence: [
            { request in FaultServer.fileResponse(versionA, request: request, etag: "\"same\"").truncated(afterBytes: 50_000) },
            { request in FaultServer.fileResponse(versionB, request: request, etag: "\"same\"") },
        ])
        try h.add(["\(server.url("/same-tag.bin").absoluteString) sha256=\(Self.digest(versionB, .sha256))"])

        let result = try h.run(["run", "--max-attempts", "4"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("same-tag.bin"), versionB)
        XCTAssertEqual(server.requests(path: "/same-tag.bin").map(\.rangeHeader), [nil, "bytes=50000-", nil],
                       "cut, resumed (and mismatched), then from zero")
    }
}
