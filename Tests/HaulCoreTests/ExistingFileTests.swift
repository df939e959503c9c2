import Foundation
@testable import HaulCore
import HaulTestSupport
import XCTest

/// Telling haul's own placed files from the user's, and the names `rename` tries.
final class ExistingFileExamineTests: XCTestCase {
    func testOnlyAnUnchangedFileWithTheRecordedIdentityIsHaulsOwn() throws {
        let directory = try makeTempDirectory(prefix: "haul-existing")
        let path = directory.file("f.bin")
        XCTAssertEqual(ExistingFile.examine(path, placed: nil), .nothing)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("12345".utf8)))
        var info = stat()
        XCTAssertEqual(lstat(path, &info), 0)
        let placed = PlacedFile(path: nil, identity: FileIdentity(stat: info))
        XCTAssertEqual(ExistingFile.examine(path, placed: placed), .haulsOwn)
        XCTAssertEqual(ExistingFile.examine(path, placed: nil), .usersFile(size: 5), "nothing recorded: the user's")

        // Rewritten in place with as many bytes: a new time.
        var later = timespec(tv_sec: info.st_mtim.tv_sec + 5, tv_nsec: 0)
        let descriptor = open(path, O_WRONLY)
        XCTAssertEqual(pwrite(descriptor, "abcde", 5, 0), 5)
        var times = [later, later]
        XCTAssertEqual(futimens(descriptor, &times), 0)
        close(descriptor)
        XCTAssertEqual(ExistingFile.examine(path, placed: placed), .usersFile(size: 5))

        // Replaced by another file of the same size and time: another inode.
        XCTAssertEqual(unlink(path), 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: path + ".new", contents: Data("12345".utf8)))
        later = info.st_mtim
        times = [later, later]
        XCTAssertEqual(utimensat(AT_FDCWD, path + ".new", &times, 0), 0)
        XCTAssertEqual(rename(path + ".new", path), 0)
        XCTAssertEqual(ExistingFile.examine(path, placed: placed), .usersFile(size: 5))

        // A link is the user's, whatever it points at.
        XCTAssertEqual(unlink(path), 0)
        XCTAssertEqual(symlink("/etc/passwd", path), 0)
        if case .usersFile = ExistingFile.examine(path, placed: placed) {} else { XCTFail("a link is the user's") }
    }

    func testRenameNumbersTheNameBeforeItsLastExtension() {
        XCTAssertEqual(TempFile.beside("/out/a.tar.gz", 1), "/out/a.tar.1.gz")
        XCTAssertEqual(TempFile.beside("/out/noext", 2), "/out/noext.2")
        XCTAssertEqual(TempFile.beside("/out/.bashrc", 1), "/out/.bashrc.1")
        XCTAssertEqual(TempFile.beside("plain.txt", 3), "plain.3.txt")
    }
}
