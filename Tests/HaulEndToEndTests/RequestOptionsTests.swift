import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// The request options, through the built binary as users run it: the job options of `add` and
/// `get` (-H, -A, -u, --netrc, --netrc-file), stored with the jobs and sent by a later run, never
/// printed and never sent to another origin; and the connection options of `run` and `get`
/// (--proxy, --noproxy, --cacert, -k, --http1.1, --limit-rate, --per-host-rate), which the
/// URLSession transport refuses by name.
final class RequestOptionsTests: XCTestCase {
    /// The machine's proxy variables: taken out of every child's environment, unless a test sets
    /// one, so that only what a test asks for decides whether a proxy is used.
    private static let proxyVariables = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                         "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"]

    // MARK: Helpers

    /// Runs `haul ARGUMENTS --db DB` in the harness's folder, in `HaulProcess.environment(extra)`
    /// without the machine's proxy variables, and with the default transport unless a test
    /// names one (these options are the libcurl transport's, whatever HAUL_TRANSPORT the suite
    /// runs under).
    private func haul(_ h: RunHarness, _ arguments: [String], environment extra: [String: String] = [:],
                      timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line) throws -> ProcessResult {
        var environment = HaulProcess.environment(extra)
        for name in Self.proxyVariables where extra[name] == nil { environment[name] = nil }
        if extra["HAUL_TRANSPORT"] == nil { environment["HAUL_TRANSPORT"] = nil }
        let result = try HaulProcess.run(h.haul, arguments + ["--db", h.db], environment: environment,
                                         currentDirectory: h.temp.path, timeout: timeout)
        XCTAssertFalse(result.timedOut, "haul \(arguments.joined(separator: " ")) ran past \(timeout) s; stderr: \(result.stderrText)",
                       file: file, line: line)
        return result
    }

    /// One `haul get URL -d OUT --quiet OPTIONS` into a fresh harness, and the job it made.
    private struct Fetch {
        let harness: RunHarness
        let result: ProcessResult
        /// `haul show 1 --json`.
        let job: [String: Any]
        let context: String

        var output: String { result.stdoutText + result.stderrText }

        /// The get succeeded and `out/NAME` holds `data`.
        func assertDone(_ name: String, _ data: Data, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertEqual(result.status, 0, "\(context): \(output)", file: file, line: line)
            XCTAssertEqual(job["state"] as? String, "done", "\(context): \(job)", file: file, line: line)
            XCTAssertEqual(harness.contents(name), data, "\(context): out/\(name)", file: file, line: line)
        }

        /// The get failed after one attempt (not retried), with a reason holding every one of
        /// `words`, and placed nothing.
        func assertFailedAtOnce(reasonContaining words: [String], file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertEqual(result.status, 1, "\(context): \(output)", file: file, line: line)
            XCTAssertEqual(job["state"] as? String, "failed", "\(context): \(job)", file: file, line: line)
            XCTAssertEqual(job["attempts"] as? Int, 1, "\(context): a permanent failure is not retried: \(job)", file: file, line: line)
            let reason = job["last_error"] as? String ?? ""
            for word in words {
                XCTAssertTrue(reason.contains(word), "\(context): the reason lacks \(word): \(reason)", file: file, line: line)
            }
            XCTAssertEqual(harness.outputFiles(), [], "\(context): a failed job placed a file", file: file, line: line)
        }
    }

    private func get(_ url: String, _ options: [String] = [], environment: [String: String] = [:], _ context: String,
                     timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line) throws -> Fetch {
        let h = try RunHarness(self, file: file, line: line)
        let result = try haul(h, ["get", url, "-d", h.out, "--quiet"] + options, environment: environment, timeout: timeout,
                              file: file, line: line)
        return Fetch(harness: h, result: result, job: try h.show(1, file: file, line: line), context: context)
    }

    /// `Basic base64(CREDENTIALS)`.
    private static func basic(_ credentials: String) -> String { "Basic " + Data(credentials.utf8).base64EncodedString() }

    /// A file of `text`, mode 0600 (as a .netrc must be), at `folder/name`.
    private static func privateFile(_ folder: TempDirectory, _ name: String, _ text: String) throws -> String {
        let path = try folder.write(name, Data(text.utf8))
        XCTAssertEqual(chmod(path, 0o600), 0)
        return path
    }

    /// The permission bits of `path`, or nil when there is no such file.
    private static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    // MARK: 1. Headers, User-Agent, secrecy

    /// -H and -A given to `add` reach the server on the later `run`; the secret header value and
    /// the password of -u (as given, or base64-encoded) appear in no output: not `show`, `show
    /// --json`, `list --json`, `run --json`, nor any stderr; and the database is owner-only.
    func testHeadersAndUserAgentReachTheServerAndTheirValuesAreNeverPrinted() throws {
        let h = try RunHarness(self)
        let server = try FaultServer()
        defer { server.stop() }
        let data = runTestData(60_000, seed: 501)
        server.route("/a.bin", FaultServer.file(data))
        let secret = "SECRET-5c1"
        let password = "pw-SECRET-77e"
        let agent = "haul-tests/1.0 (request options)"

        let add = try haul(h, ["add", server.url("/a.bin").absoluteString, "-d", h.out, "-H", "X-Token: \(secret)",
                               "-H", "X-Trace:  trace-42 ", "-A", agent, "-u", "tester:\(password)"])
        XCTAssertEqual(add.status, 0, add.stderrText)
        let run = try haul(h, ["run", "--json"])
        XCTAssertEqual(run.status, 0, run.stdoutText + run.stderrText)
        XCTAssertEqual(h.contents("a.bin"), data)

        let request = try XCTUnwrap(server.requests(path: "/a.bin").last)
        XCTAssertEqual(request.header("X-Token"), secret)
        XCTAssertEqual(request.header("X-Trace"), "trace-42", "the value is sent trimmed")
        XCTAssertEqual(request.header("User-Agent"), agent)
        XCTAssertEqual(request.header("Authorization"), Self.basic("tester:\(password)"))

        let show = try haul(h, ["show", "1"])
        XCTAssertEqual(show.status, 0, show.stderrText)
        let requestLine = show.stdoutLines.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("request:") } ?? ""
        for name in ["X-Token", "X-Trace", "Authorization"] {
            XCTAssertTrue(requestLine.contains(name), "show names the header \(name): \(show.stdoutText)")
        }
        let outputs = [("add", add), ("run --json", run), ("show", show),
                       ("show --json", try haul(h, ["show", "1", "--json"])), ("list --json", try haul(h, ["list", "--json"]))]
        let secrets = [secret, password, Data("tester:\(password)".utf8).base64EncodedString(), "trace-42"]
        for (name, output) in outputs {
            XCTAssertEqual(output.status, 0, "\(name): \(output.stderrText)")
            for value in secrets {
                XCTAssertFalse(output.stdoutText.contains(value), "\(name) printed \(value) on stdout: \(output.stdoutText)")
                XCTAssertFalse(output.stderrText.contains(value), "\(name) printed \(value) on stderr: \(output.stderrText)")
            }
        }
        XCTAssertEqual(Self.mode(h.db), 0o600, "a database holding header values is owner-only")
        for journal in [h.db + "-wal", h.db + "-shm"] {
            if let mode = Self.mode(journal) { XCTAssertEqual(mode, 0o600, journal) }
        }
    }

    // MARK: 2. Credentials

    /// A route that answers 401 unless the request carries `Basic base64(u:p)`: `-u u:p`,
    /// `--netrc-file`, and `--netrc` (from $HOME/.netrc) all get the file; without credentials
    /// the job fails after one attempt, 401 being permanent.
    func testBasicCredentialsFromTheCommandLineAndNetrcFiles() throws {
        let server = try FaultServer()
        defer { server.stop() }
        let data = runTestData(40_000, seed: 502)
        let expected = Self.basic("u:p")
        server.route("/private.bin") { request in
            request.header("Authorization") == expected ? FaultServer.fileResponse(data, request: request)
                : .status(401, headers: ["WWW-Authenticate": "Basic realm=\"haul-test\""])
        }
        let url = server.url("/private.bin").absoluteString
        let netrc = "machine 127.0.0.1 login u password p\n"
        let folder = try makeTempDirectory(prefix: "haul-netrc")
        let netrcFile = try Self.privateFile(folder, "credentials", netrc)
        let home = try makeTempDirectory(prefix: "haul-home")
        _ = try Self.privateFile(home, ".netrc", netrc)

        try get(url, ["-u", "u:p"], "-u u:p").assertDone("private.bin", data)
        try get(url, ["--netrc-file", netrcFile], "--netrc-file").assertDone("private.bin", data)
        try get(url, ["--netrc"], environment: ["HOME": home.path], "--netrc with HOME=\(home.path)").assertDone("private.bin", data)
        try get(url, [], "no credentials").assertFailedAtOnce(reasonContaining: ["401"])
        XCTAssertEqual(server.requests(path: "/private.bin").filter { $0.header("Authorization") == expected }.count, 3,
                       "each of the three credentialed gets sent the credentials: \(server.allRequests)")
    }

    // MARK: 3. Redirects

    /// A redirect to another origin (127.0.0.2) gets the custom header but neither Authorization
    /// nor Cookie; a redirect within the origin keeps them all. With both transports.
    func testCredentialHeadersNeverFollowARedirectToAnotherOrigin() throws {
        let origin = try FaultServer(host: "127.0.0.1")
        let other = try FaultServer(host: "127.0.0.2")
        defer { origin.stop(); other.stop() }
        let data = runTestData(30_000, seed: 503)
        origin.route("/cross", FaultServer.Response.redirect(to: other.url("/target").absoluteString))
        origin.route("/same", FaultServer.Response.redirect(to: "/target", status: 307))
        origin.route("/target", FaultServer.file(data))
        other.route("/target", FaultServer.file(data))
        let authorization = Self.basic("u:p")
        let cookie = "session=SECRET-c00k1e"

        for kind in TransportKind.allCases.map(\.rawValue) {
            origin.resetRecording()
            other.resetRecording()
            let h = try RunHarness(self)
            let add = try haul(h, ["add", "\(origin.url("/cross").absoluteString) out=cross.bin",
                                   "\(origin.url("/same").absoluteString) out=same.bin", "-d", h.out,
                                   "-u", "u:p", "-H", "Cookie: \(cookie)", "-H", "X-Custom: kept"])
            XCTAssertEqual(add.status, 0, "\(kind): \(add.stderrText)")
            let run = try haul(h, ["run", "--transport", kind, "--max-attempts", "1", "--quiet"])
            XCTAssertEqual(run.status, 0, "\(kind): \(run.stdoutText)\(run.stderrText)")
            XCTAssertEqual(h.contents("cross.bin"), data, kind)
            XCTAssertEqual(h.contents("same.bin"), data, kind)

            for first in origin.requests(path: "/cross") + origin.requests(path: "/same") {
                XCTAssertEqual(first.header("Authorization"), authorization, "\(kind): \(first)")
            }
            let away = try XCTUnwrap(other.requests(path: "/target").first, "\(kind): the other origin was never asked")
            XCTAssertNil(away.header("Authorization"), "\(kind): Authorization went to another origin")
            XCTAssertNil(away.header("Cookie"), "\(kind): Cookie went to another origin")
            XCTAssertEqual(away.header("X-Custom"), "kept", "\(kind): other headers follow the redirect")
            let home = try XCTUnwrap(origin.requests(path: "/target").first, "\(kind): the same-origin target was never asked")
            XCTAssertEqual(home.header("Authorization"), authorization, "\(kind): a same-origin redirect keeps Authorization")
            XCTAssertEqual(home.header("Cookie"), cookie, "\(kind): a same-origin redirect keeps Cookie")
            XCTAssertEqual(home.header("X-Custom"), "kept", kind)
        }
    }

    /// .netrc credentials go to the job's own origin only: not to another host a redirect leads
    /// to (a `default` entry matches every host), nor to another port of the same host (a
    /// `machine` entry names no port); a redirect within the origin still gets them.
    func testNetrcCredentialsNeverFollowARedirectToAnotherOrigin() throws {
        let origin = try FaultServer(host: "127.0.0.1")
        let otherPort = try FaultServer(host: "127.0.0.1")
        let otherHost = try FaultServer(host: "127.0.0.2")
        defer { origin.stop(); otherPort.stop(); otherHost.stop() }
        let data = runTestData(20_000, seed: 509)
        origin.route("/port", FaultServer.Response.redirect(to: otherPort.url("/target").absoluteString))
        origin.route("/host", FaultServer.Response.redirect(to: otherHost.url("/target").absoluteString))
        origin.route("/same", FaultServer.Response.redirect(to: "/target", status: 307))
        for server in [origin, otherPort, otherHost] { server.route("/target", FaultServer.file(data)) }
        let h = try RunHarness(self)
        let netrc = try Self.privateFile(h.temp, "netrc", "machine 127.0.0.1 login u password p\ndefault login d password q\n")
        let add = try haul(h, ["add", "\(origin.url("/port").absoluteString) out=port.bin",
                               "\(origin.url("/host").absoluteString) out=host.bin",
                               "\(origin.url("/same").absoluteString) out=same.bin", "-d", h.out, "--netrc-file", netrc])
        XCTAssertEqual(add.status, 0, add.stderrText)
        let run = try haul(h, ["run", "--max-attempts", "1", "--quiet"])
        XCTAssertEqual(run.status, 0, run.stdoutText + run.stderrText)
        for name in ["port.bin", "host.bin", "same.bin"] { XCTAssertEqual(h.contents(name), data, name) }

        let authorization = Self.basic("u:p")
        for path in ["/port", "/host", "/same", "/target"] {
            for request in origin.requests(path: path) {
                XCTAssertEqual(request.header("Authorization"), authorization, "the job's own origin: \(request)")
            }
        }
        XCTAssertEqual(origin.requests(path: "/target").count, 1, "\(origin.allRequests)")
        for (server, what) in [(otherPort, "another port of the host"), (otherHost, "another host")] {
            let away = try XCTUnwrap(server.requests(path: "/target").first, "\(what) was never asked")
            XCTAssertNil(away.header("Authorization"), ".netrc credentials went to \(what)")
        }
    }

    // MARK: 4. TLS

    /// Against nginx with a throwaway CA, the machine's CA variables cleared: --cacert trusts it,
    /// -k skips verification, neither fails the job after one attempt saying what to do; HTTP/2
    /// is used unless --http1.1 says not to.
    func testTLSTrustOptionsAndHTTP11() throws {
        let server: HTTPSServer
        do {
            server = try HTTPSServer()
        } catch let missing as HTTPSServer.ToolMissing {
            guard HTTPSServer.ToolMissing.requiredByEnvironment else { throw XCTSkip(missing.description) }
            XCTFail("CI=true, yet \(missing)")
            throw missing
        }
        defer { server.stop() }
        let data = runTestData(120_000, seed: 504)
        let names = ["cacert.bin", "insecure.bin", "untrusted.bin", "http11.bin"]
        for name in names { try server.write(name, data) }
        let noBundle = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
        func url(_ name: String) -> String { server.url("/" + name).absoluteString }

        try get(url("cacert.bin"), ["--cacert", server.caFile], environment: noBundle, "--cacert").assertDone("cacert.bin", data)
        try get(url("insecure.bin"), ["-k"], environment: noBundle, "-k").assertDone("insecure.bin", data)
        try get(url("untrusted.bin"), [], environment: noBundle, "no trust")
            .assertFailedAtOnce(reasonContaining: ["certificate not trusted", "--cacert"])
        try get(url("http11.bin"), ["--cacert", server.caFile, "--http1.1"], environment: noBundle, "--http1.1")
            .assertDone("http11.bin", data)

        XCTAssertEqual(server.protocolOfRequest("/cacert.bin"), "HTTP/2.0", server.accessLog().joined(separator: "\n"))
        XCTAssertEqual(server.protocolOfRequest("/http11.bin"), "HTTP/1.1", server.accessLog().joined(separator: "\n"))
        XCTAssertNil(server.accessLog().first { $0.contains("/untrusted.bin") }, "an untrusted server was sent a request")
    }

    // MARK: 5. Proxies

    /// --proxy and http_proxy send the request through an HTTP proxy (absolute-form target);
    /// --noproxy bypasses it. Through SOCKS5, socks5h:// hands the proxy the name, socks5:// the
    /// address it resolved.
    func testProxies() throws {
        let server = try FaultServer()
        let proxy = try ForwardingProxy()
        let socks = try SOCKS5Proxy()
        defer { server.stop(); proxy.stop(); socks.stop() }
        let data = runTestData(50_000, seed: 505)
        server.route("/p.bin", FaultServer.file(data))
        let url = server.url("/p.bin").absoluteString

        try get(url, ["--proxy", proxy.url], "--proxy").assertDone("p.bin", data)
        try get(url, [], environment: ["http_proxy": proxy.url], "http_proxy").assertDone("p.bin", data)
        let viaProxy = proxy.requests
        XCTAssertEqual(viaProxy.map(\.target), [url, url], "each get went through the proxy, absolute-form: \(viaProxy)")
        XCTAssertEqual(viaProxy.map(\.proxyStatus), [nil, nil], "the proxy relayed the origin's answers")
        XCTAssertEqual(server.requests(path: "/p.bin").count, 2)

        try get(url, ["--proxy", proxy.url, "--noproxy", "127.0.0.1"], "--noproxy").assertDone("p.bin", data)
        XCTAssertEqual(proxy.requests.count, 2, "--noproxy 127.0.0.1 went through the proxy: \(proxy.requests)")
        XCTAssertEqual(server.requests(path: "/p.bin").count, 3, "--noproxy reached the origin directly")

        let named = "http://localhost:\(server.port)/p.bin"
        let socksPort = String(socks.port)
        try get(named, ["--proxy", "socks5h://127.0.0.1:" + socksPort], "socks5h").assertDone("p.bin", data)
        try get(named, ["--proxy", "socks5://127.0.0.1:" + socksPort], "socks5").assertDone("p.bin", data)
        let connects = socks.requests.filter(\.isConnect)
        XCTAssertEqual(connects.map(\.addressType), [.domainName, .ipv4], "\(connects)")
        XCTAssertEqual(connects.map(\.host), ["localhost", "127.0.0.1"], "\(connects)")
        XCTAssertEqual(connects.map(\.port), [server.port, server.port])
        XCTAssertEqual(server.requests(path: "/p.bin").count, 5)

        // A --proxy that is no URL is a usage error that names it without its password, even
        // without a scheme or with a '/' or '#' in the password.
        let h = try RunHarness(self)
        for proxy in ["px:PW-S3CRET@127.0.0.1:9", "http://u:PW-S3CRET#x@127.0.0.1:9", "http://u:PW-S3CRET/x@127.0.0.1:9"] {
            let refused = try haul(h, ["get", url, "-d", h.out, "--proxy", proxy])
            XCTAssertEqual(refused.status, 64, refused.stderrText)
            XCTAssertTrue(refused.stderrText.contains("'--proxy' takes a URL") && refused.stderrText.contains("***@127.0.0.1:9"),
                          refused.stderrText)
            XCTAssertFalse(refused.stderrText.contains("PW-S3CRET"), refused.stderrText)
        }
        // A space in the password: refused as --proxy; from http_proxy, libcurl refuses it and
        // quotes it, and the failure recorded and shown has no password.
        let spaced = try haul(h, ["get", url, "-d", h.out, "--proxy", "http://u:PW S3CRET@127.0.0.1:9"])
        XCTAssertEqual(spaced.status, 64, spaced.stderrText)
        XCTAssertFalse(spaced.stderrText.contains("S3CRET"), spaced.stderrText)
        let fromEnvironment = try haul(h, ["get", url, "-d", h.out, "--max-attempts", "1"],
                                       environment: ["http_proxy": "http://u:PW S3CRET@127.0.0.1:9"])
        XCTAssertEqual(fromEnvironment.status, 1, fromEnvironment.stderrText)
        for output in [fromEnvironment, try haul(h, ["show", "1"]), try haul(h, ["export"])] {
            XCTAssertFalse((output.stdoutText + output.stderrText).contains("S3CRET"), output.stdoutText + output.stderrText)
        }
        let shown = try haul(h, ["show", "1"]).stdoutText
        XCTAssertTrue(shown.contains("***@127.0.0.1:9") && shown.contains("the proxy's URL is not usable"), "the failure names the proxy, hidden: \(shown)")
    }

    // MARK: 6. Rate limits

    /// --limit-rate 1M holds 4 MiB to about 4 s; --per-host-rate 512k gives each of two hosts its
    /// own 512 KiB/s, so 2 MiB from each takes about 4 s, not the 8 s one shared limit would.
    func testRateLimits() throws {
        let first = try FaultServer(host: "127.0.0.1")
        let second = try FaultServer(host: "127.0.0.2")
        defer { first.stop(); second.stop() }
        let big = runTestData(4 << 20, seed: 506)
        first.route("/big.bin", FaultServer.file(big))
        let limited = try get(first.url("/big.bin").absoluteString, ["--limit-rate", "1M"], "--limit-rate 1M")
        limited.assertDone("big.bin", big)
        XCTAssertGreaterThanOrEqual(limited.result.seconds, 3.5, "4 MiB at 1 MiB/s")
        XCTAssertLessThan(limited.result.seconds, 15, "4 MiB at 1 MiB/s")

        let halves = [runTestData(2 << 20, seed: 507), runTestData(2 << 20, seed: 508)]
        first.route("/one.bin", FaultServer.file(halves[0]))
        second.route("/two.bin", FaultServer.file(halves[1]))
        let h = try RunHarness(self)
        let run = try haul(h, ["get", first.url("/one.bin").absoluteString, second.url("/two.bin").absoluteString,
                               "-d", h.out, "--quiet", "--per-host-rate", "512k"])
        XCTAssertEqual(run.status, 0, run.stdoutText + run.stderrText)
        XCTAssertEqual(h.contents("one.bin"), halves[0])
        XCTAssertEqual(h.contents("two.bin"), halves[1])
        XCTAssertGreaterThanOrEqual(run.seconds, 3.5, "2 MiB from a host at 512 KiB/s")
        XCTAssertLessThan(run.seconds, 7, "each host has its own 512 KiB/s: one shared limit would take 8 s")
    }

    // MARK: 7. URLSession

    /// The URLSession transport refuses a connection option as a usage error naming it, before
    /// asking anything; and fails a --netrc job at once, saying it needs libcurl.
    func testURLSessionRefusesWhatItCannotDo() throws {
        let h = try RunHarness(self)
        let server = try FaultServer()
        defer { server.stop() }
        server.route("/u.bin", FaultServer.file(runTestData(1_000, seed: 509)))
        let netrc = try Self.privateFile(h.temp, "netrc", "machine 127.0.0.1 login u password p\n")
        let add = try haul(h, ["add", server.url("/u.bin").absoluteString, "-d", h.out, "--netrc-file", netrc])
        XCTAssertEqual(add.status, 0, add.stderrText)

        let refused = try haul(h, ["run", "--transport", "urlsession", "--proxy", "http://127.0.0.1:9"])
        XCTAssertEqual(refused.status, 64, refused.stdoutText + refused.stderrText)
        XCTAssertTrue(refused.stderrText.contains("--proxy"), refused.stderrText)
        XCTAssertEqual(server.allRequests.count, 0)
        XCTAssertEqual(try h.counts()["queued"], 1, "a refused run leaves the job queued")

        let run = try haul(h, ["run", "--transport", "urlsession", "--quiet"])
        XCTAssertEqual(run.status, 1, run.stdoutText + run.stderrText)
        let job = try h.show(1)
        XCTAssertEqual(job["attempts"] as? Int, 1, "\(job)")
        let reason = job["last_error"] as? String ?? ""
        XCTAssertTrue(reason.contains("--netrc") && reason.contains("libcurl transport"), reason)
        XCTAssertEqual(server.allRequests.count, 0, "a job URLSession cannot make is not asked for")

        // `get` refuses before it queues anything.
        let get = try haul(h, ["get", server.url("/other.bin").absoluteString, "-d", h.out,
                               "--transport", "urlsession", "--limit-rate", "1M"])
        XCTAssertEqual(get.status, 64, get.stdoutText + get.stderrText)
        XCTAssertTrue(get.stderrText.contains("--limit-rate"), get.stderrText)
        XCTAssertEqual(try h.counts().values.reduce(0, +), 1, "the refused get queued nothing")
    }
}
