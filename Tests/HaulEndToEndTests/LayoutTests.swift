import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// The same file name from two hosts, or two paths: kept apart by a suffix (flat), by folders
/// (`--layout host`, `--layout path`).
final class LayoutTests: XCTestCase {
    func testHostAndPathLayoutsKeepSameNamedFilesApart() throws {
        let h = try RunHarness(self)
        let one = try FaultServer(host: "127.0.0.1")
        let two = try FaultServer(host: "127.0.0.2")
        defer { one.stop(); two.stop() }
        for server in [one, two] {
            let host = server.host
            server.setFallback { request in FaultServer.Response.ok(Data("\(host) \(request.path)".utf8)) }
        }
        let urls = [one.url("/a/data.bin"), one.url("/b/data.bin"), two.url("/a/data.bin")].map(\.absoluteString)

        // Flat: the second and third data.bin take a suffix from their URL's hash.
        let flat = try h.run(["get", "-d", h.out, "--quiet"] + urls)
        XCTAssertEqual(flat.status, 0, flat.stderrText)
        XCTAssertEqual(h.contents("data.bin"), Data("127.0.0.1 /a/data.bin".utf8))
        for (url, body) in [(urls[1], "127.0.0.1 /b/data.bin"), (urls[2], "127.0.0.2 /a/data.bin")] {
            let name = (JobBatch.suffixed(h.out + "/data.bin", for: url) as NSString).lastPathComponent
            XCTAssertEqual(h.contents(name), Data(body.utf8), name)
        }

        let path = try h.run(["get", "-d", h.out + "/p", "--layout", "path", "--quiet"] + urls)
        XCTAssertEqual(path.status, 0, path.stderrText)
        XCTAssertEqual(h.contents("p/127.0.0.1:\(one.port)/a/data.bin"), Data("127.0.0.1 /a/data.bin".utf8))
        XCTAssertEqual(h.contents("p/127.0.0.1:\(one.port)/b/data.bin"), Data("127.0.0.1 /b/data.bin".utf8))
        XCTAssertEqual(h.contents("p/127.0.0.2:\(two.port)/a/data.bin"), Data("127.0.0.2 /a/data.bin".utf8))

        let host = try h.run(["add", "-d", h.out + "/h", "--layout", "host", urls[0], urls[2]])
        XCTAssertEqual(host.status, 0, host.stderrText)
        XCTAssertEqual(try h.run(["add", "-d", h.out, "--layout", "nested", urls[0]]).status, 64)
    }
}
