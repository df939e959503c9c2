import Foundation
import HaulCore
import XCTest

/// Failure reasons grouped by kind: what varies from job to job is taken out.
final class FailureKindTests: XCTestCase {
    func testDetailsThatVaryFromJobToJobAreTakenOut() {
        let cases: [(String, String)] = [
            ("cannot write /data/out/.haul-17-9f3a2b.part: No space left on device", "cannot write PATH: No space left on device"),
            ("gave up after 5 attempts: HTTP 503 Service Unavailable", "HTTP 503 Service Unavailable"),
            ("gave up after 1 attempt: connection refused", "connection refused"),
            ("sha256 mismatch: expected " + String(repeating: "ab", count: 32) + ", got " + String(repeating: "0f", count: 32),
             "sha256 mismatch: expected HEX, got HEX"),
            ("body ended after 1200 of 5000 bytes", "body ended after N bytes"),
            ("redirect to ftp://user:pw@example.org/x refused: only http and https", "redirect to URL refused: only http and https"),
            ("the resource changed (validator \"v2\", was \"v1\")", "the resource changed (validator \"…\", was \"…\")"),
            ("stalled: no data for 60 s", "stalled: no data for N s"),
            ("stalled: no data for 0.5 s", "stalled: no data for N s"),
            ("timed out after 2.25 s", "timed out after N s"),
            ("HTTP 404 Not Found", "HTTP 404 Not Found"),
            ("host unreachable: connection refused (1 attempt to reach 127.0.0.12:9 failed)",
             "host unreachable: connection refused (N attempts to reach HOST failed)"),
            ("host unreachable: connection refused (3 attempts in a row to reach a.example:443 failed over 12 s)",
             "host unreachable: connection refused (N attempts to reach HOST failed over N s)"),
            ("the server's answer is not HTTP/1.1", "the server's answer is not HTTP/1.1"),
        ]
        for (reason, kind) in cases { XCTAssertEqual(FailureKind.of(reason), kind, reason) }
    }

    /// `--stall 0.5` and `--timeout 2.25` are allowed: a reason says the time given, not "0 s".
    func testAFractionOfASecondIsSaidAsGiven() {
        XCTAssertEqual(FetchFailure.stalled(0.5).description, "stalled: no data for 0.5 s")
        XCTAssertEqual(FetchFailure.timedOut(2.25).description, "timed out after 2.25 s")
        XCTAssertEqual(FetchFailure.stalled(60).description, "stalled: no data for 60 s")
    }

    func testAKindIsItsOwnKind() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["cannot write ", "/tmp/a b/", ".haul-3-", "deadbeefdeadbeef00", ": ", "\"x\"", "12 bytes", "HTTP 404", " s", "x://y",
                      "gave up after 3 attempts: ", "é", "(", ")", ",", "(2 attempts in a row to reach h:1 failed", " to reach "]
        for _ in 0..<2_000 {
            let reason = (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let kind = FailureKind.of(reason)
            XCTAssertEqual(FailureKind.of(kind), kind, reason.debugDescription)
        }
    }
}
