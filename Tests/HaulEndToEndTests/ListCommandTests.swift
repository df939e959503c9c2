import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul list`: says when it stopped at its limit, `--limit 0` lists everything (a page at a
/// time), `--host` takes a bare host for all its ports.
final class ListCommandTests: XCTestCase {
    func testLimitsHostsAndPages() throws {
        let h = try RunHarness(self)
        // 2,100 jobs (more than two pages of 1,000): 2,000 on a.example:443, 60 on a.example:8443,
        // 40 on b.example:80.
        var lines = (0..<2_000).map { "https://a.example/f\($0)" }
        lines += (0..<60).map { "https://a.example:8443/g\($0)" }
        lines += (0..<40).map { "http://b.example/h\($0)" }
        try h.add(lines)

        let first = try h.run(["list"])
        XCTAssertEqual(first.status, 0, first.stderrText)
        XCTAssertEqual(first.stdoutLines.count, 100)
        XCTAssertTrue(first.stderrText.contains("listed the first 100; 2000 more match (--limit 0 for all)"), first.stderrText)

        let all = try h.run(["list", "--limit", "0"])
        XCTAssertEqual(all.stdoutLines.map { Int($0.split(separator: "\t")[0])! }, Array(1...2_100), "every job once, in order")
        XCTAssertEqual(all.stderrText, "", "nothing more to say when everything was listed")

        let someMore = try h.run(["list", "--limit", "1500"])
        XCTAssertEqual(someMore.stdoutLines.count, 1_500)
        XCTAssertTrue(someMore.stderrText.contains("600 more match"), someMore.stderrText)
        let exactly = try h.run(["list", "--limit", "2100"])
        XCTAssertEqual(exactly.stdoutLines.count, 2_100)
        XCTAssertEqual(exactly.stderrText, "")
        let one = try h.run(["list", "--limit", "2099"])
        XCTAssertTrue(one.stderrText.contains("1 more matches"), one.stderrText)

        let json = try h.run(["list", "--limit", "0", "--json"])
        let array = try XCTUnwrap(try JSONSerialization.jsonObject(with: json.stdout) as? [[String: Any]])
        XCTAssertEqual(array.count, 2_100)
        XCTAssertEqual(array.last?["url"] as? String, "http://b.example/h39")

        let bare = try h.run(["list", "--host", "A.example", "--limit", "0"])
        XCTAssertEqual(bare.stdoutLines.count, 2_060, "a bare host means every port of it")
        XCTAssertEqual(try h.run(["list", "--host", "a.example:8443", "--limit", "0"]).stdoutLines.count, 60)
        XCTAssertEqual(try h.run(["list", "--host", "b.example", "--limit", "0"]).stdoutLines.count, 40)
        XCTAssertEqual(try h.run(["list", "--host", "a.exampl", "--limit", "0"]).stdoutLines.count, 0, "no prefix matches")
    }
}
