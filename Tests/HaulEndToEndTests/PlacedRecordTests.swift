import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// What haul records of each file it places: the server's validators, type and final URL, and
/// with `run --checksum sha256` the file's own digest.
final class PlacedRecordTests: XCTestCase {
    func testValidatorsTypeFinalURLAndTheFilesSHA256AreRecorded() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(9_000, seed: 21)
        server.route("/moved", FaultServer.Response.redirect(to: "/real.bin"))
        server.route("/real.bin", FaultServer.file(data, etag: "\"r1\"", lastModified: "Tue, 01 Dec 2026 10:00:00 GMT",
                                                   contentType: "application/x-test"))
        server.route("/plain.bin", FaultServer.file(data))
        try h.add(["http://user:pw@127.0.0.1:\(server.port)/moved out=moved.bin", server.url("/plain.bin").absoluteString])

        XCTAssertEqual(try h.run(["run", "--checksum", "sha256"]).status, 0)

        let moved = try h.show(1)
        XCTAssertEqual(moved["etag"] as? String, "\"r1\"")
        XCTAssertEqual(moved["last_modified"] as? String, "Tue, 01 Dec 2026 10:00:00 GMT")
        XCTAssertEqual(moved["content_type"] as? String, "application/x-test")
        XCTAssertEqual(moved["final_url"] as? String, "http://***@127.0.0.1:\(server.port)/real.bin", "the URL that answered, its credentials hidden")
        XCTAssertEqual(moved["file_sha256"] as? String, runTestSHA256(data))
        XCTAssertEqual(try h.show(2)["file_sha256"] as? String, runTestSHA256(data))
        XCTAssertEqual(try h.run(["run", "--checksum", "md5"]).status, 64)
    }

    /// What a server sent is shown by `show` without its control characters: an escape in a
    /// Content-Type or an ETag cannot drive the terminal.
    func testShowPrintsNoEscapeAServerSent() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        server.route("/f.bin", FaultServer.file(runTestData(100, seed: 3), etag: "\"a\u{01}b\"", contentType: "text/x\u{1B}[31mred\u{1B}]0;title\u{07}"))
        try h.add([server.url("/f.bin").absoluteString])
        XCTAssertEqual(try h.run(["run"]).status, 0)
        let shown = try h.run(["show", "1"])
        XCTAssertEqual(shown.status, 0, shown.stderrText)
        XCTAssertTrue(shown.stdoutText.contains("type:         text/x?[31mred?]0;title?"), shown.stdoutText)
        XCTAssertFalse(shown.stdoutText.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, shown.stdoutText)
    }
}
