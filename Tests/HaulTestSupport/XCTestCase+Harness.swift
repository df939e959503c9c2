import Foundation
import XCTest

/// The harness's XCTest side: the one temp-directory helper and the one lookup of the built
/// `haul` binary that test cases use.
extension XCTestCase {
    /// A fresh temp directory, removed with its content when the test ends.
    public func makeTempDirectory(prefix: String = "haul-test") throws -> TempDirectory {
        let directory = try TempDirectory(prefix: prefix)
        addTeardownBlock { directory.remove() }
        return directory
    }

    /// The built `haul` binary (see `HaulProcess.haulExecutable`), or a failure naming every
    /// place that was searched (and `HaulNotFound` thrown).
    public func haulExecutable(file: StaticString = #filePath, line: UInt = #line) throws -> URL {
        let bundle = Bundle(for: type(of: self))
        guard let binary = HaulProcess.haulExecutable(testBundle: bundle) else {
            let places = HaulProcess.candidates(testBundle: bundle).map(\.path).joined(separator: ", ")
            XCTFail("the haul binary was not built (looked in \(places))", file: file, line: line)
            throw HaulNotFound()
        }
        return binary
    }
}

/// `haulExecutable()` found no binary (the failure itself is recorded with XCTFail).
public struct HaulNotFound: Error {}
