import XCTest
@testable import HaulCore

/// Names haul gives on disk must not change between versions: a later run finds an earlier
/// run's partial file by its name. These pin them, and the fast paths behind them.
final class PathNamingTests: XCTestCase {
    func testATempFileIsNamedAsEarlierVersionsNamedIt() {
        // Values made by the formula the names have always had: FNV-1a (64-bit) of
        // "QUEUE:DESTINATION" (of DESTINATION alone for queue 0), in lower-case hex.
        XCTAssertEqual(TempFile(destination: "/tmp/x/f\u{E9}.bin", jobID: 12, queue: 7).path,
                       "/tmp/x/.haul-12-62962559dea54ca7.part")
        XCTAssertEqual(TempFile(destination: "/tmp/x/f.bin", jobID: 3, queue: 0).path,
                       "/tmp/x/.haul-3-5696df362f931d02.part")
        XCTAssertEqual(TempFile(destination: "f.bin", jobID: 3, queue: 0).path, ".haul-3-\(String(FNV1a.hash("f.bin"), radix: 16)).part")
    }

    func testATempFilePathIsSpelledAsTheFormulaSpellsIt() {
        var generator = SystemRandomNumberGenerator()
        let folders = ["", "/", "/a", "/tmp/é 🙂/x", "rel/dir"]
        for round in 0..<500 {
            let folder = folders[round % folders.count]
            let name = "f\(UInt32.random(in: 0...UInt32.max, using: &generator)).bin"
            let destination = folder.isEmpty ? name : (folder == "/" ? "/" + name : folder + "/" + name)
            let jobID = [0, 1, 9, 10, 99, 100, Int.max, -7][round % 8] &+ (round < 8 ? 0 : Int.random(in: 0...1_000_000, using: &generator))
            let queue = round % 3 == 0 ? 0 : Int.random(in: 1...Int.max, using: &generator)
            let hash = FNV1a.hash(queue == 0 ? destination : "\(queue):\(destination)")
            let parent = destination.parentFolder
            let expected = (parent.isEmpty ? "" : parent + "/") + ".haul-\(jobID)-\(String(hash, radix: 16)).part"
            XCTAssertEqual(TempFile(destination: destination, jobID: jobID, queue: queue).path, expected)
        }
    }

    func testAHashContinuedOverASecondTextIsTheHashOfBoth() {
        for (first, second) in [("", ""), ("7:", "/a/b"), ("", "é🙂"), ("中文", "x"), ("a", "")] {
            XCTAssertEqual(FNV1a.hash(second, continuing: FNV1a.hash(first)), FNV1a.hash(first + second), "\(first) + \(second)")
        }
        XCTAssertEqual(FNV1a.hash(""), FNV1a.offsetBasis)
        XCTAssertEqual(FNV1a.hash("a"), 0xaf63_dc4c_8601_ec8c)  // FNV-1a's published value for "a"
    }

    func testTheParentFolderIsEverythingBeforeTheLastSlash() {
        let cases: [(String, String)] = [
            ("/a/b/c.bin", "/a/b"), ("/c.bin", "/"), ("c.bin", ""), ("", ""), ("/", "/"), ("a/", "a"),
            ("/dé/🙂/x", "/dé/🙂"), ("//x", "/"), (String(repeating: "é/", count: 40) + "f", String(repeating: "é/", count: 39) + "é"),
        ]
        for (path, folder) in cases { XCTAssertEqual(path.parentFolder, folder, path) }
        // A string made from a substring.
        let shared = "/q/r/s.txt"[...]
        XCTAssertEqual(String(shared).parentFolder, "/q/r")
    }
}
