import Foundation
import HaulTestSupport
import XCTest

/// The test proxies (`ForwardingProxy`, `SOCKS5Proxy`) driven by a real client, the system's
/// `curl` command (skipped when it is missing), against a `FaultServer` origin: the body arrives,
/// the proxy logged the request as sent, and the origin saw an origin-form request. Plus
/// `stop()` with a tunnel open or a read pending, and SOCKS5 refusals, over a raw socket.
final class TestProxyTests: XCTestCase {
    private var origin: FaultServer!
    private static let body = "through the proxy\n"

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = try FaultServer()
        origin.route("/dir/file.txt", .text(Self.body))
    }

    override func tearDown() {
        if let origin { XCTAssertTrue(origin.stop(timeout: 3), "fault server threads did not finish") }
        origin = nil
        super.tearDown()
    }

    // MARK: - Helpers

    private func makeForwardingProxy(requireAuthorization: String? = nil) throws -> ForwardingProxy {
        let proxy = try ForwardingProxy(requireAuthorization: requireAuthorization)
        addTeardownBlock { XCTAssertTrue(proxy.stop(timeout: 3), "proxy threads did not finish") }
        return proxy
    }

    private func makeSOCKS5Proxy() throws -> SOCKS5Proxy {
        let proxy = try SOCKS5Proxy()
        addTeardownBlock { XCTAssertTrue(proxy.stop(timeout: 3), "proxy threads did not finish") }
        return proxy
    }

    /// `curl -q -sS --max-time 10 ARGUMENTS`, with no proxy variables in its environment.
    private func curl(_ arguments: [String]) throws -> ProcessResult {
        guard let executable = HaulProcess.tool("curl") else {
            throw XCTSkip("the curl command is not installed (Debian: apt-get install curl)")
        }
        var environment = HaulProcess.environment()
        for name in ["http_proxy", "https_proxy", "all_proxy", "no_proxy"] {
            environment[name] = nil
            environment[name.uppercased()] = nil
        }
        let result = try HaulProcess.run(executable, ["-q", "-sS", "--max-time", "10"] + arguments,
                                         environment: environment, timeout: 20)
        XCTAssertFalse(result.timedOut, "curl \(arguments) ran past 20 s")
        return result
    }

    private func originURL(_ path: String, host: String = "127.0.0.1") -> String {
        "http://\(host):\(origin.port)\(path)"
    }

    // MARK: - ForwardingProxy

    func testForwardingProxySendsAbsoluteFormRequestOnInOriginForm() throws {
        let proxy = try makeForwardingProxy()
        let target = originURL("/dir/file.txt?x=1")
        let result = try curl(["--proxy", proxy.url, "-H", "X-Test: kept", target])
        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertEqual(result.stdoutText, Self.body)

        let logged = proxy.requests
        XCTAssertEqual(logged.count, 1, "\(logged)")
        XCTAssertEqual(logged.first?.method, "GET")
        XCTAssertEqual(logged.first?.target, target)
        XCTAssertEqual(logged.first?.originTarget, "/dir/file.txt?x=1")
        XCTAssertNil(logged.first?.proxyStatus)
        XCTAssertNotNil(logged.first?.headers["Proxy-Connection"], "curl sends Proxy-Connection; the log keeps it")

        let seen = origin.requests(path: "/dir/file.txt")
        XCTAssertEqual(seen.count, 1)
        XCTAssertEqual(seen.first?.target, "/dir/file.txt?x=1", "origin-form, not absolute-form")
        XCTAssertEqual(seen.first?.header("Host"), "127.0.0.1:\(origin.port)")
        XCTAssertEqual(seen.first?.header("X-Test"), "kept")
        XCTAssertEqual(seen.first?.header("Connection"), "close")
        XCTAssertNil(seen.first?.header("Proxy-Connection"), "hop-by-hop field forwarded")
    }

    func testForwardingProxyRequiresBasicCredentialsWhenAsked() throws {
        let proxy = try makeForwardingProxy(requireAuthorization: "user:secret")
        let refused = try curl(["--proxy", proxy.url, "-o", "/dev/null", "-w", "%{http_code}", originURL("/dir/file.txt")])
        XCTAssertEqual(refused.stdoutText, "407", refused.stderrText)
        XCTAssertEqual(origin.requestCount(), 0, "a refused request reached the origin")

        let allowed = try curl(["--proxy", proxy.url, "--proxy-user", "user:secret", originURL("/dir/file.txt")])
        XCTAssertEqual(allowed.status, 0, allowed.stderrText)
        XCTAssertEqual(allowed.stdoutText, Self.body)
        XCTAssertEqual(proxy.requests.map(\.proxyStatus), [407, nil])
        XCTAssertEqual(proxy.requests.last?.headers["Proxy-Authorization"], "Basic dXNlcjpzZWNyZXQ=")
        XCTAssertEqual(origin.requestCount(), 1)
        XCTAssertNil(origin.allRequests.first?.header("Proxy-Authorization"), "credentials leaked to the origin")
    }

    func testForwardingProxyTunnelsConnect() throws {
        let proxy = try makeForwardingProxy()
        let result = try curl(["--proxy", proxy.url, "--proxytunnel", originURL("/dir/file.txt")])
        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertEqual(result.stdoutText, Self.body)
        XCTAssertEqual(proxy.requests.map(\.method), ["CONNECT"])
        XCTAssertEqual(proxy.requests.first?.target, "127.0.0.1:\(origin.port)")
        XCTAssertEqual(proxy.requests.first?.proxyStatus, 200)
        XCTAssertEqual(origin.allRequests.map(\.target), ["/dir/file.txt"])
    }

    func testForwardingProxyTunnelsHTTPS() throws {
        let server: HTTPSServer
        do {
            server = try HTTPSServer()
        } catch let missing as HTTPSServer.ToolMissing {
            guard HTTPSServer.ToolMissing.requiredByEnvironment else { throw XCTSkip(missing.description) }
            throw missing
        }
        defer { server.stop() }
        try server.write("f.txt", Data(Self.body.utf8))
        let proxy = try makeForwardingProxy()
        let result = try curl(["--proxy", proxy.url, "--cacert", server.caFile, server.url("/f.txt").absoluteString])
        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertEqual(result.stdoutText, Self.body)
        XCTAssertEqual(proxy.requests.map(\.target), ["127.0.0.1:\(server.port)"])
        XCTAssertEqual(proxy.requests.first?.method, "CONNECT")
        XCTAssertNotNil(server.waitForAccessLog { $0.contains("GET /f.txt") }, server.accessLog().description)
    }

    func testForwardingProxyAnswers502WhenTheOriginIsDown() throws {
        let proxy = try makeForwardingProxy()
        let deadPort = origin.port
        XCTAssertTrue(origin.stop(timeout: 3))
        let result = try curl(["-o", "/dev/null", "-w", "%{http_code}", "--proxy", proxy.url,
                               "http://127.0.0.1:\(deadPort)/gone"])
        XCTAssertEqual(result.stdoutText, "502", result.stderrText)
        XCTAssertEqual(proxy.requests.map(\.proxyStatus), [502])
    }

    func testForwardingProxyStopEndsAnOpenTunnel() throws {
        let proxy = try makeForwardingProxy()
        let socket = try RawSocket(host: proxy.host, port: proxy.port)
        try socket.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
        XCTAssertEqual(socket.read(through: "\r\n\r\n").map { String(decoding: $0, as: UTF8.self) },
                       "HTTP/1.1 200 Connection established\r\n\r\n")
        try socket.sendGet("/dir/file.txt")
        XCTAssertEqual(socket.readResponse()?.body, Data(Self.body.utf8), "keep-alive through the tunnel")
        XCTAssertTrue(proxy.stop(timeout: 3), "stop did not end the relay thread")
        XCTAssertEqual(socket.readToEnd().1, .eof)
    }

    // MARK: - SOCKS5Proxy

    func testSOCKS5hSendsTheHostNameToTheProxy() throws {
        let proxy = try makeSOCKS5Proxy()
        let url = proxy.url.replacingOccurrences(of: "socks5://", with: "socks5h://")
        let result = try curl(["--proxy", url, originURL("/dir/file.txt", host: "localhost")])
        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertEqual(result.stdoutText, Self.body)
        let logged = proxy.requests
        XCTAssertEqual(logged.count, 1, "\(logged)")
        XCTAssertEqual(logged.first?.addressType, .domainName)
        XCTAssertEqual(logged.first?.host, "localhost")
        XCTAssertEqual(logged.first?.port, origin.port)
        XCTAssertEqual(logged.first?.reply, 0)
        XCTAssertEqual(origin.allRequests.map(\.target), ["/dir/file.txt"])
    }

    func testSOCKS5SendsAnIPv4Address() throws {
        let proxy = try makeSOCKS5Proxy()
        let result = try curl(["--socks5", "127.0.0.1:\(proxy.port)", originURL("/dir/file.txt?q=2")])
        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertEqual(result.stdoutText, Self.body)
        XCTAssertEqual(proxy.requests.map(\.addressType), [.ipv4])
        XCTAssertEqual(proxy.requests.first?.host, "127.0.0.1")
        XCTAssertEqual(proxy.requests.first?.isConnect, true)
        XCTAssertEqual(origin.allRequests.map(\.target), ["/dir/file.txt?q=2"])
    }

    func testSOCKS5RefusesClientsWithoutTheNoAuthenticationMethod() throws {
        let proxy = try makeSOCKS5Proxy()
        let socket = try RawSocket(host: proxy.host, port: proxy.port)
        try socket.send(Data([5, 1, 0x02]))  // username/password only
        XCTAssertEqual(socket.read(count: 2).map { [UInt8]($0) }, [5, 0xFF])
        XCTAssertEqual(socket.readToEnd().1, .eof)
        XCTAssertTrue(proxy.requests.isEmpty)
    }

    func testSOCKS5ReportsARefusedConnection() throws {
        let proxy = try makeSOCKS5Proxy()
        let deadPort = origin.port
        XCTAssertTrue(origin.stop(timeout: 3))
        let socket = try RawSocket(host: proxy.host, port: proxy.port)
        try socket.send(Data([5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, UInt8(deadPort >> 8), UInt8(deadPort & 0xFF)]))
        XCTAssertEqual(socket.read(count: 2).map { [UInt8]($0) }, [5, 0])
        XCTAssertEqual(socket.read(count: 10).map { [UInt8]($0.prefix(2)) }, [5, 0x05], "connection refused")
        XCTAssertEqual(proxy.requests.map(\.reply), [0x05])
    }

    /// A client that stops mid-handshake leaves its thread blocked in a read: `stop` must end it.
    func testStopEndsAConnectionBlockedInARead() throws {
        let proxy = try makeSOCKS5Proxy()
        let socket = try RawSocket(host: proxy.host, port: proxy.port)
        try socket.send(Data([5, 1, 0]))
        XCTAssertEqual(socket.read(count: 2).map { [UInt8]($0) }, [5, 0], "the connection thread is running")
        XCTAssertTrue(proxy.stop(timeout: 3), "the thread blocked reading the request did not finish")
        XCTAssertEqual(socket.readToEnd().1, .eof)
    }
}
