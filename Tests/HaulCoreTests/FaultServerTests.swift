import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HaulTestSupport
import XCTest

final class FaultServerTests: XCTestCase {
    private var servers: [FaultServer] = []
    private var session: URLSession!

    override func setUp() {
        super.setUp()
        let config = URLSessionConfiguration.ephemeral
        config.urlCache = nil
        config.requestCachePolicy = .reloadIgnoringLocalCacheData
        config.httpMaximumConnectionsPerHost = 16
        config.timeoutIntervalForRequest = 5
        session = URLSession(configuration: config)
    }

    override func tearDown() {
        session.invalidateAndCancel()
        for server in servers { XCTAssertTrue(server.stop(timeout: 3), "server threads did not finish") }
        servers.removeAll()
        super.tearDown()
    }

    private func makeServer(host: String = "127.0.0.1", tracker: FaultServer.ConcurrencyTracker? = nil) throws -> FaultServer {
        let server = try FaultServer(host: host, tracker: tracker)
        servers.append(server)
        return server
    }

    private func get(_ url: URL, headers: [String: String] = [:]) async throws -> (status: Int, response: HTTPURLResponse, body: Data) {
        try await Self.get(url, headers: headers, session: session)
    }

    private static func get(_ url: URL, headers: [String: String] = [:], session: URLSession) async throws -> (status: Int, response: HTTPURLResponse, body: Data) {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        return (http.statusCode, http, data)
    }

    private static let fileBytes = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    // MARK: Basics

    func testPlain200WithBody() async throws {
        let server = try makeServer()
        XCTAssertEqual(server.baseURL.absoluteString, "http://127.0.0.1:\(server.port)")
        server.route("/hello", .text("hello world"))
        let r = try await get(server.url("/hello?x=1"))
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "hello world")
        XCTAssertEqual(r.response.value(forHTTPHeaderField: "Content-Length"), "11")

        let recorded = server.requests(path: "/hello")
        XCTAssertEqual(recorded.count, 1)
        XCTAssertEqual(recorded.first?.method, "GET")
        XCTAssertEqual(recorded.first?.query, "x=1")
        XCTAssertEqual(recorded.first?.requestLine, "GET /hello?x=1 HTTP/1.1")
        XCTAssertNotNil(recorded.first?.headers["HOST"], "case-insensitive header lookup")

        let missing = try await get(server.url("/nope"))
        XCTAssertEqual(missing.status, 404)
    }

    func testDistinctLoopbackHosts() throws {
        let a = try makeServer(host: "127.0.0.2")
        let b = try makeServer(host: "127.0.0.3")
        XCTAssertEqual(a.baseURLString, "http://127.0.0.2:\(a.port)")
        XCTAssertEqual(b.baseURLString, "http://127.0.0.3:\(b.port)")
        a.route("/who", .text("a"))
        let socket = try RawSocket(b)
        try socket.sendGet("/who")
        XCTAssertEqual(socket.readResponse()?.status, 404, "routes are per server")
        XCTAssertEqual(a.requestCount(), 0)
        XCTAssertEqual(b.requestCount(), 1)
    }

    // MARK: File helper

    func testRangeGives206WithContentRange() async throws {
        let server = try makeServer()
        server.route("/f", FaultServer.file(Self.fileBytes, etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT"))

        let open = try await get(server.url("/f"), headers: ["Range": "bytes=100-"])
        XCTAssertEqual(open.status, 206)
        XCTAssertEqual(open.response.value(forHTTPHeaderField: "Content-Range"), "bytes 100-999/1000")
        XCTAssertEqual(open.body, Self.fileBytes.subdata(in: 100..<1000))

        let closed = try await get(server.url("/f"), headers: ["Range": "bytes=10-19"])
        XCTAssertEqual(closed.status, 206)
        XCTAssertEqual(closed.response.value(forHTTPHeaderField: "Content-Range"), "bytes 10-19/1000")
        XCTAssertEqual(closed.body, Self.fileBytes.subdata(in: 10..<20))

        let full = try await get(server.url("/f"))
        XCTAssertEqual(full.status, 200)
        XCTAssertEqual(full.body, Self.fileBytes)
        XCTAssertEqual(full.response.value(forHTTPHeaderField: "ETag"), "\"v1\"")
        XCTAssertEqual(full.response.value(forHTTPHeaderField: "Accept-Ranges"), "bytes")
    }

    func testRangeBeyondEndGives416() async throws {
        let server = try makeServer()
        server.route("/f", FaultServer.file(Self.fileBytes, etag: "\"v1\"", lastModified: nil))
        let r = try await get(server.url("/f"), headers: ["Range": "bytes=1000-"])
        XCTAssertEqual(r.status, 416)
        XCTAssertEqual(r.response.value(forHTTPHeaderField: "Content-Range"), "bytes */1000")
        XCTAssertTrue(r.body.isEmpty)
    }

    func testIfRange() async throws {
        let lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"
        let server = try makeServer()
        server.route("/f", FaultServer.file(Self.fileBytes, etag: "\"v2\"", lastModified: lastModified))

        let stale = try await get(server.url("/f"), headers: ["Range": "bytes=500-", "If-Range": "\"v1\""])
        XCTAssertEqual(stale.status, 200, "If-Range mismatch must serve the whole file")
        XCTAssertEqual(stale.body, Self.fileBytes)

        let weak = try await get(server.url("/f"), headers: ["Range": "bytes=500-", "If-Range": "W/\"v2\""])
        XCTAssertEqual(weak.status, 200, "weak validators never match If-Range")

        let matching = try await get(server.url("/f"), headers: ["Range": "bytes=500-", "If-Range": "\"v2\""])
        XCTAssertEqual(matching.status, 206)
        XCTAssertEqual(matching.body, Self.fileBytes.subdata(in: 500..<1000))

        let byDate = try await get(server.url("/f"), headers: ["Range": "bytes=500-", "If-Range": lastModified])
        XCTAssertEqual(byDate.status, 206)

        server.route("/plain", FaultServer.fileIgnoringRange(Self.fileBytes))
        let ignored = try await get(server.url("/plain"), headers: ["Range": "bytes=500-"])
        XCTAssertEqual(ignored.status, 200)
        XCTAssertEqual(ignored.body.count, 1000)
    }

    // MARK: Sequencing

    func testSequencedResponsesLastRepeats() async throws {
        let server = try makeServer()
        server.route("/f", sequence: [
            FaultServer.Response.status(503, headers: ["Retry-After": "2"]).handler,
            FaultServer.Response.status(500).handler,
            FaultServer.file(Self.fileBytes),
        ])
        let first = try await get(server.url("/f"))
        XCTAssertEqual(first.status, 503)
        XCTAssertEqual(first.response.value(forHTTPHeaderField: "Retry-After"), "2")
        let second = try await get(server.url("/f"))
        XCTAssertEqual(second.status, 500)
        for _ in 0..<2 {
            let again = try await get(server.url("/f"))
            XCTAssertEqual(again.status, 200)
            XCTAssertEqual(again.body, Self.fileBytes)
        }
        XCTAssertEqual(server.requests(path: "/f").count, 4)
    }

    // MARK: Faults

    func testTruncatedBodyIsAnErrorForURLSession() async throws {
        let server = try makeServer()
        server.route("/t", FaultServer.Response.ok(Self.fileBytes).truncated(afterBytes: 300))
        do {
            let r = try await get(server.url("/t"))
            XCTFail("expected an error, got \(r.status) with \(r.body.count) bytes")
        } catch {
            // Expected: the connection closed before Content-Length bytes arrived.
        }
        XCTAssertTrue(server.waitUntilIdle(timeout: 5))
    }

    func testTruncatedBodyOnTheWire() throws {
        let server = try makeServer()
        server.route("/t", FaultServer.Response.ok(Self.fileBytes).truncated(afterBytes: 300))
        let socket = try RawSocket(server)
        try socket.sendGet("/t")
        let (data, end) = socket.readToEnd()
        XCTAssertEqual(end, .eof)
        let text = String(decoding: data, as: UTF8.self)
        XCTAssertTrue(text.contains("Content-Length: 1000\r\n"))
        let headEnd = try XCTUnwrap(data.range(of: Data("\r\n\r\n".utf8)))
        XCTAssertEqual(data.count - headEnd.upperBound, 300)
    }

    func testResetMidBody() throws {
        let server = try makeServer()
        server.route("/r", FaultServer.Response.ok(Self.fileBytes).reset(afterBytes: 10))
        let socket = try RawSocket(server)
        try socket.sendGet("/r")
        XCTAssertTrue(server.waitUntilIdle(includingConnections: true, timeout: 5))
        let (_, end) = socket.readToEnd()
        XCTAssertEqual(end, .reset)
    }

    func testExtraByteAndKeepAlive() throws {
        let server = try makeServer()
        server.route("/x", FaultServer.Response(body: "abc").withExtraBytes())
        server.route("/k", .text("kept"))
        let socket = try RawSocket(server)
        try socket.sendGet("/k")
        XCTAssertEqual(socket.readResponse()?.body, Data("kept".utf8))
        try socket.sendGet("/x")
        let r = try XCTUnwrap(socket.readResponse())
        XCTAssertEqual(r.body, Data("abc".utf8))
        XCTAssertEqual(socket.read(count: 1), Data("X".utf8), "one byte beyond Content-Length")
        try socket.sendGet("/k", close: true)
        let last = try XCTUnwrap(socket.readResponse())
        XCTAssertEqual(last.headers["connection"], "close")
        XCTAssertEqual(socket.readToEnd().1, .eof, "Connection: close honoured")

        let requests = server.allRequests
        XCTAssertEqual(requests.count, 3)
        XCTAssertEqual(Set(requests.map(\.connectionID)).count, 1, "one persistent connection")
        XCTAssertEqual(requests.map(\.indexOnConnection), [0, 1, 2])
        XCTAssertEqual(server.connectionsAccepted, 1)
    }

    func testChunkedWithAndWithoutTerminatorAndSlowBody() throws {
        let server = try makeServer()
        server.route("/c", FaultServer.Response(body: "hello chunked world").chunked(chunkSize: 5))
        server.route("/s", FaultServer.Response(body: "slowly").slowBody(bytesPerChunk: 2, delay: 0.01))
        server.route("/n", FaultServer.Response(body: "no end").withoutChunkedTerminator())

        let socket = try RawSocket(server)
        try socket.sendGet("/c")
        let chunked = try XCTUnwrap(socket.readResponse())
        XCTAssertEqual(chunked.headers["Transfer-Encoding"], "chunked")
        XCTAssertEqual(chunked.body, Data("hello chunked world".utf8))
        try socket.sendGet("/s")
        XCTAssertEqual(socket.readResponse()?.body, Data("slowly".utf8))

        let broken = try RawSocket(server)
        try broken.sendGet("/n")
        let (data, end) = broken.readToEnd()
        XCTAssertEqual(end, .eof)
        let text = String(decoding: data, as: UTF8.self)
        XCTAssertTrue(text.hasSuffix("6\r\nno end\r\n"), text)
    }

    func testStallForeverAndEndlessBodyEndPromptlyOnStop() throws {
        let server = try FaultServer()  // stopped explicitly below
        server.route("/stall", FaultServer.Response(body: "never").stalledAfterHeaders(.forever))
        server.route("/endless", FaultServer.Response.endless())
        server.route("/delay", FaultServer.Response(body: "late").delayed(60))

        let stalled = try RawSocket(server)
        try stalled.sendGet("/stall")
        let endless = try RawSocket(server)
        try endless.sendGet("/endless")
        let delayed = try RawSocket(server)
        try delayed.sendGet("/delay")
        XCTAssertTrue(server.waitForInFlight(atLeast: 3, timeout: 5))
        XCTAssertNotNil(endless.read(count: 200_000), "endless body keeps coming")
        XCTAssertNotNil(stalled.read(through: "\r\n\r\n"), "headers are sent before the stall")

        let started = ContinuousClock.now
        XCTAssertTrue(server.stop(timeout: 5))
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        XCTAssertEqual(server.inFlight, 0)
        XCTAssertEqual(server.openConnections, 0)
        XCTAssertNotEqual(stalled.readToEnd().1, .timeout)
        XCTAssertNotEqual(delayed.readToEnd().1, .timeout)
        XCTAssertThrowsError(try RawSocket(server), "listener closed")
    }

    func testClientDisconnectEndsEndlessBody() throws {
        let server = try makeServer()
        server.route("/endless", FaultServer.Response.endless().slowBody(bytesPerChunk: 1024, delay: 0.001))
        do {
            let socket = try RawSocket(server)
            try socket.sendGet("/endless")
            XCTAssertNotNil(socket.read(count: 4096))
        }  // socket closed here
        XCTAssertTrue(server.waitUntilIdle(includingConnections: true, timeout: 5))
    }

    // MARK: Concurrency counting

    func testMaxConcurrentPerServerAndOverall() async throws {
        let tracker = FaultServer.ConcurrencyTracker()
        let a = try makeServer(host: "127.0.0.2", tracker: tracker)
        let b = try makeServer(host: "127.0.0.3", tracker: tracker)
        let gate = FaultServer.Gate()
        defer { gate.open() }
        // The handler holds every request in flight until the test opens the gate: deterministic overlap.
        let held: FaultServer.Handler = { _ in
            gate.wait(timeout: 5)
            return .text("done")
        }
        a.route("/held", held)
        b.route("/held", held)

        let urls = Array(repeating: a.url("/held"), count: 3) + Array(repeating: b.url("/held"), count: 2)
        try await withThrowingTaskGroup(of: Int.self) { group in
            let session: URLSession = self.session
            for url in urls {
                group.addTask { try await Self.get(url, session: session).status }
            }
            let aArrived = await a.waitForRequests(count: 3, path: "/held", timeout: 5)
            let bArrived = await b.waitForRequests(count: 2, path: "/held", timeout: 5)
            XCTAssertTrue(aArrived)
            XCTAssertTrue(bArrived)
            XCTAssertEqual(a.inFlight, 3)
            XCTAssertEqual(b.inFlight, 2)
            gate.open()
            for try await status in group { XCTAssertEqual(status, 200) }
        }
        XCTAssertEqual(a.maxConcurrent, 3)
        XCTAssertEqual(b.maxConcurrent, 2)
        XCTAssertEqual(tracker.maxConcurrent, 5)
        XCTAssertEqual(tracker.maxConcurrent(host: a.hostKey), 3)
        XCTAssertEqual(tracker.maxConcurrent(host: b.hostKey), 2)
        XCTAssertTrue(a.waitUntilIdle(timeout: 5))
        XCTAssertTrue(b.waitUntilIdle(timeout: 5))
        XCTAssertEqual(tracker.inFlight, 0)

        // Sequential requests never overlap.
        a.resetRecording()
        _ = try await get(a.url("/other"))
        XCTAssertTrue(a.waitUntilIdle(timeout: 5))
        _ = try await get(a.url("/other"))
        XCTAssertEqual(a.maxConcurrent, 1)
    }
}
