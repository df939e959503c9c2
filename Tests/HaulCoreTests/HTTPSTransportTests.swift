import Foundation
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Both transports over TLS, against nginx on loopback (`HTTPSServer`): a whole file, HTTP/2, a
/// resume, an untrusted certificate, and an https → http redirect through a proxied
/// `FaultServer`. Each test loops over `TransportKind.allCases` (XCTest on Linux finds no
/// inherited test methods), and every assertion names the transport.
///
/// Trust: libcurl is given the test CA with `CurlTransport.Options(caFile:)`. URLSession on Linux
/// cannot be given one: FoundationNetworking reads `URLSessionCertificateAuthorityInfoFile` only
/// on Android, and otherwise leaves libcurl's built-in CA bundle in place, so OpenSSL never looks
/// at `SSL_CERT_FILE` / `SSL_CERT_DIR` (checked by hand: with any of those, `CURL_CA_BUNDLE`, or an
/// OPENSSL_CONF `VerifyCAFile`, the handshake still fails). The
/// trusted cases therefore run for libcurl and are reported skipped for URLSession, after the
/// libcurl part has run; the untrusted case runs for both.
final class HTTPSTransportTests: XCTestCase {
    private var server: HTTPSServer!
    private var upstream: FaultServer!
    private var folder: TempDirectory!

    /// 1 MiB: many TLS records and HTTP/2 DATA frames.
    private static let data: Data = {
        var generator = SeededGenerator(seed: 0x7115)
        return Data(generator.bytes(1 << 20))
    }()

    override func setUpWithError() throws {
        try super.setUpWithError()
        upstream = try FaultServer()
        do {
            server = try HTTPSServer(proxies: [.init(prefix: "/fault/", upstream: upstream.baseURL)])
        } catch let missing as HTTPSServer.ToolMissing {
            guard HTTPSServer.ToolMissing.requiredByEnvironment else { throw XCTSkip(missing.description) }
            XCTFail("CI=true, yet \(missing)")
            throw missing
        }
        try server.write("f.bin", Self.data)
        folder = try makeTempDirectory()
    }

    override func tearDown() {
        if let server { XCTAssertTrue(server.stop(), "nginx did not exit on SIGTERM") }
        server = nil
        if let upstream { XCTAssertTrue(upstream.stop(timeout: 3), "fault server threads did not finish") }
        upstream = nil
        super.tearDown()
    }

    // MARK: - Helpers

    /// A transport of `kind` that trusts `caFile` (none: the system's store only), or nil when
    /// `kind` cannot be told a CA file.
    private func transport(_ kind: TransportKind, trusting caFile: String?) throws -> (any Transport)? {
        switch kind {
        case .curl:
            // Not `.fromEnvironment()`: an SSL_CERT_FILE in the test's environment must not decide.
            return try CurlTransport(options: .init(caFile: caFile))
        case .urlsession:
            return caFile == nil ? URLSessionTransport() : nil
        }
    }

    /// Ends a test whose trusted part could not run for `kinds` as skipped, naming them (after the
    /// other kinds ran: a failure they recorded still fails the test).
    private func skipUntrusting(_ kinds: [TransportKind], file: StaticString = #filePath, line: UInt = #line) throws {
        guard !kinds.isEmpty else { return }
        throw XCTSkip("checked for every other transport; \(kinds.map(\.rawValue)) cannot be told a CA file on Linux "
                      + "(FoundationNetworking reads URLSessionCertificateAuthorityInfoFile only on Android)", file: file, line: line)
    }

    private typealias Result = AttemptResult
    private typealias Outcome = AttemptOutcome

    /// The temp file for `out/NAME`, holding `partial` as an earlier attempt left it (nil: none).
    private func tempFile(_ name: String, holding partial: Data? = nil) throws -> TempFile {
        let temp = TempFile(destination: folder.file(name), jobID: 1, queue: 0)
        if let partial { try partial.write(to: URL(fileURLWithPath: temp.path)) }
        return temp
    }

    /// One attempt at `url` into `temp` through `transport`, then placed as the engine places it.
    private func download(_ url: URL, with transport: any Transport, into temp: TempFile,
                          validator: Validator? = nil, total: Int64? = nil) async throws -> Outcome {
        try await AttemptOutcome.download(url, with: transport, into: temp, validator: validator, total: total, timeout: 60)
    }

    private func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    private func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    // MARK: - Tests

    /// A file over https arrives byte for byte, from 127.0.0.1 and from localhost (both in the
    /// certificate); libcurl speaks HTTP/2 to nginx.
    func testAFileOverHTTPSArrivesWholeAndLibcurlSpeaksHTTP2() async throws {
        var untrusting: [TransportKind] = []
        for kind in TransportKind.allCases {
            guard let transport = try transport(kind, trusting: server.caFile) else { untrusting.append(kind); continue }
            defer { transport.cancelAll() }
            for host in ["127.0.0.1", "localhost"] {
                let temp = try tempFile("\(kind)-\(host).bin")
                // A query of its own, to find this request's line (and its protocol) in the access log.
                let outcome = try await download(server.url("/f.bin?\(kind)-\(host)", host: host), with: transport, into: temp)
                XCTAssertEqual(outcome.result, .placed(bytes: Int64(Self.data.count), status: 200), "\(kind), \(host)")
                XCTAssertTrue(contents(temp.destination) == Self.data, "\(kind), \(host): the file differs from the one served")
                XCTAssertFalse(exists(temp.path), "\(kind), \(host): the temp file became the destination")
                if kind == .curl {
                    XCTAssertEqual(server.protocolOfRequest("/f.bin?\(kind)-\(host)"), "HTTP/2.0",
                                   "\(kind), \(host): not HTTP/2: \(server.accessLog().joined(separator: "\n"))")
                }
            }
        }
        try skipUntrusting(untrusting)
    }

    /// A partial temp file and nginx's ETag as the stored validator: `Range` + `If-Range` go out,
    /// nginx answers 206 with the rest, and the whole file is placed.
    func testAResumeOverHTTPSAppendsTheRestAndPlacesTheWholeFile() async throws {
        let etag = try HTTPSServer.etag(ofFile: server.documentRoot + "/f.bin")
        let kept = 400_000
        var untrusting: [TransportKind] = []
        for kind in TransportKind.allCases {
            guard let transport = try transport(kind, trusting: server.caFile) else { untrusting.append(kind); continue }
            defer { transport.cancelAll() }
            let temp = try tempFile("\(kind)-resumed.bin", holding: Self.data.prefix(kept))
            let outcome = try await download(server.url("/f.bin"), with: transport, into: temp,
                                             validator: .etag(etag), total: Int64(Self.data.count))
            XCTAssertEqual(outcome.attempt.requestHeaders, ["Range": "bytes=\(kept)-", "If-Range": etag], "\(kind)")
            XCTAssertEqual(outcome.result, .placed(bytes: Int64(Self.data.count), status: 206), "\(kind)")
            XCTAssertEqual(outcome.fetch.head?["content-range"], "bytes \(kept)-\(Self.data.count - 1)/\(Self.data.count)", "\(kind)")
            XCTAssertTrue(contents(temp.destination) == Self.data, "\(kind): the resumed file differs from the one served")
            let logged = server.waitForAccessLog { $0.contains("range=\"bytes=\(kept)-\"") && $0.contains(" 206 ") }
            XCTAssertNotNil(logged, "\(kind): nginx logged no 206 for the range; log: \(server.accessLog())")
            XCTAssertTrue(logged?.contains("bytes=\(Self.data.count - kept)") ?? false, "\(kind): nginx sent more than the rest: \(logged ?? "")")
        }
        try skipUntrusting(untrusting)
    }

    /// A server whose certificate no trusted CA signed: the fetch is refused for good (waiting
    /// will not make the certificate trusted), its reason speaks of the certificate, and nothing
    /// is written.
    func testAnUntrustedCertificateFailsTheTransferAndWritesNothing() async throws {
        for kind in TransportKind.allCases {
            guard let transport = try transport(kind, trusting: nil) else { XCTFail("\(kind): no transport"); continue }
            defer { transport.cancelAll() }
            let temp = try tempFile("\(kind)-untrusted.bin")
            let outcome = try await download(server.url("/f.bin"), with: transport, into: temp)
            guard case .refused(let reason)? = outcome.failure else {
                XCTFail("\(kind): expected a refusal, got \(outcome.result)"); continue
            }
            XCTAssertEqual(RetryPolicy().decide(outcome.failure!, attempt: 1), .fail, "\(kind): an untrusted certificate is not retried")
            XCTAssertTrue(reason.lowercased().contains("certificate"), "\(kind): the reason does not name the certificate: \(reason)")
            XCTAssertNil(outcome.fetch.head, "\(kind): no response can come before the handshake")
            XCTAssertFalse(exists(temp.destination), "\(kind): something was placed")
            XCTAssertEqual(contents(temp.path)?.count ?? 0, 0, "\(kind): bytes were written")
        }
    }

    /// An https URL that redirects to plain http (the redirect comes from the `FaultServer`
    /// behind nginx, over TLS): followed, for a 302 and a 308, and the file placed.
    func testAnHTTPSToHTTPRedirectIsFollowed() async throws {
        upstream.route("/plain.bin", FaultServer.file(Self.data, etag: "\"plain-1\""))
        for status in [302, 308] {
            upstream.route("/to-http-\(status)", FaultServer.Response.redirect(to: upstream.url("/plain.bin").absoluteString, status: status))
        }
        var untrusting: [TransportKind] = []
        for kind in TransportKind.allCases {
            guard let transport = try transport(kind, trusting: server.caFile) else { untrusting.append(kind); continue }
            defer { transport.cancelAll() }
            for status in [302, 308] {
                upstream.resetRecording()
                let temp = try tempFile("\(kind)-redirected-\(status).bin")
                let outcome = try await download(server.url("/fault/to-http-\(status)"), with: transport, into: temp)
                XCTAssertEqual(outcome.result, .placed(bytes: Int64(Self.data.count), status: 200), "\(kind), \(status)")
                XCTAssertTrue(contents(temp.destination) == Self.data, "\(kind), \(status): the file differs from the one served")
                XCTAssertEqual(outcome.fetch.head?.url, upstream.url("/plain.bin"), "\(kind), \(status): not answered by the http URL")
                XCTAssertEqual(upstream.allRequests.map(\.path), ["/to-http-\(status)", "/plain.bin"],
                               "\(kind), \(status): the redirect came through nginx, then the target directly")
                XCTAssertNotNil(server.waitForAccessLog { $0.contains("/fault/to-http-\(status) ") && $0.contains(" \(status) ") },
                                "\(kind), \(status): nginx did not log the proxied redirect; log: \(server.accessLog())")
            }
        }
        try skipUntrusting(untrusting)
    }
}
