import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// Only http and https are ever fetched, redirects included; credentials in URLs are never shown;
/// files and folders follow the user's umask; the queue (which holds those URLs) is private.
final class SecurityTests: XCTestCase {
    // MARK: Schemes

    /// Redirects (every redirect status) to ftp, file, gopher, dict, data and an upper-case FTP
    /// are refused: the job fails with the reason, the redirecting URL is asked once, nothing is
    /// written, and a second listener — the address those URLs point at — sees no connection.
    /// A final redirect to plain http on that listener shows that it would see one.
    func testRedirectsToOtherSchemesAreNeverFollowed() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        let listener = try FaultServer(host: "127.0.0.4")
        defer { server.stop(); listener.stop() }
        let secretFile = try h.temp.write("secret.txt", Data("TOP-SECRET-CONTENT\n".utf8))
        let data = runTestData(10_000, seed: 51)
        listener.route("/x", FaultServer.Response.ok(data))
        listener.setFallback { _ in FaultServer.Response.ok(data) }
        let other = "127.0.0.4:\(listener.port)"
        let targets: [(String, String, Int)] = [
            ("ftp", "ftp://\(other)/x", 302),
            ("ftp-credentials", "ftp://user:pw-ftp@\(other)/x", 301),
            ("ftp-upper", "FTP://\(other)/x", 303),
            ("file", "file://\(secretFile)", 307),
            ("file-host", "file://\(other)\(secretFile)", 308),
            ("gopher", "gopher://\(other)/1x", 302),
            ("dict", "dict://\(other)/d:word", 307),
            ("data", "data:text/plain;base64,VE9QLVNFQ1JFVA==", 308),
            ("telnet", "telnet://\(other)/", 301),
        ]
        for (name, location, status) in targets {
            server.route("/\(name)", FaultServer.Response.redirect(to: location, status: status))
        }
        // Refused on the second hop, after a permitted one.
        server.route("/hop", FaultServer.Response.redirect(to: "/gopher-later", status: 302))
        server.route("/gopher-later", FaultServer.Response.redirect(to: "gopher://\(other)/1y", status: 307))
        try h.add(targets.map { "\(server.url("/\($0.0)").absoluteString) out=\($0.0)" }
                  + ["\(server.url("/hop").absoluteString) out=hop"])

        let result = try h.run(["run", "--json", "--max-attempts", "3", "--stall", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(listener.connectionsAccepted, 0, "something connected to the other listener: \(listener.allRequests)")
        XCTAssertEqual(h.outputFiles(), [], "a refused redirect wrote a file")
        for (name, _, _) in targets {
            XCTAssertEqual(server.requestCount(path: "/\(name)"), 1, "\(name): a refused redirect is not retried")
        }
        XCTAssertEqual(server.requestCount(path: "/gopher-later"), 1)
        let failed = result.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "failed" }
        XCTAssertEqual(failed.count, targets.count + 1, result.stdoutText)
        for event in failed {
            let reason = event["reason"] as? String ?? ""
            XCTAssertTrue(reason.contains("refused") && reason.contains("only http and https"), "reason: \(reason)")
        }
        XCTAssertFalse(result.stdoutText.contains("pw-ftp"), result.stdoutText)
        try assertDatabaseSound(h.db)

        // The control: plain http to the same listener is followed, and the listener sees it.
        server.route("/control", FaultServer.Response.redirect(to: "http://\(other)/x", status: 302))
        try h.add(["\(server.url("/control").absoluteString) out=control"])
        let control = try h.run(["run"])
        XCTAssertEqual(control.status, 0, "this run's one job ended done: \(control.stdoutText)")
        XCTAssertTrue(control.stdoutText.contains("in the queue failed, not in this run"), "the failed jobs stay failed: \(control.stdoutText)")
        XCTAssertEqual(h.contents("control"), data)
        XCTAssertEqual(listener.connectionsAccepted, 1, "the listener would have seen a followed redirect")
    }

    // MARK: Credentials

    /// URLs with credentials, and redirects whose Location carries credentials, failing in every
    /// way (404, refused scheme, loop, refused connection, 503 then retry): no output of `run`
    /// (plain and --json), `show`, `list` or `status` shows a password, nor does any failure
    /// reason recorded in the queue; and the credentials are not sent to another host a redirect
    /// leads to.
    func testCredentialsNeverAppearInOutputEventsOrRecordedReasons() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        let otherHost = try FaultServer(host: "127.0.0.5")
        defer { server.stop(); otherHost.stop() }
        let data = runTestData(5_000, seed: 52)
        let authority = "127.0.0.1:\(server.port)"
        let closedPort = try Self.closedPort()
        server.route("/redirect-credentials", FaultServer.Response.redirect(to: "http://who:pw-location-1@\(authority)/missing2"))
        server.route("/redirect-ftp", FaultServer.Response.redirect(to: "ftp://who:pw-location-2@\(authority)/z"))
        server.route("/loop", FaultServer.Response.redirect(to: "http://who:pw-location-3@\(authority)/loop"))
        server.route("/busy", FaultServer.Response.status(503))
        server.route("/ok.bin", FaultServer.file(data))
        server.route("/elsewhere", FaultServer.Response.redirect(to: "\(otherHost.baseURLString)/landing"))
        otherHost.route("/landing", FaultServer.Response.ok(data))
        let lines = [
            "http://user:pw-url-1@\(authority)/missing out=missing",
            "http://user:pw-url-2@\(authority)/redirect-credentials out=redirect-credentials",
            "http://user:pw-url-3@\(authority)/redirect-ftp out=redirect-ftp",
            "http://user:pw-url-4@\(authority)/loop out=loop",
            "http://user:pw-url-5@127.0.0.1:\(closedPort)/refused out=refused",
            "http://user:pw-url-6@\(authority)/busy out=busy",
            "http://user:pw-url-7@\(authority)/ok.bin out=ok",
            "http://user:pw-url-8@\(authority)/elsewhere out=elsewhere",
        ]
        try h.add(lines)
        var outputs: [(String, ProcessResult)] = []

        outputs.append(("run --json", try h.run(["run", "--json", "--max-attempts", "2"])))
        XCTAssertEqual(try h.run(["retry", "--failed"]).status, 0)
        outputs.append(("run", try h.run(["run", "--max-attempts", "2"])))
        outputs.append(("get", try h.run(["get", "-d", h.out, "http://user:pw-url-9@\(authority)/missing-too"])))
        for arguments in [["status"], ["status", "--json"], ["list"], ["list", "--json"], ["list", "--state", "failed"],
                          ["show", lines[0].components(separatedBy: " ")[0]], ["show", lines[0].components(separatedBy: " ")[0], "--json"]]
            + (1...9).flatMap({ [["show", String($0)], ["show", String($0), "--json"]] }) {
            let shown = try h.run(arguments)
            XCTAssertEqual(shown.status, 0, "\(arguments): \(shown.stderrText)")
            outputs.append((arguments.joined(separator: " "), shown))
        }

        XCTAssertEqual(h.contents("ok"), data, "a URL with credentials is still fetched")
        XCTAssertEqual(h.contents("elsewhere"), data)
        XCTAssertTrue(outputs[0].1.stdoutText.contains("http://***@\(authority)/missing"), "URLs are shown redacted: \(outputs[0].1.stdoutText)")
        let reasons = try h.run(["list", "--state", "failed"]).stdoutText
        XCTAssertTrue(reasons.contains("ftp://***@\(authority)/z") && reasons.contains("http://***@\(authority)/loop"),
                      "the refusals name the redacted targets: \(reasons)")
        for (name, output) in outputs {
            for text in [output.stdoutText, output.stderrText] {
                XCTAssertFalse(text.contains("pw-"), "haul \(name) showed a password: \(text)")
            }
        }
        let database = try Database(path: h.db, mode: .mustExist)
        let recorded = try database.rows("""
            SELECT last_error FROM jobs WHERE last_error IS NOT NULL
            UNION ALL SELECT error FROM attempts WHERE error IS NOT NULL
            UNION ALL SELECT pause_reason FROM hosts WHERE pause_reason IS NOT NULL
            """) { $0.string(0) }
        XCTAssertGreaterThan(recorded.count, 8)
        for reason in recorded { XCTAssertFalse(reason.contains("pw-"), "a recorded reason holds a password: \(reason)") }
        // The failure reasons say what happened.
        XCTAssertTrue(recorded.contains { $0.contains("404") })
        XCTAssertTrue(recorded.contains { $0.contains("connection refused") }, "\(recorded)")
        XCTAssertTrue(recorded.contains { $0.contains("503") })
        // Credentials go only where the user sent them.
        let landing = try XCTUnwrap(otherHost.requests(path: "/landing").first)
        XCTAssertNil(landing.header("Authorization"), "credentials were forwarded to another host: \(landing.headers)")
    }

    /// A loopback port nothing listens on.
    private static func closedPort() throws -> Int {
        let probe = try FaultServer(host: "127.0.0.1")
        let port = probe.port
        probe.stop()
        return port
    }

    // MARK: Process listing

    /// While a get runs, its command line as any user's `ps` reads it (/proc/PID/cmdline) holds
    /// none of its secrets: not -u's password, a credential header's value, nor the password of
    /// a job's or a proxy's URL; the user name, other headers and the host stay readable. And the
    /// request still carries every credential.
    func testSecretsOnTheCommandLineAreHiddenFromProcessListings() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let gate = FaultServer.Gate()
        server.route("/held.bin") { request in
            gate.wait(timeout: 20)
            return FaultServer.Response.ok(Data("held".utf8))
        }
        let url = server.url("/held.bin").absoluteString.replacingOccurrences(of: "://", with: "://bob:URL-S3CRET@")
        // -u and -H Authorization exclude each other: gets held together, each on its own queue
        // (so each fetches its own job). Proxies need the libcurl transport, whatever
        // HAUL_TRANSPORT says.
        let children = try [
            h.start(["get", "--transport", "curl", "-d", h.out, "--quiet", "-u", "alice:U-S3CRET", "--header=Cookie: c=COOKIE-S3CRET",
                     "-H", "X-Visible: shown", "--proxy=http://px:PROXY-S3CRET@127.0.0.9:9", "--noproxy", "*", url]),
            HaulProcess.start(h.haul, ["get", "--transport", "curl", "-d", h.out, "--quiet", "-H", "Authorization: Bearer TOKEN-S3CRET", "--user-agent", "ua-shown",
                                       "-kx", "socks5h://px:PROXY2-S3CRET@127.0.0.9:9", "--noproxy", "*", url + "?two",
                                       "--db", h.temp.file("two.db")], currentDirectory: h.temp.path),
            // Short options together, values attached (-uUSER:PASSWORD) or next (-kx PROXY).
            HaulProcess.start(h.haul, ["get", "--transport", "curl", "-d", h.out, "-qkualice:U3-S3CRET", "-HCookie: c=COOKIE3-S3CRET",
                                       "-xhttp://px:PROXY3-S3CRET@127.0.0.9:9", "--noproxy", "*", url + "?three",
                                       "--db", h.temp.file("three.db")], currentDirectory: h.temp.path),
        ]
        XCTAssertTrue(server.waitForRequests(count: 3, path: "/held.bin"), "the requests never came")
        let listed = children.map { (try? String(contentsOfFile: "/proc/\($0.processIdentifier)/cmdline", encoding: .utf8)) ?? "" }
        gate.open()
        for child in children {
            let result = child.wait(timeout: 30)
            XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        }
        XCTAssertTrue(listed[0].contains("alice:") && listed[0].contains("X-Visible: shown") && listed[0].contains("127.0.0.9:9")
                      && listed[0].contains("bob:") && listed[1].contains("Authorization:") && listed[1].contains("ua-shown")
                      && listed[2].contains("-qkualice:") && listed[2].contains("-HCookie:") && listed[2].contains("127.0.0.9:9"),
                      "the command lines lost more than their secrets: \(listed)")
        for secret in ["U-S3CRET", "COOKIE-S3CRET", "TOKEN-S3CRET", "URL-S3CRET", "PROXY-S3CRET", "PROXY2-S3CRET",
                       "U3-S3CRET", "COOKIE3-S3CRET", "PROXY3-S3CRET"] {
            XCTAssertFalse(listed.joined().contains(secret), "\(secret) is readable in /proc/PID/cmdline: \(listed)")
        }
        let requests = server.requests(path: "/held.bin")
        XCTAssertEqual(Set(requests.compactMap { $0.header("Authorization") }),
                       ["Basic " + Data("alice:U-S3CRET".utf8).base64EncodedString(), "Bearer TOKEN-S3CRET",
                        "Basic " + Data("alice:U3-S3CRET".utf8).base64EncodedString()], "-u wins over the URL's user, as in curl: \(requests)")
        XCTAssertEqual(Set(requests.compactMap { $0.header("Cookie") }), ["c=COOKIE-S3CRET", "c=COOKIE3-S3CRET"])
    }

    // MARK: Modes

    /// Destinations, their temp files and every folder haul creates follow the user's umask.
    func testFilesAndFoldersFollowTheUmask() throws {
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(20_000, seed: 53)
        server.route("/f.bin", FaultServer.file(data))
        let haulBinary = try haulExecutable()
        for (mask, file, folder) in [("027", 0o640, 0o750), ("077", 0o600, 0o700), ("002", 0o664, 0o775)] {
            let directory = try makeTempDirectory()
            let db = directory.file("q.db")
            let out = directory.file("new/out")
            let command = Restricted.withUmask(mask, haulBinary, ["get", "--db", db, "-d", out,
                                                                 "\(server.url("/f.bin").absoluteString) out=a/b/f.bin"])
            let result = try run(command, in: directory.path)
            XCTAssertEqual(result.status, 0, "umask \(mask): \(result.stderrText)")
            XCTAssertEqual(FileManager.default.contents(atPath: out + "/a/b/f.bin"), data)
            XCTAssertEqual(mode(out + "/a/b/f.bin"), file, "umask \(mask): the file")
            for created in [directory.file("new"), out, out + "/a", out + "/a/b"] {
                XCTAssertEqual(mode(created), folder, "umask \(mask): the folder \(created)")
            }
            XCTAssertEqual(mode(db), 0o600, "umask \(mask): the database")
        }
    }

    /// The database and its -wal and -shm files are readable by their owner only, even with
    /// umask 000 — checked while a run holds them open mid-transfer.
    func testTheDatabaseIsPrivateEvenWithUmaskZero() throws {
        let directory = try makeTempDirectory()
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        // Large enough to be kept under its temp file's name from its head on.
        let data = runTestData(Int(DownloadAttempt.resumableSize) + 100_000, seed: 54)
        server.route("/slow.bin", { request in
            FaultServer.fileResponse(data, request: request, etag: "\"s\"").stalled(afterBytes: 10_000, .forever)
        })
        let haulBinary = try haulExecutable()
        let db = directory.file("q.db")
        let added = try run(Restricted.withUmask("000", haulBinary, ["add", "--db", db, "-d", directory.path,
                                                                     server.url("/slow.bin").absoluteString]),
                            in: directory.path)
        XCTAssertEqual(added.status, 0, added.stderrText)
        XCTAssertEqual(mode(db), 0o600)

        let command = Restricted.withUmask("000", haulBinary, ["run", "--db", db])
        let child = try HaulProcess.start(command.0, command.1, currentDirectory: directory.path)
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/slow.bin", timeout: 10))
        let present = RunHarness.poll(timeout: 10) {
            FileManager.default.fileExists(atPath: db + "-wal") && FileManager.default.fileExists(atPath: db + "-shm")
                && names(in: directory.path).contains { $0.hasPrefix(TempFile.prefix) }  // named once its head is in
        }
        let modes = [db, db + "-wal", db + "-shm"].map { (($0 as NSString).lastPathComponent, mode($0)) }
        kill(child.processIdentifier, SIGTERM)
        let stopped = child.wait(timeout: 15)
        XCTAssertTrue(present, "the run never opened its -wal and -shm files, or never named its temp file")
        XCTAssertEqual(stopped.status, 143, stopped.stderrText)
        for (name, mode) in modes {
            let bits = try XCTUnwrap(mode, "\(name) is missing")
            XCTAssertEqual(bits & 0o004, 0, "\(name) is world-readable: \(String(bits, radix: 8))")
            XCTAssertEqual(bits & 0o077, 0, "\(name) is open to others: \(String(bits, radix: 8))")
        }
        // The destination's temp file follows the umask (the user's choice), unlike the queue.
        let temp = names(in: directory.path).first { $0.hasPrefix(TempFile.prefix) }
        XCTAssertEqual(temp.flatMap { mode(directory.file($0)) }, 0o666)
    }
}
