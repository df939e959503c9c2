import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// Batched placement: every file's bytes are checked durable (syncfs, or fsync where syncfs is
/// not trusted) before any rename, and a file that cannot be checked is not placed.
final class VerifiedFileTests: XCTestCase {
    private func verifiedFile(_ name: String, in folder: TempDirectory, bytes: String) throws -> VerifiedFile {
        let temp = TempFile(destination: folder.file(name), jobID: name.count)
        let (descriptor, _) = try temp.open()
        XCTAssertEqual(bytes.utf8.withContiguousStorageIfAvailable { write(descriptor, $0.baseAddress, $0.count) }, bytes.utf8.count)
        return VerifiedFile(temp: temp, descriptor: descriptor, bytes: Int64(bytes.utf8.count), status: 200)
    }

    func testABatchIsMadeDurableThenPlaced() throws {
        let folder = try makeTempDirectory()
        let files = try ["a", "bb", "ccc"].map { try verifiedFile($0, in: folder, bytes: "content of \($0)") }
        XCTAssertEqual(VerifiedFile.makeDurable(files).map { $0?.message }, [nil, nil, nil])
        for file in files {
            XCTAssertFalse(FileManager.default.fileExists(atPath: file.temp.destination), "nothing placed before place()")
            _ = try file.place()
            file.close()
            XCTAssertFalse(FileManager.default.fileExists(atPath: file.temp.path))
        }
        XCTAssertEqual(try String(contentsOfFile: folder.file("bb"), encoding: .utf8), "content of bb")
        XCTAssertTrue(TempFile.syncFolder(of: folder.file("a")))
    }

    func testAFileThatCannotBeCheckedIsReportedAndTheOthersAreNot() throws {
        let folder = try makeTempDirectory()
        let good = try verifiedFile("good", in: folder, bytes: "fine")
        let broken = try verifiedFile("broken", in: folder, bytes: "lost")
        close(broken.descriptor)  // its descriptor no longer says anything about its bytes
        let results = VerifiedFile.makeDurable([broken, good])
        XCTAssertNotNil(results[0], "a file whose bytes cannot be checked is not declared durable")
        XCTAssertTrue(results[0]?.message.contains(broken.temp.path) == true, "\(String(describing: results[0]))")
        XCTAssertNil(results[1])
        good.close()
    }

    func testAFolderThatCannotBeFlushedIsReported() {
        XCTAssertFalse(TempFile.syncFolder(of: "/nonexistent-haul-folder/file"))
    }
}
