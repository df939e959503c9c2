import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `--layout`: the same file name from two hosts, or two paths, no longer collides.
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

        let flat = try h.run(["add", "-d", h.out] + urls)
        XCTAssertEqual(flat.status, 1, "flat: the second and third data.bin are refused")
        XCTAssertEqual(flat.stderrLines.filter { $0.contains("destination already taken") }.count, 2, flat.stderrText)

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
