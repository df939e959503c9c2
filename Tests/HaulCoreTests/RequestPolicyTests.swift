import Foundation
import HaulTestSupport
import XCTest
@testable import HaulCore

/// The pure pieces behind request options: the rate limiter (fuzzed), rate parsing, origins for
/// credential headers, and request profiles as stored.
final class RequestPolicyTests: XCTestCase {
    /// A greedy reader — a piece whenever the limiter lets one pass, else waiting exactly until
    /// `readyAt`, and now and then idle for up to 2 s — never gets more than rate × (T + ¼ s)
    /// plus one piece in any stretch of T seconds, and over ten seconds without idling gets the
    /// rate, whatever the rate and piece sizes.
    func testTheRateLimiterHoldsItsRateOverEveryStretch() {
        var random = SeededGenerator(seed: 0x5EED_0012)
        for round in 0..<200 {
            let rate = Int64.random(in: 1_000...50_000_000, using: &random)
            let largestPiece = Int.random(in: 1...(100 * 1024), using: &random)
            var limiter = RateLimiter(bytesPerSecond: rate)
            var now: UInt64 = 1_000_000_000
            let end = now + 10_000_000_000
            var passed: [(time: UInt64, bytes: Int)] = []
            let idles = round.isMultiple(of: 2)  // a reader that sometimes stops a while, then bursts
            while now < end {
                if idles, Int.random(in: 0..<50, using: &random) == 0 {
                    now += UInt64.random(in: 0...2_000_000_000, using: &random)
                }
                if limiter.mayPass(now: now) {
                    let piece = Int.random(in: 1...largestPiece, using: &random)
                    limiter.take(piece, now: now)
                    passed.append((now, piece))
                    // The write takes a while, never long enough to fall behind the rate.
                    now += UInt64.random(in: 0...(UInt64(piece) * 500_000_000 / UInt64(rate)), using: &random)
                } else {
                    let ready = limiter.readyAt(now: now)
                    XCTAssertGreaterThan(ready, now, "round \(round): refused, yet ready now")
                    now = ready
                }
            }
            let total = passed.reduce(0) { $0 + $1.bytes }
            let seconds = Double(end - 1_000_000_000) / 1e9
            XCTAssertLessThanOrEqual(Double(total), Double(rate) * (seconds + 0.25) + Double(largestPiece), "round \(round)")
            if !idles {
                XCTAssertGreaterThanOrEqual(Double(total), Double(rate) * seconds * 0.97 - Double(largestPiece), "round \(round): too slow")
            }
            // Every stretch that starts at a piece: at most rate × (T + ¼ s) plus one piece.
            var window = 0
            var first = 0
            for (index, piece) in passed.enumerated() {
                window += piece.bytes
                while passed[first].time + 1_000_000_000 < piece.time { window -= passed[first].bytes; first += 1 }
                let stretch = Double(piece.time - passed[first].time) / 1e9
                XCTAssertLessThanOrEqual(Double(window), Double(rate) * (stretch + 0.25) + Double(largestPiece),
                                         "round \(round), piece \(index)")
                if Double(window) > Double(rate) * (stretch + 0.25) + Double(largestPiece) { break }
            }
        }
    }

    func testRatesParseAsCurlWritesThem() {
        let cases: [(String, Int64?)] = [
            ("100", 100), ("1k", 1024), ("512K", 524_288), ("1M", 1_048_576), ("1.5m", 1_572_864), ("2G", 2_147_483_648),
            (" 10k ", 10_240), ("0", nil), ("-1k", nil), ("k", nil), ("1kb", nil), ("1e3", nil), ("", nil), ("0.5", nil),
            ("1.2.3M", nil), ("99999999999G", nil),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(RateLimiter.parseRate(text), expected, "'\(text)'")
        }
    }

    func testOriginsAreSchemeHostAndPort() {
        func same(_ a: String, _ b: String) -> Bool { RedirectPolicy.sameOrigin(URL(string: a)!, URL(string: b)!) }
        XCTAssertTrue(same("https://a.example/x", "https://A.example:443/y?q"))
        XCTAssertTrue(same("http://a.example/x", "http://a.example:80/"))
        XCTAssertTrue(same("http://u:p@a.example:8080/x", "http://a.example:8080/z"))
        XCTAssertFalse(same("https://a.example/x", "http://a.example/x"), "https to http is another origin")
        XCTAssertFalse(same("https://a.example/", "https://b.example/"))
        XCTAssertFalse(same("https://a.example/", "https://a.example:8443/"))
        XCTAssertFalse(same("https://a.example/", "https://sub.a.example/"))

        let request = FetchRequest(url: URL(string: "https://a.example/f")!,
                                   headers: ["Authorization": "Bearer s", "cookie": "c=1", "Proxy-Authorization": "x", "X-Other": "1", "Range": "bytes=5-"])
        XCTAssertEqual(request.headers(toward: URL(string: "https://a.example/g")!).count, 5)
        XCTAssertEqual(request.headers(toward: URL(string: "https://b.example/g")!), ["X-Other": "1", "Range": "bytes=5-"])
        XCTAssertEqual(request.headers(toward: URL(string: "http://a.example/f")!), ["X-Other": "1", "Range": "bytes=5-"])
    }

    func testRequestProfilesAreStoredOnceAndReadBackWhole() throws {
        let queue = try JobQueue(database: Database(path: makeTempDirectory().file("q.db")))
        let profile = RequestProfile(headers: [("X-Token", "a: b: c"), ("Authorization", "Basic dTpw"), ("X-Empty", "")],
                                     userAgent: "tester/1 (x)", netrc: .file("/home/u/.netrc"))
        let id = try queue.storeProfile(profile)
        XCTAssertEqual(try queue.storeProfile(profile), id, "the same options are one profile")
        XCTAssertEqual(try queue.profile(id: id), profile)
        let plain = RequestProfile(userAgent: "tester/1 (x)")
        XCTAssertNotEqual(try queue.storeProfile(plain), id)
        XCTAssertEqual(try queue.profile(id: try queue.storeProfile(plain)), plain)
        XCTAssertEqual(try queue.profile(id: try queue.storeProfile(RequestProfile(netrc: .home))), RequestProfile(netrc: .home))
        XCTAssertFalse(profile.description.contains("dTpw") || profile.description.contains("a: b"), profile.description)

        var info = stat()
        XCTAssertEqual(stat(queue.database.path, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "a database holding secrets is its owner's alone")
    }
}
