import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// `EmptyFolders`: what counts as empty, that a folder is read once, and that memory is bounded.
final class EmptyFoldersTests: XCTestCase {
    func testOnlyTempFilesAndMissingFoldersCountAsEmpty() throws {
        let root = try makeTempDirectory()
        let folders = EmptyFolders()
        let temps = try root.makeDirectory("temps")
        try Data().write(to: URL(fileURLWithPath: temps + "/\(TempFile.prefix)7-0123456789abcdef\(TempFile.suffix)"))
        XCTAssertTrue(folders.wereEmpty(try root.makeDirectory("empty")))
        XCTAssertTrue(folders.wereEmpty(temps), "haul's temp files are not the user's")
        XCTAssertTrue(folders.wereEmpty(root.file("missing/deeper")), "a folder not made yet holds nothing")
        let user = try root.makeDirectory("user")
        try Data("x".utf8).write(to: URL(fileURLWithPath: user + "/.hidden"))
        XCTAssertFalse(folders.wereEmpty(user), "any other entry is the user's, hidden or not")
        let nested = try root.makeDirectory("nested")
        _ = try root.makeDirectory("nested/sub")
        XCTAssertFalse(folders.wereEmpty(nested))
        let almost = try root.makeDirectory("almost")
        try Data().write(to: URL(fileURLWithPath: almost + "/\(TempFile.prefix)7-0123456789abcdef.partial"))
        XCTAssertFalse(folders.wereEmpty(almost), "a name haul's temp files do not have")
        try Data().write(to: URL(fileURLWithPath: root.file("plain")))
        XCTAssertFalse(folders.wereEmpty(root.file("plain")), "what cannot be read as a folder is not empty")
    }

    func testAFolderIsReadOnceUntilTheCapacityIsReached() throws {
        let root = try makeTempDirectory()
        let first = try root.makeDirectory("first")
        let second = try root.makeDirectory("second")
        let folders = EmptyFolders(capacity: 2)
        XCTAssertTrue(folders.wereEmpty(first))
        try Data("x".utf8).write(to: URL(fileURLWithPath: first + "/file"))
        XCTAssertTrue(folders.wereEmpty(first), "as first seen")
        XCTAssertFalse(EmptyFolders().wereEmpty(first), "another run looks again")
        XCTAssertTrue(folders.wereEmpty(second))
        // A third folder: the two remembered are forgotten, and the first is read again.
        XCTAssertTrue(folders.wereEmpty(try root.makeDirectory("third")))
        XCTAssertFalse(folders.wereEmpty(first), "read again once forgotten")
    }
}
