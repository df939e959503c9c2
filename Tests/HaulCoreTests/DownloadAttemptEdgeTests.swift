import Foundation
import HaulTestSupport
import XCTest
@testable import HaulCore

/// The transport contract: HTTP edge cases of one download attempt — `DownloadAttempt` over each
/// transport (`TransportKind.allCases`) against the loopback fault server — and what
/// `RetryPolicy` makes of the outcome: what is resumed, appended, placed or refused. A resume is
/// simulated by leaving a partial temp file and passing the validator and length a previous
/// attempt would have stored. Each case runs once per transport, on a fresh server and folder.
final class DownloadAttemptEdgeTests: XCTestCase {
    private var server: FaultServer!
    private var transport: (any Transport)!
    private var folder: TempDirectory!

    /// Runs `check` once per transport, each time on a new server, folder and transport; a
    /// failure is followed by one naming the transport it happened with.
    /// The transport `eachTransport` is running the check with.
    private var transportKind = TransportKind.curl

    private func eachTransport(_ check: () async throws -> Void) async throws {
        for kind in TransportKind.allCases {
            let failuresBefore = testRun?.totalFailureCount ?? 0
            server = try FaultServer()
            folder = try makeTempDirectory()
            transport = try kind.make(maxTransfers: 16)
            transportKind = kind
            do { try await check() } catch { XCTFail("\(error)") }
            transport.cancelAll()
            transport = nil
            XCTAssertTrue(server.stop(timeout: 3), "server threads did not finish")
            server = nil
            if (testRun?.totalFailureCount ?? 0) > failuresBefore {
                XCTFail("the failures above happened with the \(kind.rawValue) transport")
            }
        }
    }

    /// The resource: 1000 bytes that differ from their neighbours, so a splice shows.
    private static let data = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8 &+ 7) })
    private static let etag = "\"v1\""

    // MARK: - Helpers

    /// How one attempt ended: its file placed, or why not.
    private typealias Result = AttemptResult
    private typealias Outcome = AttemptOutcome

    /// The temp file for `out/NAME`, holding `partial` as an earlier attempt left it (nil: none).
    private func tempFile(_ name: String, holding partial: Data? = nil) throws -> TempFile {
        let temp = TempFile(destination: folder.file(name), jobID: 1, queue: 0)
        if let partial { try partial.write(to: URL(fileURLWithPath: temp.path)) }
        return temp
    }

    /// One attempt at `path` into `temp`, resuming when `validator` is given and `temp` has bytes.
    private func download(_ path: String, into temp: TempFile, validator: Validator? = nil, total: Int64? = nil,
                          checksum: Checksum? = nil, stall: TimeInterval = 10, timeout: TimeInterval? = nil) async throws -> Outcome {
        try await AttemptOutcome.download(server.url(path), with: transport, into: temp, validator: validator, total: total,
                                          checksum: checksum, stall: stall, timeout: timeout)
    }

    private func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    private func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    private static func sha256(_ data: Data) -> Checksum {
        var hasher = HaulCore.SHA256()
        hasher.update(data)
        return Checksum(.sha256, hex: hasher.finalize())!
    }

    private let policy = RetryPolicy(backoff: Backoff(base: 4, cap: 4), maxRetryAfter: 600)

    // MARK: - 206 that does not continue the partial file

    /// A 206 is appended only when it carries exactly the rest: from the offset asked for, through
    /// the end, of a representation of the same total length, with the ETag asked for. Anything
    /// else writes nothing.
    func testPartialContentThatDoesNotContinueTheFileIsNeverAppended() async throws { try await eachTransport(checkPartialContentThatDoesNotContinueTheFileIsNeverAppended) }

    private func checkPartialContentThatDoesNotContinueTheFileIsNeverAppended() async throws {
        let data = Self.data
        let bigger = Data(data.reversed()) + Data(repeating: 0xAB, count: 200)
        let cases: [(String, FaultServer.Headers, Data)] = [
            // The right range without the ETag a 200 would carry (RFC 9110, 15.3.7), or with a
            // weak one: nothing shows it continues the version on disk.
            ("no ETag", ["Content-Range": "bytes 400-999/1000"], Data(data[400...])),
            ("a weak ETag", ["Content-Range": "bytes 400-999/1000", "ETag": "W/" + Self.etag], Data(data[400...])),
            ("a range starting before the offset", ["Content-Range": "bytes 300-999/1000"], Data(data[300...])),
            ("a range starting after the offset", ["Content-Range": "bytes 500-999/1000"], Data(data[500...])),
            ("a range stopping before the end", ["Content-Range": "bytes 400-799/1000"], Data(data[400..<800])),
            ("another total length", ["Content-Range": "bytes 400-1199/1200"], Data(bigger[400...])),
            ("an unknown total length", ["Content-Range": "bytes 400-999/*"], Data(data[400...])),
            ("an unsatisfied range", ["Content-Range": "bytes */1000"], Data(data[400...])),
            ("a malformed Content-Range", ["Content-Range": "bytes=400-999/1000"], Data(data[400...])),
            ("no Content-Range", [:], Data(data[400...])),
        ]
        for (index, (why, headers, body)) in cases.enumerated() {
            var headers = headers
            if index > 1 { headers.add("ETag", Self.etag) }
            server.route("/r\(index)", FaultServer.Response(status: 206, headers: headers, body: body))
            let temp = try tempFile("r\(index)", holding: data.prefix(400))

            let outcome = try await download("/r\(index)", into: temp, validator: .etag(Self.etag), total: 1000)

            guard case .mustRestart? = outcome.failure else { XCTFail("\(why): \(outcome.result)"); continue }
            XCTAssertEqual(contents(temp.path), data.prefix(400), "\(why): the partial file must be left as it was")
            XCTAssertFalse(exists(temp.destination), why)
            let request = server.requests(path: "/r\(index)").last
            XCTAssertEqual(request?.header("Range"), "bytes=400-", why)
            XCTAssertEqual(request?.header("If-Range"), Self.etag, why)
            XCTAssertEqual(policy.decide(outcome.failure!, attempt: 1), .retry(delay: 0, pauseHost: nil, discardPartial: true), why)
            XCTAssertEqual(policy.decide(outcome.failure!, attempt: 1, resumed: true), .restart, "\(why): a resume starting over spends no attempt")
        }
    }

    /// A 206 whose body is longer or shorter than its own Content-Range is never placed; nothing
    /// past the announced total is written, and what is kept is a true prefix of the file.
    func testPartialContentLongerOrShorterThanItsRangeIsNotPlaced() async throws { try await eachTransport(checkPartialContentLongerOrShorterThanItsRangeIsNotPlaced) }

    private func checkPartialContentLongerOrShorterThanItsRangeIsNotPlaced() async throws {
        let data = Self.data
        let headers: FaultServer.Headers = ["ETag": Self.etag, "Content-Range": "bytes 400-999/1000"]
        server.route("/long", FaultServer.Response(status: 206, headers: headers, body: Data(data[400...]) + Data(repeating: 0x58, count: 100)))
        let long = try tempFile("long", holding: data.prefix(400))
        let tooMuch = try await download("/long", into: long, validator: .etag(Self.etag), total: 1000)
        guard case .length? = tooMuch.failure else { return XCTFail("more than the range: \(tooMuch.result)") }
        XCTAssertFalse(exists(long.destination))
        let kept = contents(long.path) ?? Data()
        XCTAssertLessThanOrEqual(kept.count, 1000, "nothing past the announced total is written")
        XCTAssertEqual(kept, data.prefix(kept.count))

        server.route("/short", FaultServer.Response(status: 206, headers: headers, body: Data(data[400..<700])))
        let short = try tempFile("short", holding: data.prefix(400))
        let tooLittle = try await download("/short", into: short, validator: .etag(Self.etag), total: 1000)
        guard case .length? = tooLittle.failure else { return XCTFail("less than the range: \(tooLittle.result)") }
        XCTAssertFalse(exists(short.destination))
        XCTAssertEqual(contents(short.path), data.prefix(700), "what came continues the file, to resume later")
        XCTAssertEqual(tooLittle.attempt.snapshot, .init(bytesOnDisk: 700, expectedTotal: 1000, validator: .etag(Self.etag)))
    }

    // MARK: - Validators

    /// Only a strong validator is kept to resume with: after a weak ETag, or a Last-Modified not at
    /// least a second before Date, the next attempt starts over without Range or If-Range; after a
    /// Last-Modified a second or more before Date, If-Range carries that date.
    func testOnlyStrongValidatorsLeadToAResume() async throws { try await eachTransport(checkOnlyStrongValidatorsLeadToAResume) }

    private func checkOnlyStrongValidatorsLeadToAResume() async throws {
        let data = Self.data
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        let oneSecondEarlier = "Sun, 06 Nov 1994 08:49:36 GMT"
        let cases: [(String, String?, String?, Validator?)] = [
            ("a weak ETag", "W/\"w1\"", nil, nil),
            ("a weak ETag and an old Last-Modified", "W/\"w1\"", "Sun, 06 Nov 1994 07:00:00 GMT", nil),
            ("Last-Modified equal to Date", nil, date, nil),
            ("Last-Modified after Date", nil, "Sun, 06 Nov 1994 08:49:38 GMT", nil),
            ("Last-Modified one second before Date", nil, oneSecondEarlier, .lastModified(oneSecondEarlier)),
            ("a strong ETag", "\"s1\"", oneSecondEarlier, .etag("\"s1\"")),
        ]
        for (index, (why, etag, lastModified, expected)) in cases.enumerated() {
            let path = "/v\(index)"
            let serve: FaultServer.Handler = { request in
                FaultServer.fileResponse(data, request: request, etag: etag, lastModified: lastModified, extraHeaders: ["Date": date])
            }
            server.route(path, sequence: [{ serve($0).truncated(afterBytes: 300) }, serve])
            let temp = try tempFile("v\(index)")

            let first = try await download(path, into: temp)
            XCTAssertNotNil(first.failure, "\(why): a cut body must fail")
            let snapshot = first.attempt.snapshot
            XCTAssertEqual(snapshot.validator, expected, why)
            XCTAssertEqual(snapshot.bytesOnDisk, 300, why)

            let second = try await download(path, into: temp, validator: snapshot.validator, total: snapshot.expectedTotal)
            XCTAssertEqual(second.result, .placed(bytes: 1000, status: expected == nil ? 200 : 206), why)
            XCTAssertEqual(contents(temp.destination), data, why)
            XCTAssertFalse(exists(temp.path), "\(why): the temp file became the destination")
            let retry = server.requests(path: path).last
            XCTAssertEqual(retry?.header("Range"), expected == nil ? nil : "bytes=300-", why)
            XCTAssertEqual(retry?.header("If-Range"), expected?.headerValue, why)
        }
    }

    // MARK: - 416

    /// A 416 whose `bytes */N` equals the bytes kept means the partial file is the whole file: it
    /// is checked (sha256) and placed. Any other length, or another version, restarts.
    func testRangeNotSatisfiableCompletesOnlyTheSameFile() async throws { try await eachTransport(checkRangeNotSatisfiableCompletesOnlyTheSameFile) }

    private func checkRangeNotSatisfiableCompletesOnlyTheSameFile() async throws {
        let data = Self.data
        server.route("/whole", FaultServer.file(data, etag: Self.etag))
        for (name, total, checksum) in [("a", Int64?(1000), Checksum?(nil)), ("b", nil, nil), ("c", 1000, Self.sha256(data))] {
            let temp = try tempFile(name, holding: data)
            let outcome = try await download("/whole", into: temp, validator: .etag(Self.etag), total: total, checksum: checksum)
            XCTAssertEqual(outcome.result, .placed(bytes: 1000, status: 416), "stored total \(String(describing: total))")
            XCTAssertEqual(contents(temp.destination), data)
            XCTAssertFalse(exists(temp.path))
        }
        XCTAssertEqual(server.requests(path: "/whole").map { $0.header("Range") }, Array(repeating: "bytes=1000-", count: 3))

        let wrong = try tempFile("wrong-sha", holding: data)
        let mismatch = try await download("/whole", into: wrong, validator: .etag(Self.etag), total: 1000,
                                          checksum: Checksum(.sha256, hex: String(repeating: "0", count: 64)))
        guard case .checksum? = mismatch.failure else { return XCTFail("a 416 skips no check: \(mismatch.result)") }
        XCTAssertFalse(exists(wrong.destination))

        server.route("/shrunk", FaultServer.file(data.prefix(800), etag: Self.etag))
        server.route("/no-range", FaultServer.Response.status(416, headers: ["ETag": Self.etag]))
        server.route("/changed", FaultServer.Response.status(416, headers: ["ETag": "\"v2\"", "Content-Range": "bytes */1000"]))
        server.route("/bare", FaultServer.Response.status(416, headers: ["Content-Range": "bytes */1000"]))
        // No validator in the 416, but the total known before matches: the same file.
        let known = try tempFile("bare-known", holding: data)
        let bareKnown = try await download("/bare", into: known, validator: .etag(Self.etag), total: 1000)
        XCTAssertEqual(bareKnown.result, .placed(bytes: 1000, status: 416))
        let restarts: [(String, String, Int64?)] = [
            ("no validator and no total known before (a cut chunked body)", "/bare", nil),
            ("the server's length is shorter than the file kept", "/shrunk", 1000),
            ("the server's length is shorter, no total stored", "/shrunk", nil),
            ("the server's length differs from the stored total", "/whole", 1200),
            ("no Content-Range", "/no-range", 1000),
            ("another version (ETag) of the same length", "/changed", 1000),
        ]
        for (index, (why, path, total)) in restarts.enumerated() {
            let temp = try tempFile("restart\(index)", holding: data)
            let outcome = try await download(path, into: temp, validator: .etag(Self.etag), total: total)
            guard case .mustRestart? = outcome.failure else { XCTFail("\(why): \(outcome.result)"); continue }
            XCTAssertFalse(exists(temp.destination), why)
            XCTAssertEqual(contents(temp.path), data, why)
        }
    }

    // MARK: - Content-Encoding

    /// A body encoded although haul asked for identity is refused before a byte is written, on a
    /// fresh start or a resume, unless the destination's name says the file is in that coding;
    /// identity is fine. An encoded *error page* is still the error it
    /// reports: a 503 with Retry-After is retried after the delay, not failed for its encoding.
    func testEncodedBodiesAreRefusedButEncodedErrorPagesAreStillRetried() async throws { try await eachTransport(checkEncodedBodiesAreRefusedButEncodedErrorPagesAreStillRetried) }

    private func checkEncodedBodiesAreRefusedButEncodedErrorPagesAreStillRetried() async throws {
        let data = Self.data
        for (index, encoding) in ["gzip", " GZIP ", "x-gzip", "br", "deflate", "gzip, identity", "identity, gzip"].enumerated() {
            server.route("/e\(index)", FaultServer.Response.ok(data, headers: ["Content-Encoding": encoding]))
            let temp = try tempFile("e\(index)")
            let outcome = try await download("/e\(index)", into: temp)
            guard case .encoding? = outcome.failure else { XCTFail("\(encoding): \(outcome.result)"); continue }
            XCTAssertEqual(server.requests(path: "/e\(index)").last?.header("Accept-Encoding"), "identity")
            XCTAssertFalse(exists(temp.destination), encoding)
            XCTAssertEqual(contents(temp.path)?.count ?? 0, 0, "\(encoding): nothing is written")
            XCTAssertEqual(policy.decide(outcome.failure!, attempt: 1), .fail, encoding)
        }
        for (index, encoding) in ["identity", "Identity", ""].enumerated() {
            server.route("/i\(index)", FaultServer.Response.ok(data, headers: ["Content-Encoding": encoding]))
            let temp = try tempFile("i\(index)")
            let outcome = try await download("/i\(index)", into: temp)
            XCTAssertEqual(outcome.result, .placed(bytes: 1000, status: 200), encoding)
            XCTAssertEqual(contents(temp.destination), data, encoding)
        }
        // A compressed file served with its compression as Content-Encoding (a common server
        // setting): the name says the bytes are in that coding, so they are the file, kept as
        // sent (by libcurl's transport; URLSession decodes the body itself, so it refuses).
        for (index, (encoding, name)) in [("gzip", "a.tar.gz"), ("x-gzip", "b.TGZ"), ("br", "c.js.br"), ("zstd", "d.zst")].enumerated() {
            server.route("/n\(index)", FaultServer.Response.ok(data, headers: ["Content-Encoding": encoding]))
            let temp = try tempFile(name)
            let outcome = try await download("/n\(index)", into: temp)
            guard transportKind == .curl else {
                guard case .encoding? = outcome.failure else { XCTFail("URLSession, \(encoding) for \(name): \(outcome.result)"); continue }
                continue
            }
            XCTAssertEqual(outcome.result, .placed(bytes: 1000, status: 200), "\(encoding) for \(name)")
            XCTAssertEqual(contents(temp.destination), data, name)
        }
        server.route("/mismatch", FaultServer.Response.ok(data, headers: ["Content-Encoding": "br"]))
        let mismatch = try tempFile("e.tar.gz")
        guard case .encoding? = try await download("/mismatch", into: mismatch).failure else { return XCTFail("br for a .gz name was kept") }

        server.route("/resume", FaultServer.Response(status: 206, headers: [
            "ETag": Self.etag, "Content-Range": "bytes 400-999/1000", "Content-Encoding": "gzip",
        ], body: Data(data[400...])))
        let partial = try tempFile("resume", holding: data.prefix(400))
        let resumed = try await download("/resume", into: partial, validator: .etag(Self.etag), total: 1000)
        guard case .encoding? = resumed.failure else { return XCTFail("encoded 206: \(resumed.result)") }
        XCTAssertEqual(contents(partial.path), data.prefix(400), "nothing is appended")

        // 202 to a resume: not ready yet; tried again later with the bytes kept.
        server.route("/later", FaultServer.Response(status: 202, headers: ["Retry-After": "3"], body: "queued, try later"))
        let kept = try tempFile("later", holding: data.prefix(400))
        let later = try await download("/later", into: kept, validator: .etag(Self.etag), total: 1000)
        XCTAssertEqual(later.failure, .http(status: 202, retryAfter: "3"))
        XCTAssertEqual(contents(kept.path), data.prefix(400), "the bytes kept stay")

        server.route("/busy", FaultServer.Response(status: 503, headers: ["Retry-After": "7", "Content-Encoding": "gzip"],
                                                   body: Data(repeating: 0x1F, count: 40)))
        let busy = try await download("/busy", into: try tempFile("busy"))
        XCTAssertEqual(busy.failure, .http(status: 503, retryAfter: "7"))
        XCTAssertEqual(policy.decide(busy.failure ?? .cancelled, attempt: 1), .retry(delay: 7, pauseHost: 7, discardPartial: false))
        // A date is read by the server's clock (its Date header), not this machine's: 20 s, though
        // long past here.
        server.route("/dated", FaultServer.Response(status: 429, headers: [
            "Retry-After": "Mon, 01 Jan 2001 00:00:20 GMT", "Date": "Mon, 01 Jan 2001 00:00:00 GMT"], body: "slow down"))
        let dated = try await download("/dated", into: try tempFile("dated"))
        XCTAssertEqual(dated.failure, .http(status: 429, retryAfter: "20"))
        server.route("/gone", FaultServer.Response(status: 404, headers: ["Content-Encoding": "gzip"], body: Data(repeating: 0x1F, count: 40)))
        let gone = try await download("/gone", into: try tempFile("gone"))
        XCTAssertEqual(gone.failure, .http(status: 404, retryAfter: nil), "the reason is the 404, not the encoding")
    }

    // MARK: - Framing

    /// One byte short of Content-Length: not placed, retried, and the bytes kept to resume.
    func testBodyOneByteShortIsRetriedAndKeptForResume() async throws { try await eachTransport(checkBodyOneByteShortIsRetriedAndKeptForResume) }

    private func checkBodyOneByteShortIsRetriedAndKeptForResume() async throws {
        let data = Self.data
        server.route("/short", FaultServer.Response.ok(data, headers: ["ETag": Self.etag]).truncated(afterBytes: 999))
        let temp = try tempFile("short")
        let outcome = try await download("/short", into: temp)
        switch outcome.failure {
        case .transport?, .length?: break
        default: XCTFail("expected a transport or length failure, got \(outcome.result)")
        }
        XCTAssertFalse(exists(temp.destination))
        XCTAssertEqual(contents(temp.path), data.prefix(999))
        XCTAssertEqual(outcome.attempt.snapshot, .init(bytesOnDisk: 999, expectedTotal: 1000, validator: .etag(Self.etag),
                                                       url: server.url("/short").absoluteString))
        guard case .retry(_, nil, false)? = outcome.failure.map({ policy.decide($0, attempt: 1) }) else {
            return XCTFail("a short body is retried and its bytes kept")
        }
    }

    /// One byte more than Content-Length: the message is the announced bytes, nothing more, and the
    /// stray byte never ends up in the next response's file. When the true file is that byte longer,
    /// sha256 catches it: no wrong file is placed.
    func testBodyOneByteLongNeverPlacesAWrongFile() async throws { try await eachTransport(checkBodyOneByteLongNeverPlacesAWrongFile) }

    private func checkBodyOneByteLongNeverPlacesAWrongFile() async throws {
        let data = Self.data
        server.route("/extra", FaultServer.Response.ok(data).withExtraBytes(Data([0x21])))
        let reversed = Data(data.reversed())
        server.route("/next", FaultServer.Response.ok(reversed))
        let first = try tempFile("extra")
        let extra = try await download("/extra", into: first)
        XCTAssertEqual(extra.result, .placed(bytes: 1000, status: 200))
        XCTAssertEqual(contents(first.destination), data)
        let next = try tempFile("next")
        let following = try await download("/next", into: next)
        // When the next request reuses the connection before the stray byte is read, curl fails
        // it ("Received HTTP/0.9 when not allowed"): a retryable transport failure, never a file
        // that starts with the stray byte.
        switch following.result {
        case .placed:
            XCTAssertEqual(following.result, .placed(bytes: 1000, status: 200))
            XCTAssertEqual(contents(next.destination), reversed, "the stray byte must not start the next body")
        case .failed(.transport, _):
            XCTAssertFalse(exists(next.destination))
        case .failed:
            XCTFail("\(following.result)")
        }

        let longer = data + Data([0x21])
        server.route("/understated", FaultServer.Response.ok(longer).declaringContentLength(1000))
        let checked = try tempFile("understated")
        let outcome = try await download("/understated", into: checked, checksum: Self.sha256(longer))
        guard case .checksum? = outcome.failure else { return XCTFail("\(outcome.result)") }
        XCTAssertFalse(exists(checked.destination))
    }

    /// A chunked body cut before its last chunk (no `0\r\n\r\n`) is not a complete file.
    func testChunkedBodyWithoutTerminatorIsNotPlaced() async throws { try await eachTransport(checkChunkedBodyWithoutTerminatorIsNotPlaced) }

    private func checkChunkedBodyWithoutTerminatorIsNotPlaced() async throws {
        let data = Self.data
        server.route("/chunked", FaultServer.Response.ok(data, headers: ["ETag": Self.etag]).chunked(chunkSize: 256).withoutChunkedTerminator())
        let temp = try tempFile("chunked")
        let outcome = try await download("/chunked", into: temp)
        guard case .transport? = outcome.failure else { return XCTFail("\(outcome.result)") }
        XCTAssertFalse(exists(temp.destination))
        let kept = contents(temp.path) ?? Data()
        XCTAssertEqual(kept, data.prefix(kept.count))
        XCTAssertNil(outcome.attempt.snapshot.expectedTotal)
    }

    /// A 200 error page announcing more than it sends is not placed; one sent instead of the rest
    /// of a partial file appends nothing.
    func testErrorPageWithTheWrongLengthIsNotPlaced() async throws { try await eachTransport(checkErrorPageWithTheWrongLengthIsNotPlaced) }

    private func checkErrorPageWithTheWrongLengthIsNotPlaced() async throws {
        let page = FaultServer.Response(status: 200, headers: ["Content-Type": "text/html"], body: "<html><h1>Temporarily unavailable</h1></html>")
        server.route("/page", page.declaringContentLength(5000).ending(.close))
        let fresh = try tempFile("page")
        let outcome = try await download("/page", into: fresh)
        switch outcome.failure {
        case .transport?, .length?: break
        default: XCTFail("expected a transport or length failure, got \(outcome.result)")
        }
        XCTAssertFalse(exists(fresh.destination))

        server.route("/page-on-resume", page)
        let partial = try tempFile("page-on-resume", holding: Self.data.prefix(400))
        let resumed = try await download("/page-on-resume", into: partial, validator: .etag(Self.etag), total: 1000)
        guard case .mustRestart? = resumed.failure else { return XCTFail("\(resumed.result)") }
        XCTAssertEqual(contents(partial.path), Self.data.prefix(400))
        XCTAssertFalse(exists(partial.destination))
    }

    /// Two Content-Length fields that differ leave the body's end unknown (RFC 9112 §6.3): not
    /// placed, whichever one the transport went by; two that agree are one.
    func testDifferingContentLengthsAreNeverPlaced() async throws { try await eachTransport(checkDifferingContentLengthsAreNeverPlaced) }

    private func checkDifferingContentLengthsAreNeverPlaced() async throws {
        let data = Self.data
        server.route("/two", FaultServer.Response(status: 200, headers: FaultServer.Headers([("Content-Length", "1000"), ("Content-Length", "600")]),
                                                  body: data).ending(.close))
        let two = try tempFile("two")
        let outcome = try await download("/two", into: two)
        switch outcome.failure {
        case .length?, .transport?: break
        default: XCTFail("expected a length or transport failure, got \(outcome.result)")
        }
        XCTAssertFalse(exists(two.destination))

        server.route("/same", FaultServer.Response(status: 200, headers: FaultServer.Headers([("Content-Length", "1000"), ("Content-Length", "1000")]),
                                                   body: data))
        let same = try tempFile("same")
        let agreed = try await download("/same", into: same)
        XCTAssertEqual(agreed.result, .placed(bytes: 1000, status: 200))
        XCTAssertEqual(contents(same.destination), data)
    }

    /// A small error page is read to its end and dropped, so the request ends cleanly at the
    /// server and the next request reuses the connection; a large one is cut off at its head.
    func testSmallErrorPagesAreDrainedAndLargeOnesCut() async throws { try await eachTransport(checkSmallErrorPagesAreDrainedAndLargeOnesCut) }

    private func checkSmallErrorPagesAreDrainedAndLargeOnesCut() async throws {
        // 48 KiB, paced: the head arrives well before the end of the body.
        let page = String(repeating: "no such file\n", count: 48 * 1024 / 13)
        server.route("/missing", FaultServer.Response.text(page, status: 404).slowBody(bytesPerChunk: 8 * 1024, delay: 0.02))
        server.route("/file", FaultServer.Response(status: 200, headers: [:], body: Self.data))
        let big = Data(repeating: 0x41, count: 4 << 20)
        server.route("/big-error", FaultServer.Response(status: 503, headers: [:], body: big)
            .slowBody(bytesPerChunk: 64 * 1024, delay: 0.05))

        let missing = try await download("/missing", into: try tempFile("missing"))
        guard case .http(404, _, _)? = missing.failure else { return XCTFail("\(missing.result)") }
        XCTAssertTrue(server.waitUntilIdle(timeout: 5), "the 404 ended at the server")
        let file = try await download("/file", into: try tempFile("file"))
        XCTAssertEqual(file.result, .placed(bytes: 1000, status: 200))
        let requests = server.allRequests
        XCTAssertEqual(requests.map(\.path), ["/missing", "/file"])
        XCTAssertEqual(requests[0].connectionID, requests[1].connectionID, "the connection survived the 404")

        let started = ContinuousClock.now
        let cut = try await download("/big-error", into: try tempFile("big-error"))
        guard case .http(503, _, _)? = cut.failure else { return XCTFail("\(cut.result)") }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2), "a 4 MiB error body (about 3 s) is not read")
        XCTAssertFalse(exists(folder.file("big-error")))

        // A small page trickled out (about 30 s) is given up after `RefusedBody.time`, keeping its reason.
        let trickle = String(repeating: "x", count: 60 * 1024)
        server.route("/trickled", FaultServer.Response.text(trickle, status: 404).slowBody(bytesPerChunk: 1024, delay: 0.5))
        let begun = ContinuousClock.now
        let trickled = try await download("/trickled", into: try tempFile("trickled"))
        guard case .http(404, _, _)? = trickled.failure else { return XCTFail("\(trickled.result)") }
        XCTAssertLessThan(ContinuousClock.now - begun, .seconds(8), "a drain gets 5 s")
    }

    // MARK: - Redirects

    /// Redirects the transport refuses (including through 308, which haul follows itself): a
    /// scheme other than http(s), a loop, no Location, more than 10 hops. Their targets are never
    /// requested, and the job fails for good.
    func testRedirectsHaulWillNotFollow() async throws { try await eachTransport(checkRedirectsHaulWillNotFollow) }

    private func checkRedirectsHaulWillNotFollow() async throws {
        let data = Self.data
        let port = server.port
        server.route("/final", FaultServer.file(data, etag: Self.etag))
        server.route("/to-ftp", FaultServer.Response.redirect(to: "ftp://127.0.0.1:\(port)/final"))
        server.route("/to-ftp-308", FaultServer.Response.redirect(to: "ftp://127.0.0.1:\(port)/final", status: 308))
        server.route("/to-file-308", FaultServer.Response.redirect(to: "file:///etc/passwd", status: 308))
        server.route("/to-gopher-301", FaultServer.Response.redirect(to: "gopher://127.0.0.1:\(port)/final", status: 301))
        server.route("/loop-a", FaultServer.Response.redirect(to: "/loop-b", status: 308))
        server.route("/loop-b", FaultServer.Response.redirect(to: "/loop-a", status: 302))
        server.route("/no-location-308", FaultServer.Response.status(308))
        server.route("/no-location-302", FaultServer.Response.status(302))
        // 11 hops, alternating 302 and 308 (FoundationNetworking follows the first itself, haul
        // the second; libcurl follows neither: haul does).
        for hop in 0...10 {
            server.route("/hop\(hop)", FaultServer.Response.redirect(to: hop == 10 ? "/final" : "/hop\(hop + 1)",
                                                                   status: hop.isMultiple(of: 2) ? 302 : 308))
        }
        let refused: [(String, String)] = [
            ("/to-ftp", "ftp:"), ("/to-ftp-308", "ftp:"), ("/to-file-308", "file:"), ("/to-gopher-301", "gopher:"),
            ("/loop-a", "loop"), ("/no-location-308", "Location"), ("/no-location-302", "Location"), ("/hop0", "redirects"),
        ]
        for (index, (path, reason)) in refused.enumerated() {
            let temp = try tempFile("refused\(index)")
            let outcome = try await download(path, into: temp)
            guard case .badRedirect(let why)? = outcome.failure else { XCTFail("\(path): \(outcome.result)"); continue }
            XCTAssertTrue(why.contains(reason), "\(path): \(why)")
            XCTAssertFalse(exists(temp.destination), path)
            XCTAssertEqual(policy.decide(outcome.failure!, attempt: 1), .fail, path)
        }
        XCTAssertEqual(server.requestCount(path: "/final"), 0, "no refused redirect reached its target")
        XCTAssertEqual(server.requestCount(path: "/loop-a"), 1)
        XCTAssertEqual(server.requestCount(path: "/hop10"), 1, "the 11th hop itself is refused")

        // Ten hops are fine, and a relative 308 Location resolves against the URL that sent it.
        server.route("/d/e/rel", FaultServer.Response.redirect(to: "../x/./final?q=1", status: 308))
        server.route("/d/x/final", FaultServer.file(data, etag: Self.etag))
        for path in ["/hop1", "/d/e/rel"] {
            let temp = try tempFile("followed" + path.replacingOccurrences(of: "/", with: "-"))
            let outcome = try await download(path, into: temp)
            XCTAssertEqual(outcome.result, .placed(bytes: 1000, status: 200), path)
            XCTAssertEqual(contents(temp.destination), data, path)
        }
        XCTAssertEqual(server.requests(path: "/d/x/final").first?.query, "q=1")
    }

    // MARK: - Concurrency

    /// Fetches to one host started together all run at once: a slow transfer never holds up
    /// another one to the same host (the engine, not the transport, decides how many run per
    /// host). The fetches start as the engine starts a batch of claimed jobs, slow and fast mixed.
    func testASlowTransferDoesNotHoldUpAnotherToTheSameHost() async throws {
        try await eachTransport(checkASlowTransferDoesNotHoldUpAnotherToTheSameHost)
    }

    private func checkASlowTransferDoesNotHoldUpAnotherToTheSameHost() async throws {
        let slowBody = Data(repeating: 0x53, count: 128 * 1024)  // about 3 s at this pace
        server.route("/slow", FaultServer.Response.ok(slowBody).slowBody(bytesPerChunk: 2048, delay: 0.05))
        server.route("/fast", FaultServer.Response.ok(Self.data))
        let transport: any Transport = self.transport
        let started = ContinuousClock.now
        var fetches: [(path: String, attempt: DownloadAttempt, task: Task<ContinuousClock.Instant, Never>)] = []
        for index in 0..<6 {
            let path = index.isMultiple(of: 2) ? "/slow" : "/fast"
            let attempt = try DownloadAttempt(temp: try tempFile("t\(index)"), expectedChecksum: nil, storedValidator: nil, storedTotal: nil)
            let request = FetchRequest(url: server.url(path), stallTimeout: 10)
            fetches.append((path, attempt, Task {
                _ = await transport.fetch(request, into: attempt)
                return ContinuousClock.now
            }))
        }
        for (path, attempt, task) in fetches {
            let ended = await task.value
            XCTAssertEqual(attempt.snapshot.bytesOnDisk, path == "/fast" ? 1000 : Int64(slowBody.count), path)
            if path == "/fast" {
                XCTAssertLessThan(ended - started, .seconds(1), "a fast transfer waited for a slow one")
            }
        }
        XCTAssertEqual(server.requestCount(path: "/slow"), 3)
    }

    // MARK: - Timeouts

    /// A body that stops mid-way trips the stall timeout; the bytes and validator are kept so the
    /// retry resumes where it stopped.
    func testStallMidBodyKeepsThePartialForResume() async throws { try await eachTransport(checkStallMidBodyKeepsThePartialForResume) }

    private func checkStallMidBodyKeepsThePartialForResume() async throws {
        let data = Self.data
        server.route("/stall", FaultServer.Response.ok(data, headers: ["ETag": Self.etag]).stalled(afterBytes: 300, .forever))
        let temp = try tempFile("stall")
        let started = ContinuousClock.now
        let outcome = try await download("/stall", into: temp, stall: 1)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        guard case .transport(let why)? = outcome.failure, why.contains("stalled") else { return XCTFail("\(outcome.result)") }
        XCTAssertFalse(exists(temp.destination))
        XCTAssertEqual(contents(temp.path), data.prefix(300))
        let snapshot = outcome.attempt.snapshot
        XCTAssertEqual(snapshot, .init(bytesOnDisk: 300, expectedTotal: 1000, validator: .etag(Self.etag), url: server.url("/stall").absoluteString))
        guard case .retry(_, nil, false) = policy.decide(outcome.failure!, attempt: 1) else { return XCTFail("a stall is retried") }
        let next = try DownloadAttempt(temp: temp, expectedChecksum: nil, storedValidator: snapshot.validator, storedTotal: snapshot.expectedTotal)
        XCTAssertEqual(next.requestHeaders, ["Range": "bytes=300-", "If-Range": Self.etag])
    }

    /// A body that keeps coming, a piece every 0.15 s for about 1.2 s in all, is not a stall
    /// under a 0.6 s stall timeout: each piece counts as activity (libcurl's loop notes it once
    /// a turn).
    func testASlowBodyThatKeepsComingIsNotAStall() async throws { try await eachTransport(checkASlowBodyThatKeepsComingIsNotAStall) }

    private func checkASlowBodyThatKeepsComingIsNotAStall() async throws {
        let data = Self.data
        server.route("/trickle", FaultServer.Response.ok(data).slowBody(bytesPerChunk: 125, delay: 0.15))
        let outcome = try await download("/trickle", into: try tempFile("trickle"), stall: 0.6)
        XCTAssertEqual(outcome.result, .placed(bytes: Int64(data.count), status: 200), "\(String(describing: outcome.failure))")
    }

    /// A body that never ends, but never stalls either, is cut by the total timeout and not placed.
    func testEndlessBodyIsCutByTheTotalTimeout() async throws { try await eachTransport(checkEndlessBodyIsCutByTheTotalTimeout) }

    private func checkEndlessBodyIsCutByTheTotalTimeout() async throws {
        server.route("/endless", FaultServer.Response.endless().slowBody(bytesPerChunk: 1024, delay: 0.01))
        let temp = try tempFile("endless")
        let started = ContinuousClock.now
        let outcome = try await download("/endless", into: temp, stall: 5, timeout: 1)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(4), "the total timeout, not the stall timeout, ends it")
        guard case .transport(let why)? = outcome.failure, why.contains("timed out") else { return XCTFail("\(outcome.result)") }
        XCTAssertFalse(exists(temp.destination))
        XCTAssertGreaterThan(contents(temp.path)?.count ?? 0, 0, "the body was flowing")
        guard case .retry(_, nil, false) = policy.decide(outcome.failure!, attempt: 1) else { return XCTFail("a timeout is retried") }
    }

    // MARK: - Retry-After and the retry policy

    func testRetryAfterInEveryFormIsHonouredCappedOrIgnored() {
        // Two minutes before the RFC's example date, Sun, 06 Nov 1994 08:49:37 GMT.
        let now = Date(timeIntervalSince1970: 784_111_777 - 120)
        func decide(_ retryAfter: String?, status: Int = 503) -> RetryPolicy.Decision {
            policy.decide(.http(status: status, retryAfter: retryAfter), attempt: 1, now: now)
        }
        for value in ["120", " 120\t", "00120", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            XCTAssertEqual(decide(value), .retry(delay: 120, pauseHost: 120, discardPartial: false), value)
            XCTAssertEqual(decide(value, status: 429), .retry(delay: 120, pauseHost: 120, discardPartial: false), value)
        }
        for value in ["601", "4294967295", "99999999999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"] {
            XCTAssertEqual(decide(value), .retry(delay: 600, pauseHost: 600, discardPartial: false), "\(value) is capped")
        }
        XCTAssertEqual(decide("120", status: 202), .retry(delay: 120, pauseHost: 120, discardPartial: false), "202: not ready yet")
        // Now or past asks for no wait: the backoff applies, as without Retry-After, so the
        // attempts are not all spent at once.
        for value in [nil, "0", "Sun, 06 Nov 1994 08:47:37 GMT", "Sun, 06 Nov 1994 08:47:36 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "-1", "1e3", "+5", "1.5", "0x10", "", "soon", "120 s", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37"] {
            guard case .retry(let delay, let pause, false) = decide(value) else { XCTFail("\(value ?? "nil")"); continue }
            XCTAssertNil(pause, "\(value ?? "nil"): garbage pauses no host")
            XCTAssertTrue(delay > 0 && delay <= 4, "\(value ?? "nil"): backoff (drawn from 0...1 s), not a parsed delay: \(delay)")
        }
        for status in [400, 403, 404, 410, 301, 416, 501] {
            XCTAssertEqual(decide("120", status: status), .fail, "HTTP \(status) is not retried, whatever its Retry-After")
        }
        // --max-retry-after 0 ignores Retry-After: the backoff applies, not a retry at once (which
        // spent every attempt within milliseconds against a server asking for two minutes).
        let noWaiting = RetryPolicy(backoff: Backoff(base: 4, cap: 4), maxRetryAfter: 0)
        guard case .retry(let delay, nil, false) = noWaiting.decide(.http(status: 503, retryAfter: "120"), attempt: 1, now: now) else {
            return XCTFail("not a retry without a pause")
        }
        XCTAssertTrue(delay > 0 && delay <= 4, "backoff, not at once: \(delay)")
    }
}
