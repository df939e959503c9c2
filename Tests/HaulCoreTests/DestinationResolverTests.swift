import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// Where files go: default names from URLs, and out= paths.
final class DestinationResolverTests: XCTestCase {
    private let folder = "/srv/out"
    private var resolver: DestinationResolver { DestinationResolver(directory: folder) }

    private func defaultName(_ url: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let destination = try resolver.defaultDestination(for: try HTTPURL(url))
        XCTAssertTrue(destination.hasPrefix(folder + "/"), "\(url) → \(destination) is outside \(folder)", file: file, line: line)
        let name = String(destination.dropFirst(folder.count + 1))
        XCTAssertFalse(name.contains("/"), "\(url) → \(destination) is not directly inside \(folder)", file: file, line: line)
        return name
    }

    func testDefaultNameIsTheLastPathSegmentPercentDecoded() throws {
        XCTAssertEqual(try defaultName("https://e.org/a/b/file.txt"), "file.txt")
        XCTAssertEqual(try defaultName("https://e.org/a/file%20name.txt"), "file name.txt")
        XCTAssertEqual(try defaultName("https://e.org/caf%C3%A9.txt"), "café.txt")
        XCTAssertEqual(try defaultName("https://e.org/f.txt?x=/y/z#frag/q"), "f.txt", "query and fragment are not the name")
        XCTAssertEqual(try defaultName("https://e.org/100%25"), "100%")
        XCTAssertEqual(try defaultName("https://e.org/bad%zzname"), "bad%zzname", "a malformed escape stays as written")
    }

    func testEncodedSlashesBecomeUnderscores() throws {
        XCTAssertEqual(try defaultName("https://e.org/a%2Fb.txt"), "a_b.txt")
        XCTAssertEqual(try defaultName("https://e.org/a%2fb%5Cc%5cd"), "a_b_c_d", "encoded backslashes too")
        XCTAssertEqual(try defaultName("https://e.org/x/%2e%2e%2f%2e%2e%2fetc%2fpasswd"), ".._.._etc_passwd")
        XCTAssertEqual(try defaultName("https://e.org/%00evil%0a%7F"), "_evil__", "control characters are replaced")
    }

    func testDotSegmentsAndEmptyPathsBecomeIndexHTML() throws {
        for url in ["https://e.org", "https://e.org/", "https://e.org/dir/", "https://e.org?q=1", "https://e.org#f",
                    "https://e.org/.", "https://e.org/..", "https://e.org/a/%2e%2e", "https://e.org/a/%2E%2E",
                    "https://e.org/%2e", "https://e.org/a/.%2e", "https://e.org/a/..?x"] {
            XCTAssertEqual(try defaultName(url), "index.html", url)
        }
    }

    func testNamesThatLookLikeHaulTempFilesAreRenamed() throws {
        XCTAssertEqual(try defaultName("https://e.org/.haul-partial"), "_.haul-partial")
        XCTAssertEqual(rejectionForOut(".haul-x"), .reservedName(".haul-x"))
        XCTAssertEqual(rejectionForOut("sub/.haul-x"), .reservedName(".haul-x"))
    }

    func testOverlongNamesAreShortenedKeepingTheExtension() throws {
        let name = try defaultName("https://e.org/" + String(repeating: "é", count: 200) + ".tar.gz")
        XCTAssertLessThanOrEqual(name.utf8.count, 255)
        XCTAssertTrue(name.hasSuffix(".gz"), name)
        XCTAssertTrue(name.hasPrefix("éé"), name)
    }

    /// Percent-encoded dots, slashes and backslashes in any mix never lead out of the folder.
    func testRandomEncodedSegmentsNeverEscape() throws {
        var random = SeededGenerator(seed: 7)
        let pieces = ["%2e", "%2E", ".", "%2f", "%2F", "%5c", "%5C", "..", "%00", "a", "%", "%2", "/", "%25", "%c3%a9", "%ff"]
        for _ in 0..<3000 {
            let count = Int.random(in: 1...8, using: &random)
            let path = (0..<count).map { _ in pieces.randomElement(using: &random)! }.joined()
            let name = try defaultName("https://e.org/" + path)
            XCTAssertFalse(name.isEmpty || name == "." || name == "..", "\(path) → '\(name)'")
        }
    }

    /// A segment taken as it is, without `safeFileName`, is one that `safeFileName` would return
    /// unchanged.
    func testPlainFileNamesAreExactlyThoseSafeFileNameKeeps() {
        var random = SeededGenerator(seed: 11)
        let pieces: [[UInt8]] = [[0x61], [0x2E], [0x25], [0x2F], [0x5C], [0x20], [0x1F], [0x7F], [0x7E], [0x21], [0xC3, 0xA9],
                                 Array(".haul-".utf8), Array("%41".utf8), Array(String(repeating: "n", count: 120).utf8)]
        var plain = 0
        for _ in 0..<5000 {
            let segment = (0..<Int.random(in: 0...4, using: &random)).flatMap { _ in pieces.randomElement(using: &random)! }
            let isPlain = segment.withUnsafeBufferPointer { DestinationResolver.isPlainFileName($0[...]) }
            guard isPlain else { continue }
            plain += 1
            XCTAssertEqual(DestinationResolver.safeFileName(fromEncoded: segment), String(decoding: segment, as: UTF8.self),
                           "\(segment)")
        }
        XCTAssertGreaterThan(plain, 500)
        XCTAssertEqual(try defaultName("https://e.org/d/" + String(repeating: "n", count: 255)), String(repeating: "n", count: 255))
        XCTAssertEqual(try defaultName("https://e.org/d/" + String(repeating: "n", count: 256) + ".bin").utf8.count, 255)
    }

    // MARK: - out=

    private func rejectionForOut(_ out: String) -> DestinationResolver.Rejection? {
        do {
            let destination = try resolver.destination(forOutPath: out)
            XCTFail("out=\(out) was accepted as \(destination)")
            return nil
        } catch {
            return error
        }
    }

    func testOutPathsStayInsideTheFolder() throws {
        XCTAssertEqual(try resolver.destination(forOutPath: "a/b/c.txt"), "/srv/out/a/b/c.txt")
        XCTAssertEqual(try resolver.destination(forOutPath: "./a//b/./c.txt"), "/srv/out/a/b/c.txt")
        XCTAssertEqual(try resolver.destination(forOutPath: "name with spaces%2F.txt"), "/srv/out/name with spaces%2F.txt",
                       "out= is a path, not percent-encoded")
        XCTAssertEqual(rejectionForOut("../x"), .escapesDirectory)
        XCTAssertEqual(rejectionForOut("a/../../x"), .escapesDirectory)
        XCTAssertEqual(rejectionForOut(".."), .escapesDirectory)
        XCTAssertEqual(rejectionForOut("/etc/passwd"), .absoluteOutPath)
        XCTAssertEqual(rejectionForOut("//etc/passwd"), .absoluteOutPath)
        XCTAssertEqual(rejectionForOut(""), .emptyOutPath)
        XCTAssertEqual(rejectionForOut("./."), .emptyOutPath)
        XCTAssertEqual(rejectionForOut("x\u{1B}]0;title\u{07}.bin"), .controlCharacter(0x1B), "no terminal escape in a name")
        XCTAssertEqual(rejectionForOut("a\tb"), .controlCharacter(0x09))
        XCTAssertEqual(rejectionForOut("x\u{7F}"), .controlCharacter(0x7F))
        XCTAssertEqual(rejectionForOut("x\u{9B}31m"), .controlCharacter(0x9B), "a C1 control (CSI)")
        XCTAssertEqual(try resolver.destination(forOutPath: "caf\u{E9} \u{A0}x"), "/srv/out/caf\u{E9} \u{A0}x", "not every C2 byte is a control")
        XCTAssertEqual(rejectionForOut("a/" + String(repeating: "n", count: 256)), .nameTooLong(256))
        XCTAssertEqual(try resolver.destination(forOutPath: String(repeating: "n", count: 255)), "/srv/out/" + String(repeating: "n", count: 255))
        let deep = Array(repeating: String(repeating: "d", count: 200), count: 21).joined(separator: "/")
        guard case .pathTooLong? = rejectionForOut(deep) else { return XCTFail("a path over 4095 bytes must be refused") }
    }

    func testTheFolderIsStandardisedAndMadeAbsolute() throws {
        XCTAssertEqual(DestinationResolver(directory: "/srv/./x/../out/").directory, "/srv/out")
        let relative = DestinationResolver(directory: "sub/dir")
        XCTAssertEqual(relative.directory, DestinationResolver.standardise(FileManager.default.currentDirectoryPath + "/sub/dir"))
        XCTAssertEqual(try DestinationResolver(directory: "/").destination(forOutPath: "x"), "/x")
        XCTAssertEqual(try DestinationResolver(directory: "/").defaultDestination(for: try HTTPURL("https://e.org/y")), "/y")
    }

    func testSymbolicLinks() throws {
        let directory = try makeTempDirectory()
        let output = try directory.makeDirectory("out")
        let outside = try directory.makeDirectory("outside")
        try directory.makeDirectory("out/real/deeper")
        let files = FileManager.default
        try files.createSymbolicLink(atPath: output + "/up", withDestinationPath: "..")
        try files.createSymbolicLink(atPath: output + "/abs", withDestinationPath: outside)
        try files.createSymbolicLink(atPath: output + "/real/deeper/back", withDestinationPath: outside)
        try files.createSymbolicLink(atPath: output + "/inside", withDestinationPath: "real")
        try files.createSymbolicLink(atPath: output + "/dangling", withDestinationPath: outside + "/does-not-exist")
        let resolver = DestinationResolver(directory: output)
        for out in ["up/outside/x", "abs/x", "real/deeper/back/x", "dangling/x"] {
            XCTAssertThrowsError(try resolver.destination(forOutPath: out), out) { error in
                XCTAssertEqual(error as? DestinationResolver.Rejection, .escapesDirectory, out)
            }
        }
        XCTAssertEqual(try resolver.destination(forOutPath: "inside/deeper/x"), output + "/inside/deeper/x")
        XCTAssertEqual(try resolver.destination(forOutPath: "new/folders/x"), output + "/new/folders/x")

        // An output folder that is itself a link is fine: links inside it are judged by where it really is.
        let linkedFolder = directory.file("linked-out")
        try files.createSymbolicLink(atPath: linkedFolder, withDestinationPath: output)
        let viaLink = DestinationResolver(directory: linkedFolder)
        XCTAssertEqual(try viaLink.destination(forOutPath: "inside/x"), linkedFolder + "/inside/x")
        XCTAssertThrowsError(try viaLink.destination(forOutPath: "abs/x"))
    }
}
