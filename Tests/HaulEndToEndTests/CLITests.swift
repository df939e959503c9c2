import Foundation
import XCTest
import HaulCore
import HaulTestSupport

/// The `haul` command line, run as the built binary.
final class CLITests: XCTestCase {
    private let knownCommands = ["add", "status", "list", "export", "show", "retry", "cancel"]

    /// The binary under test is the one built with the tests: it sits in the products directory,
    /// next to the test executable, found through the test bundle — not by the fallback path.
    func testTheBinaryIsFoundInTheProductsDirectoryNextToTheTestBundle() throws {
        let binary = try haulExecutable().standardizedFileURL
        let testExecutable = try XCTUnwrap(Bundle.main.executableURL).resolvingSymlinksInPath()
        XCTAssertEqual(binary.deletingLastPathComponent().path, testExecutable.deletingLastPathComponent().path,
                       "haul was not found in the products directory (bundle URL: \(Bundle(for: CLITests.self).bundleURL.path))")
        #if os(Linux)
        XCTAssertEqual(binary.path, Bundle(for: CLITests.self).bundleURL.appendingPathComponent("haul").standardizedFileURL.path,
                       "on Linux the bundle URL is the products directory")
        #endif
    }

    // MARK: - Help, version, usage errors

    func testHelpAndVersion() throws {
        for arguments in [["--help"], ["-h"], ["help"]] {
            let result = try haul(arguments)
            XCTAssertEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.stdoutText.contains("USAGE: haul <command>"), result.stdoutText)
            for command in knownCommands { XCTAssertTrue(result.stdoutText.contains("  \(command) "), "\(command) missing from help") }
            XCTAssertEqual(result.stderrText, "")
        }
        let version = try haul(["--version"])
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(version.stdoutLines.first, "haul \(HaulVersion.string)")
        // The libraries it runs on, with their own versions: libcurl with its TLS and HTTP/2
        // libraries, then SQLite, then the memory allocator.
        XCTAssertEqual(version.stdoutLines.count, 4, version.stdoutText)
        let curl = version.stdoutLines.dropFirst().first ?? ""
        XCTAssertTrue(curl.hasPrefix("libcurl/7.") || curl.hasPrefix("libcurl/8."), curl)
        XCTAssertTrue(curl.contains("OpenSSL/") && curl.contains("nghttp2/"), curl)
        XCTAssertTrue(version.stdoutLines.contains { $0.hasPrefix("SQLite/3.") }, version.stdoutText)
        // jemalloc serves the process's malloc (Allocator checks it by its own count).
        XCTAssertTrue(version.stdoutLines.last?.hasPrefix("jemalloc/5.") == true, version.stdoutText)
    }

    /// The executable's own jemalloc settings (`malloc_conf` in Sources/CFileSync/CFileSync.c) are in effect: jemalloc
    /// prints its options at exit when asked to by MALLOC_CONF, which adds to them.
    func testTheAllocatorKeepsLargerBlocksPerThread() throws {
        let result = try haul(["--version"], environment: ["MALLOC_CONF": "stats_print:true"])
        XCTAssertEqual(result.status, 0)
        XCTAssertTrue(result.stderrLines.contains { $0.trimmingCharacters(in: .whitespaces) == "opt.tcache_max: 131072" },
                      result.stderrLines.filter { $0.contains("tcache_max") }.joined(separator: "\n"))
    }

    /// Every command the top-level help lists (so also ones added later) answers --help.
    func testEveryCommandHasHelp() throws {
        let top = try haul(["--help"]).stdoutText
        let section = top.components(separatedBy: "COMMANDS:").dropFirst().first?.components(separatedBy: "OPTIONS:").first ?? ""
        let listed = section.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        XCTAssertTrue(Set(knownCommands).isSubset(of: listed), "help lists \(listed)")
        for command in listed {
            for flag in ["--help", "-h"] {
                let result = try haul([command, flag])
                XCTAssertEqual(result.status, 0, "\(command) \(flag): \(result.stderrText)")
                XCTAssertTrue(result.stdoutText.hasPrefix("OVERVIEW: "), "\(command) \(flag): \(result.stdoutText)")
                XCTAssertTrue(result.stdoutText.contains("USAGE: haul \(command)"), "\(command) \(flag): \(result.stdoutText)")
                XCTAssertTrue(result.stdoutText.contains("--db"), "\(command): --db not documented")
            }
        }
        XCTAssertEqual(try haul(["help", "add"]).stdoutText, try haul(["add", "--help"]).stdoutText)
    }

    func testUsageErrorsExit64WithUsageOnStderr() throws {
        let directory = try makeTempDirectory()
        let cases: [([String], String)] = [
            (["list", "--bogus"], "unknown option '--bogus'"),
            (["status", "--verbose"], "unknown option '--verbose'"),
            (["add", "--nope", "https://e.org/x"], "unknown option '--nope'"),
            (["frobnicate"], "unknown command 'frobnicate'"),
            ([], "no command given"),
            (["add"], "give URLs"),
            (["list", "--limit", "-1"], "'--limit'"),
            (["list", "--state", "sleeping"], "unknown state 'sleeping'"),
            (["list", "--json=yes"], "takes no value"),
            (["export", "--format", "xml"], "unknown format 'xml'"),
            (["show"], "give one job id or URL"),
            (["cancel", "abc"], "'abc' is not a job id"),
            (["retry"], "--failed"),
            (["status", "--db"], "missing value"),
            // Whether or not a queue exists: no haul.db here.
            (["run", "-j", "0"], "'--jobs' needs a whole number from 1 to 100000"),
            (["run", "--stall", "x"], "'--stall' needs a number of seconds"),
            (["status", "--watch", "0.01"], "'--watch' needs a number of seconds"),
            (["get", "-j", "0", "https://e.org/x"], "'--jobs' needs a whole number from 1 to 100000"),
            // Short options together, as getopt reads them.
            (["run", "-j0"], "'--jobs' needs a whole number from 1 to 100000"),
            (["get", "-qj0", "https://e.org/x"], "'--jobs' needs a whole number from 1 to 100000"),
            (["get", "-kZ", "https://e.org/x"], "unknown option '-Z' in '-kZ'"),
            (["list", "-Z"], "unknown option '-Z'"),
            (["status", "-qw"], "unknown option '-q' in '-qw'"),
            (["help", "nosuch"], "unknown command 'nosuch'"),
            // A header without its colon is named by its first word, not echoed with its value.
            (["add", "-H", "Authorization Bearer SECRET-Y", "https://e.org/x"], "the header 'Authorization …' has no colon"),
            // Numbers past what haul counts with are refused, not a crash (SIGILL).
            (["run", "-j", "9223372036854775807"], "'--jobs' needs a whole number from 1 to 100000"),
            (["run", "--per-host", "9223372036854775807"], "'--per-host'"),
            (["run", "--max-attempts", "9223372036854775807"], "'--max-attempts'"),
            (["run", "--stall", "1e300"], "at most a year"),
            (["status", "--watch", "1e300"], "from 0.1 to 86400"),
            // Known before the queue is made: no haul.db is left behind.
            (["add", "--layout", "HOST", "https://e.org/x"], "'--layout' is flat, host or path"),
            (["add", "--if-exists", "never", "https://e.org/x"], "'--if-exists' is skip"),
            (["get", "--layout", "bad", "https://e.org/x"], "'--layout' is flat, host or path"),
            (["add", "-d", "a\nb\u{1B}[31mred", "https://e.org/x"], "'--dir' holds a control character (\\x0A)"),
        ]
        for (arguments, message) in cases {
            let result = try haul(arguments, in: directory.path)
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains(message), "\(arguments): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains("usage: haul"), "\(arguments): no usage in \(result.stderrText)")
            XCTAssertEqual(result.stdoutText, "", "\(arguments)")
        }
        XCTAssertEqual(directory.contents(), [], "a usage error created files")
    }

    /// Short options together, as curl, wget and aria2c take them: flags bundled, and a value
    /// attached to the last one.
    func testShortOptionsBundleAndTakeAttachedValues() throws {
        let directory = try makeTempDirectory()
        let added = try haul(["add", "-d\(directory.file("out"))", "-HX-Note: -kq", "https://e.org/x"], in: directory.path)
        XCTAssertEqual(added.status, 0, added.stderrText)
        let exported = try haul(["export", "-ojobs.jsonl"], in: directory.path)
        XCTAssertEqual(exported.status, 0, exported.stderrText)
        let line = try String(contentsOfFile: directory.file("jobs.jsonl"), encoding: .utf8)
        XCTAssertTrue(line.contains("\"url\":\"https://e.org/x\""), line)
        XCTAssertTrue(line.contains(directory.file("out/x")), "-dDIR: \(line)")
        let shown = try haul(["show", "1"], in: directory.path)
        XCTAssertTrue(shown.stdoutText.contains("X-Note"), "-HVALUE: \(shown.stdoutText)")
    }

    func testCommandsOnAMissingDatabaseFailClearlyAndCreateNothing() throws {
        let directory = try makeTempDirectory()
        let elsewhere = directory.file("elsewhere.db")
        let cases: [([String], [String: String])] = [
            (["status"], [:]),
            (["status", "--json"], [:]),
            (["list"], [:]),
            (["export", "-o", "jobs.jsonl"], [:]),
            (["show", "1"], [:]),
            (["retry", "--failed"], [:]),
            (["cancel", "1"], [:]),
            (["status", "--db", elsewhere], [:]),
            (["status"], ["HAUL_DB": elsewhere]),
        ]
        for (arguments, environment) in cases {
            let result = try haul(arguments, in: directory.path, environment: environment)
            XCTAssertEqual(result.status, 1, "\(arguments) \(environment): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains("no haul database at"), "\(arguments): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains(environment.isEmpty && !arguments.contains("--db") ? "haul.db" : elsewhere),
                          result.stderrText)
            XCTAssertEqual(result.stderrLines.count, 1, "one clear line: \(result.stderrText)")
            XCTAssertEqual(directory.contents(), [], "\(arguments) created a file")
        }
    }

    func testDatabasesHaulMustNotUseAreRefusedUntouched() throws {
        let directory = try makeTempDirectory()
        let newer = directory.file("newer.db")
        do {
            let database = try Database(path: newer)
            try database.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 1)")
        }
        let text = try directory.write("notes.txt", Data("https://e.org/x\n".utf8))
        for (path, message) in [(newer, "made by a newer haul"), (text, "is not a SQLite database")] {
            let before = FileManager.default.contents(atPath: path)
            for arguments in [["status", "--db", path], ["add", "--db", path, "https://e.org/y"]] {
                let result = try haul(arguments, in: directory.path)
                XCTAssertEqual(result.status, 1, "\(arguments): \(result.stderrText)")
                XCTAssertTrue(result.stderrText.contains(message), "\(arguments): \(result.stderrText)")
                XCTAssertEqual(FileManager.default.contents(atPath: path), before, "\(arguments) changed \(path)")
            }
        }
        XCTAssertEqual(directory.contents(), ["newer.db", "notes.txt"])
    }

    /// An argument whose bytes are not UTF-8 (a path in Latin-1) is refused: Swift would read it
    /// with U+FFFD in place of the bytes, and haul would make and fill another folder or queue.
    func testAnArgumentThatIsNotUTF8IsRefused() throws {
        let directory = try makeTempDirectory()
        let binary = try haulExecutable().path
        for command in [#"exec "$0" add -d "$(printf 'out\377')" https://e.org/x"#, #"exec "$0" status --db "$(printf 'q\376.db')""#] {
            let result = try HaulProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", command, binary], environment: HaulProcess.environment([:]),
                                             currentDirectory: directory.path, input: .none, timeout: 30)
            XCTAssertEqual(result.status, 64, "\(command): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains("is not UTF-8 text"), result.stderrText)
        }
        XCTAssertEqual(directory.contents(), [], "nothing made under another name")
    }

    /// `--db` names a file whatever it looks like to SQLite (`file:…` is a URI to Debian's SQLite,
    /// which kept the jobs in another file, readable by all), never a queue in memory; a server
    /// URL in capitals is still PostgreSQL's, and its password is never shown.
    func testADatabaseNameIsAFileAndNeverMemory() throws {
        let directory = try makeTempDirectory()
        let added = try haul(["add", "--db", "file:cred.db", "-u", "bob:secret", "http://127.0.0.1:9/x"], in: directory.path)
        XCTAssertEqual(added.status, 0, added.stderrText)
        XCTAssertEqual(directory.contents(), ["file:cred.db"], "the job is in the file named")
        let mode = try FileManager.default.attributesOfItem(atPath: directory.file("file:cred.db"))[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        let status = try haul(["status", "--db", "file:cred.db", "--json"], in: directory.path)
        XCTAssertTrue(status.stdoutText.contains("\"queued\":1"), status.stdoutText)
        for name in [":memory:", ""] {
            let refused = try haul(["add", "--db", name, "http://127.0.0.1:9/y"], in: directory.path)
            XCTAssertEqual(refused.status, 64, "\(name): \(refused.stderrText)")
            XCTAssertTrue(refused.stderrText.contains("--db "), refused.stderrText)
        }
        XCTAssertEqual(directory.contents(), ["file:cred.db"])
        // libpq's keyword=value strings: refused, not a SQLite file named after them.
        for conninfo in ["host=127.0.0.1 port=9 dbname=haul user=haul password=kwsecret", " dbname = haul password=kwsecret",
                         "channel_binding=require host=db password=kwsecret"] {
            for command in ["add", "status"] {
                let refused = try haul([command, "--db", conninfo] + (command == "add" ? ["http://127.0.0.1:9/z"] : []), in: directory.path)
                XCTAssertEqual(refused.status, 64, "\(command) \(conninfo): \(refused.stderrText)")
                XCTAssertTrue(refused.stderrText.contains("postgres://USER@HOST:PORT/DB"), refused.stderrText)
                XCTAssertFalse(refused.stderrText.contains("kwsecret"), refused.stderrText)
            }
        }
        XCTAssertEqual(directory.contents(), ["file:cred.db"])
        let server = try haul(["status", "--db", "POSTGRES://haul:topsecret@127.0.0.1:9/haul"], in: directory.path)
        XCTAssertEqual(server.status, 1)
        XCTAssertFalse(server.stderrText.contains("topsecret"), server.stderrText)
        XCTAssertTrue(server.stderrText.contains("127.0.0.1"), "tried the server named: \(server.stderrText)")
    }

    // MARK: - add

    func testAddFromArgumentsFileAndStandardInput() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let out = try directory.makeDirectory("out")

        let fromArguments = try haul(["add", "--db", db, "-d", out, "https://e.org/a", "https://e.org/b"], in: directory.path)
        XCTAssertEqual(fromArguments.status, 0, fromArguments.stderrText)
        XCTAssertEqual(fromArguments.stdoutText, "added 2, already queued 0, rejected 0\n")
        XCTAssertEqual(fromArguments.stderrText, "")

        let again = try haul(["add", "--db", db, "-d", out, "https://e.org/a", "https://e.org/b", "--json"], in: directory.path)
        XCTAssertEqual(again.status, 0)
        let summary: [String: Int] = try json(again.stdoutText)
        XCTAssertEqual(summary, ["added": 0, "already_queued": 2, "rejected": 0])

        let badArgument = try haul(["add", "--db", db, "-d", out, "https://e.org/c", "ftp://e.org/d"], in: directory.path)
        XCTAssertEqual(badArgument.status, 1)
        XCTAssertEqual(badArgument.stderrLines.count, 1, badArgument.stderrText)
        XCTAssertTrue(badArgument.stderrText.hasPrefix("haul: argument 2: unsupported scheme 'ftp'"), badArgument.stderrText)
        XCTAssertEqual(badArgument.stdoutText, "added 1, already queued 0, rejected 1\n")

        let list = """
            # a comment, then a blank line

            https://e.org/e
            ftp://e.org/f
            https://e.org/g out=../escape
            https://e.org/h sha256=abc
            https://e.org/i out=sub/i.bin
            https://e.org/j color=blue
            """
        let file = try directory.write("urls.txt", Data(list.utf8))
        let fromFile = try haul(["add", "--db", db, "-d", out, "-i", file], in: directory.path)
        XCTAssertEqual(fromFile.status, 1)
        XCTAssertEqual(rejectedLineNumbers(fromFile, source: file), [4, 5, 6, 8])
        XCTAssertTrue(fromFile.stderrLines[0].contains("unsupported scheme 'ftp'"), fromFile.stderrLines[0])
        XCTAssertTrue(fromFile.stderrLines[1].contains("destination outside the output folder"), fromFile.stderrLines[1])
        XCTAssertTrue(fromFile.stderrLines[2].contains("malformed sha256"), fromFile.stderrLines[2])
        XCTAssertTrue(fromFile.stderrLines[3].contains("unknown field 'color=blue'"), fromFile.stderrLines[3])
        XCTAssertEqual(fromFile.stdoutText, "added 2, already queued 0, rejected 4\n")

        let fromStdin = try haul(["add", "--db", db, "-d", out, "-i", "-"], in: directory.path,
                                 input: .data(Data("https://e.org/k\nnot a url\nhttps://e.org/e\n".utf8)))
        XCTAssertEqual(fromStdin.status, 1)
        XCTAssertEqual(rejectedLineNumbers(fromStdin, source: "stdin"), [2])
        XCTAssertEqual(fromStdin.stdoutText, "added 1, already queued 1, rejected 1\n")

        let clean = try haul(["add", "--db", db, "-d", out, "-i", "-"], in: directory.path, input: .data(Data("https://e.org/l\n".utf8)))
        XCTAssertEqual(clean.status, 0, clean.stderrText)

        let jobs: [[String: Any]] = try json(try haul(["list", "--db", db, "--json"]).stdoutText)
        XCTAssertEqual(jobs.compactMap { $0["url"] as? String },
                       ["a", "b", "c", "e", "i", "k", "l"].map { "https://e.org/\($0)" })
        XCTAssertEqual(jobs.compactMap { $0["destination"] as? String },
                       ["a", "b", "c", "e", "sub/i.bin", "k", "l"].map { out + "/" + $0 })
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.file("escape")))
        try assertDatabaseSound(db)
    }

    /// `haul add -i -` from a pipe that writes slowly queues each line as it comes, not when a
    /// batch fills or the pipe ends: stopped with Ctrl-C, it has lost none of what it read.
    func testAddFromASlowPipeQueuesLinesAsTheyComeAndCtrlCLosesNone() throws {
        let directory = try makeTempDirectory()
        let input = Pipe()
        let add = try HaulProcess.start(try haulExecutable(), ["add", "-i", "-", "-d", "out"], currentDirectory: directory.path,
                                        stdinPipe: input)
        // The last line too: held a second for aria2 options that may follow it, then queued.
        input.fileHandleForWriting.write(Data("https://e.org/1\nhttps://e.org/2\nhttps://e.org/3\n".utf8))
        var queued = 0
        let deadline = Date().addingTimeInterval(10)
        while queued < 3, Date() < deadline {
            let status = try haul(["status", "--json"], in: directory.path)
            let counts = (try? JSONSerialization.jsonObject(with: Data(status.stdoutText.utf8))) as? [String: Any]
            queued = (counts?["counts"] as? [String: Any])?["queued"] as? Int ?? 0
            if queued < 3 { usleep(20_000) }  // polling another process's queue: no event to await
        }
        XCTAssertEqual(queued, 3, "the lines read were not queued while the pipe stayed open")
        kill(add.processIdentifier, SIGINT)
        let result = add.wait(timeout: 10)
        XCTAssertTrue(result.signalled || result.status == 130, "\(result.status) \(result.stderrText)")
        XCTAssertEqual(try haul(["list", "--json"], in: directory.path).stdoutText.components(separatedBy: "e.org/").count - 1, 3)
    }

    func testAddUsesHaulDBAndTheCurrentFolderByDefault() throws {
        let directory = try makeTempDirectory()
        let result = try haul(["add", "https://e.org/file.iso"], in: directory.path)
        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory.file("haul.db")))
        let shown = try haul(["show", "1"], in: directory.path)
        XCTAssertTrue(shown.stdoutText.contains("destination:  \(directory.path)/file.iso"), shown.stdoutText)
        let other = directory.file("env.db")
        XCTAssertEqual(try haul(["add", "https://e.org/x"], in: directory.path, environment: ["HAUL_DB": other]).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: other))
    }

    /// Four `haul add` started together on a file that does not exist yet all succeed: one makes
    /// the queue, the others wait for it (before, the lock upgrade of all but one was refused at
    /// once while the new file turned to WAL, and most such pairs failed "locked").
    func testAddsStartedTogetherOnANewQueueAllSucceed() throws {
        let directory = try makeTempDirectory()
        let haulBinary = try haulExecutable()
        for round in 0..<25 {
            let db = directory.file("q\(round).db")
            let children = try (0..<4).map { index in
                try HaulProcess.start(haulBinary, ["add", "--db", db, "-d", directory.path, "https://e.org/\(round)-\(index)"],
                                      currentDirectory: directory.path)
            }
            for (index, child) in children.enumerated() {
                let result = child.wait(timeout: 30)
                XCTAssertEqual(result.status, 0, "round \(round), add \(index): \(result.stderrText)")
            }
            let status = try haul(["status", "--db", db, "--json"], in: directory.path)
            let counts = try json(status.stdoutText, as: [String: Any].self)["counts"] as? [String: Any]
            XCTAssertEqual(counts?["queued"] as? Int, 4, "round \(round): \(status.stdoutText)")
        }
    }

    func testAddReportsAMissingInputFile() throws {
        let directory = try makeTempDirectory()
        let result = try haul(["add", "--db", directory.file("q.db"), "-i", directory.file("absent.txt")], in: directory.path)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderrText.contains("cannot open \(directory.file("absent.txt"))"), result.stderrText)
    }

    /// -d naming a regular file is a usage error of add and get, before any queue is made.
    func testAddAndGetRefuseAnOutputFolderThatIsAFile() throws {
        let directory = try makeTempDirectory()
        let file = try directory.write("afile", Data("x\n".utf8))
        for command in ["add", "get"] {
            let result = try haul([command, "--db", directory.file("q.db"), "-d", file, "https://e.org/x"], in: directory.path)
            XCTAssertEqual(result.status, 64, "\(command): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains("'--dir' names \(file), which is not a folder"), result.stderrText)
        }
        XCTAssertEqual(directory.contents(), ["afile"], "a queue was made")
    }

    // MARK: - Redaction

    func testCredentialsNeverAppearInOutput() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let secretURL = "https://user:secret@host.example/private/x.iso"
        var outputs: [(String, ProcessResult)] = []
        func run(_ arguments: [String], input: HaulProcess.Input = .none) throws -> ProcessResult {
            let result = try haul(arguments, in: directory.path, input: input)
            outputs.append((arguments.joined(separator: " "), result))
            return result
        }
        XCTAssertEqual(try run(["add", "--db", db, secretURL, "https://other:secret@host2.example/y"]).status, 0)
        // Rejections quote the line, and name the job holding a destination.
        _ = try run(["add", "--db", db, "https://plain.example/x.iso", "ftp://u:secret@ftp.example/z"])
        _ = try run(["add", "--db", db, "-i", "-"], input: .data(Data("https://a:secret@h.example/q out=../up\n".utf8)))
        // A failure whose reason holds a URL with credentials.
        do {
            let queue = try JobQueue(path: db, mode: .mustExist)
            let leases = try queue.claim(ClaimRequest(limit: 2, perHostCap: 2))
            let second = try XCTUnwrap(leases.first { $0.jobID == 2 })
            try queue.fail(jobID: 2, token: second.token, status: 302, reason: "redirected to https://u:secret@evil.example/z")
            let first = try XCTUnwrap(leases.first { $0.jobID == 1 })
            try queue.reschedule(jobID: 1, token: first.token, at: 0, status: 503, error: "from https://user:secret@host.example/ too")
        }
        let list = try run(["list", "--db", db])
        XCTAssertTrue(list.stdoutText.contains("https://***@host.example/private/x.iso"), list.stdoutText)
        _ = try run(["list", "--db", db, "--json"])
        let show = try run(["show", "--db", db, "1"])
        XCTAssertTrue(show.stdoutText.contains("***@host.example"), show.stdoutText)
        _ = try run(["show", "--db", db, "2", "--json"])
        let byURL = try run(["show", "--db", db, secretURL])
        XCTAssertEqual(byURL.status, 0, byURL.stderrText)
        XCTAssertTrue(byURL.stdoutText.contains("job 1"), byURL.stdoutText)
        _ = try run(["show", "--db", db, secretURL, "--json"])
        let missing = try run(["show", "--db", db, "https://user:secret@nowhere.example/"])
        XCTAssertEqual(missing.status, 1)
        let status = try run(["status", "--db", db])
        XCTAssertTrue(status.stdoutText.contains("redirected to URL"), "status groups failures by kind: \(status.stdoutText)")
        let failedJob = try run(["show", "--db", db, "2"])
        XCTAssertTrue(failedJob.stdoutText.contains("redirected to https://***@evil.example/z"), "show keeps the detail, redacted: \(failedJob.stdoutText)")
        _ = try run(["status", "--db", db, "--json"])
        _ = try run(["retry", "--db", db, "2"])
        _ = try run(["cancel", "--db", db, "1", "2"])
        for (command, result) in outputs {
            XCTAssertFalse(result.stdoutText.contains("secret"), "\(command) printed a credential: \(result.stdoutText)")
            XCTAssertFalse(result.stderrText.contains("secret"), "\(command) printed a credential: \(result.stderrText)")
        }
    }

    // MARK: - list, status, show

    /// Builds a queue with jobs in every state (ids 1…6): 1 done, 2 failed, 3 running, 4 cancelled,
    /// 5 and 6 queued.
    private func queueInEveryState(_ directory: TempDirectory) throws -> String {
        let db = directory.file("q.db")
        let urls = (1...6).map { "https://\($0 % 2 == 0 ? "even" : "odd").example/f\($0)" }
        XCTAssertEqual(try haul(["add", "--db", db, "-d", directory.path] + urls).status, 0)
        let queue = try JobQueue(path: db, mode: .mustExist)
        let leases = Dictionary(uniqueKeysWithValues: try queue.claim(ClaimRequest(limit: 3, perHostCap: 2, leaseMilliseconds: 3_600_000))
            .map { ($0.jobID, $0.token) })
        XCTAssertEqual(Set(leases.keys), [1, 2, 3])
        try queue.complete(jobID: 1, token: leases[1]!, status: 200, bytes: 1234)
        try queue.fail(jobID: 2, token: leases[2]!, status: 404, reason: "HTTP 404 Not Found")
        XCTAssertEqual(try haul(["cancel", "--db", db, "4"]).stdoutText, "job 4: cancelled\n")
        return db
    }

    func testListFiltersByStateAndPrintsJSON() throws {
        let directory = try makeTempDirectory()
        let db = try queueInEveryState(directory)
        let expected: [String: [Int]] = ["done": [1], "failed": [2], "running": [3], "cancelled": [4], "queued": [5, 6]]
        for (state, ids) in expected {
            let text = try haul(["list", "--db", db, "--state", state])
            XCTAssertEqual(text.status, 0)
            XCTAssertEqual(text.stdoutLines.map { Int($0.split(separator: "\t")[0]) ?? -1 }, ids, state)
            XCTAssertTrue(text.stdoutLines.allSatisfy { $0.split(separator: "\t")[1] == state }, text.stdoutText)
            let jobs: [[String: Any]] = try json(try haul(["list", "--db", db, "--state", state, "--json"]).stdoutText)
            XCTAssertEqual(jobs.compactMap { $0["id"] as? Int }, ids, state)
            XCTAssertTrue(jobs.allSatisfy { $0["state"] as? String == state })
        }
        let all: [[String: Any]] = try json(try haul(["list", "--db", db, "--json"]).stdoutText)
        XCTAssertEqual(all.count, 6)
        for key in ["id", "url", "host", "destination", "state", "attempts", "max_attempts", "received_bytes", "created_at"] {
            XCTAssertTrue(all.allSatisfy { $0[key] != nil }, "key \(key) missing")
        }
        XCTAssertEqual(all.first?["received_bytes"] as? Int, 1234)
        XCTAssertEqual(all.first(where: { $0["id"] as? Int == 2 })?["last_error"] as? String, "HTTP 404 Not Found")
        XCTAssertEqual(try haul(["list", "--db", db, "--limit", "2"]).stdoutLines.count, 2)
        XCTAssertEqual(try haul(["list", "--db", db, "--host", "even.example:443"]).stdoutLines.count, 3)
        XCTAssertEqual(try haul(["list", "--db", db, "--state", "queued", "--host", "odd.example:443"]).stdoutLines.count, 1)
    }

    func testStatusCountsAsTextAndJSON() throws {
        let directory = try makeTempDirectory()
        let db = try queueInEveryState(directory)
        let status: [String: Any] = try json(try haul(["status", "--db", db, "--json"]).stdoutText)
        let counts = try XCTUnwrap(status["counts"] as? [String: Int], "\(status)")
        XCTAssertEqual(counts, ["queued": 2, "running": 1, "done": 1, "failed": 1, "cancelled": 1])
        XCTAssertEqual(status["total"] as? Int, 6)
        let failures = try XCTUnwrap(status["top_failures"] as? [[String: Any]])
        XCTAssertEqual(failures.first?["reason"] as? String, "HTTP 404 Not Found")
        XCTAssertEqual(failures.first?["count"] as? Int, 1)
        let text = try haul(["status", "--db", db])
        XCTAssertEqual(text.status, 0)
        XCTAssertTrue(text.stdoutText.contains("6 — queued 2, running 1, done 1, failed 1, cancelled 1"), text.stdoutText)
        XCTAssertTrue(text.stdoutText.contains("1 × HTTP 404 Not Found"), text.stdoutText)
        XCTAssertFalse(text.stdoutText.contains("\u{1B}["), "no colour when NO_COLOR is set or stdout is not a terminal")
    }

    func testShowByIDAndByURL() throws {
        let directory = try makeTempDirectory()
        let db = try queueInEveryState(directory)
        let byID = try haul(["show", "--db", db, "2"])
        XCTAssertEqual(byID.status, 0)
        XCTAssertTrue(byID.stdoutText.hasPrefix("job 2\n"), byID.stdoutText)
        XCTAssertTrue(byID.stdoutText.contains("url:          https://even.example/f2"), byID.stdoutText)
        XCTAssertTrue(byID.stdoutText.contains("state:        failed"), byID.stdoutText)
        XCTAssertTrue(byID.stdoutText.contains("last error:   HTTP 404 Not Found"), byID.stdoutText)
        XCTAssertTrue(byID.stdoutText.contains("attempt 1:"), byID.stdoutText)

        let byURL = try haul(["show", "--db", db, "https://even.example/f2"])
        XCTAssertEqual(byURL.stdoutText, byID.stdoutText)

        let object: [String: Any] = try json(try haul(["show", "--db", db, "3", "--json"]).stdoutText)
        XCTAssertEqual(object["id"] as? Int, 3)
        XCTAssertEqual(object["state"] as? String, "running")
        XCTAssertEqual((object["attempt_log"] as? [Any])?.count, 1)

        // One URL for two destinations: show lists both.
        XCTAssertEqual(try haul(["add", "--db", db, "-d", directory.path, "https://even.example/f2 out=copy"]).status, 0,
                       "an argument is a whole line, fields included")
        let both: [[String: Any]] = try json(try haul(["show", "--db", db, "https://even.example/f2", "--json"]).stdoutText)
        XCTAssertEqual(both.compactMap { $0["id"] as? Int }, [2, 7])

        let missing = try haul(["show", "--db", db, "999"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderrText.contains("no job with id 999"), missing.stderrText)
        let missingURL = try haul(["show", "--db", db, "https://nowhere.example/"])
        XCTAssertEqual(missingURL.status, 1)
        XCTAssertTrue(missingURL.stderrText.contains("no job for https://nowhere.example/"), missingURL.stderrText)
    }

    // MARK: - retry and cancel

    func testRetryFailedAndCancel() throws {
        let directory = try makeTempDirectory()
        let db = try queueInEveryState(directory)
        // A second failed job.
        do {
            let queue = try JobQueue(path: db, mode: .mustExist)
            let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 5)).first)
            try queue.fail(jobID: lease.jobID, token: lease.token, status: 500, reason: "HTTP 500")
        }
        let retried = try haul(["retry", "--db", db, "--failed"])
        XCTAssertEqual(retried.status, 0, retried.stderrText)
        XCTAssertEqual(retried.stdoutText, "requeued 2 failed jobs\n")
        var counts: [String: Int] = try json(try haul(["status", "--db", db, "--json"]).stdoutText, as: [String: Any].self)["counts"] as? [String: Int] ?? [:]
        XCTAssertEqual(counts, ["queued": 3, "running": 1, "done": 1, "failed": 0, "cancelled": 1])
        XCTAssertEqual(try haul(["retry", "--db", db, "--failed"]).stdoutText, "requeued 0 failed jobs\n")

        let cancel = try haul(["cancel", "--db", db, "2", "3"])
        XCTAssertEqual(cancel.status, 0, cancel.stderrText)
        XCTAssertEqual(cancel.stdoutText, "job 2: cancelled\njob 3: cancelled\n")
        let again = try haul(["cancel", "--db", db, "2", "1", "999"])
        XCTAssertEqual(again.status, 1)
        XCTAssertEqual(again.stderrLines, [
            "haul: job 2: is cancelled; only queued, running or failed jobs can be cancelled",
            "haul: job 1: is done; only queued, running or failed jobs can be cancelled",
            "haul: job 999: no such job",
        ])

        let retryOne = try haul(["retry", "--db", db, "2"])
        XCTAssertEqual(retryOne.status, 0, retryOne.stderrText)
        XCTAssertEqual(retryOne.stdoutText, "job 2: requeued\n")
        let retryDone = try haul(["retry", "--db", db, "1"])
        XCTAssertEqual(retryDone.status, 1)
        XCTAssertTrue(retryDone.stderrText.contains("job 1: is done"), retryDone.stderrText)
        XCTAssertEqual(try haul(["retry", "--db", db, "--failed", "1"]).status, 64)

        counts = try json(try haul(["status", "--db", db, "--json"]).stdoutText, as: [String: Any].self)["counts"] as? [String: Int] ?? [:]
        XCTAssertEqual(counts, ["queued": 3, "running": 0, "done": 1, "failed": 0, "cancelled": 2])
        try assertDatabaseSound(db)
    }

    // MARK: - WAL readers

    func testStatusAnswersWhileAnotherProcessHoldsAWriteTransaction() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        XCTAssertEqual(try haul(["add", "--db", db, "-d", directory.path, "https://e.org/1", "https://e.org/2", "https://e.org/3"]).status, 0)
        let writer = try Database(path: db, mode: .mustExist)
        try writer.execute("BEGIN IMMEDIATE")
        try writer.execute("""
            INSERT INTO jobs (url, host_id, destination, destination_key, created_at, updated_at)
                VALUES ('https://e.org/uncommitted', 1, '/x/uncommitted', 77, 1, 1);
            UPDATE job_totals SET jobs = jobs + 1 WHERE state = 'queued';
            """)
        let status = try haul(["status", "--db", db, "--json"], timeout: 20)
        XCTAssertEqual(status.status, 0, status.stderrText)
        XCTAssertLessThan(status.seconds, 5, "status waited for the writer (busy timeout is 10 s)")
        let counts = try json(status.stdoutText, as: [String: Any].self)["counts"] as? [String: Int]
        XCTAssertEqual(counts?["queued"], 3)
        let list = try haul(["list", "--db", db], timeout: 20)
        XCTAssertEqual(list.stdoutLines.count, 3)
        XCTAssertLessThan(list.seconds, 5)
        try writer.execute("COMMIT")
        let after = try json(try haul(["status", "--db", db, "--json"]).stdoutText, as: [String: Any].self)["counts"] as? [String: Int]
        XCTAssertEqual(after?["queued"], 4)
    }

    // MARK: - Manual page and completions

    /// haul.1 in the repository is what `haul help --man` prints (regenerate it with
    /// `haul help --man > haul.1` when a command changes), and names every option of every command.
    func testTheManualPageInTheRepositoryIsCurrent() throws {
        let page = try haul(["help", "--man"])
        XCTAssertEqual(page.status, 0)
        let root = try XCTUnwrap(HaulProcess.packageRoot())
        let committed = try String(contentsOf: root.appendingPathComponent("haul.1"), encoding: .utf8)
        XCTAssertEqual(page.stdoutText, committed, "haul.1 is stale: run `haul help --man > haul.1`")
        for option in ["\\-\\-limit\\-rate", "\\-\\-layout", "\\-\\-transport", "\\-\\-netrc\\-file", "HAUL_TRANSPORT"] {
            XCTAssertTrue(page.stdoutText.contains(option), option)
        }
    }

    /// Each completion script is valid for its shell (checked by the shell itself where it is
    /// installed) and offers every command and option.
    func testCompletionScriptsOfferEveryCommandAndOption() throws {
        let bash = try haul(["completions", "bash"])
        XCTAssertEqual(bash.status, 0)
        let top = try haul(["--help"]).stdoutText
        for command in knownCommands + ["run", "get", "completions"] {
            XCTAssertTrue(bash.stdoutText.contains(" \(command)"), command)
            let help = try haul([command, "--help"]).stdoutText
            let optionLines = help.components(separatedBy: "OPTIONS:").last?.split(separator: "\n") ?? []
            for option in optionLines.compactMap({ $0.split(separator: " ").first(where: { $0.hasPrefix("--") }) }) {
                let name = option.trimmingCharacters(in: CharacterSet(charactersIn: ","))
                XCTAssertTrue(bash.stdoutText.contains(name), "\(command) \(name) missing from the bash completions")
            }
        }
        XCTAssertTrue(top.contains("completions"))
        for (shell, arguments) in [("bash", ["-n"]), ("zsh", ["-n"]), ("fish", ["--no-execute"])] {
            let script = try haul(["completions", shell])
            XCTAssertEqual(script.status, 0, shell)
            guard let binary = HaulProcess.tool(shell) else { continue }
            let directory = try makeTempDirectory()
            let file = try directory.write("haul.\(shell)", script.stdout)
            let checked = try HaulProcess.run(binary, arguments + [file], timeout: 20)
            XCTAssertEqual(checked.status, 0, "\(shell): \(checked.stderrText)")
        }
        XCTAssertEqual(try haul(["completions", "tcsh"]).status, 64)
    }

    // MARK: - A copied binary

    func testACopiedBinaryCarriesItsMigrations() throws {
        let directory = try makeTempDirectory()
        let bin = try directory.makeDirectory("bin")
        let copy = URL(fileURLWithPath: bin + "/haul")
        try FileManager.default.copyItem(at: try haulExecutable(), to: copy)
        let work = try directory.makeDirectory("work")
        XCTAssertEqual(try haul(["--version"], in: work, binary: copy).stdoutLines.first, "haul \(HaulVersion.string)")
        let added = try haul(["add", "https://e.org/a", "https://e.org/b"], in: work, binary: copy)
        XCTAssertEqual(added.status, 0, added.stderrText)
        let status = try haul(["status", "--json"], in: work, binary: copy)
        XCTAssertEqual(status.status, 0, status.stderrText)
        XCTAssertEqual((try json(status.stdoutText, as: [String: Any].self)["counts"] as? [String: Int])?["queued"], 2)
        let database = try Database(path: work + "/haul.db", mode: .mustExist)
        XCTAssertEqual(try Migrator.appliedVersions(database).map(\.name), Migration.embedded.map(\.name))
        XCTAssertEqual(try QueueInvariants.integrityCheck(database), ["ok"])
    }
}
