import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// How a statement binds text: by its UTF-8 bytes and their count, both through the array of
/// values and the typed binding of hot loops.
final class StatementBindingTests: XCTestCase {
    private let texts = ["", "a", "http://example.com/a b?c=d&e=%20", "héllo wörld — 🚀", String(repeating: "x", count: 5_000)]

    func testTextIsBoundByteForByteAndAnEmptyTextStaysText() throws {
        let database = try Database(path: try makeTempDirectory().file("haul.db"))
        let statement = try database.statement("SELECT typeof(?1), ?1, length(CAST(?1 AS BLOB))")
        for text in texts {
            let viaArray = try statement.firstRow([text]) { [$0.string(0), $0.string(1), String($0.int(2))] }
            XCTAssertEqual(viaArray, ["text", text, String(text.utf8.count)], "bound through the array: \(text.prefix(40))")
            statement.reset()
            try statement.bind(text, at: 1)
            XCTAssertTrue(try statement.step())
            let typed = [Row(statement: statement).string(0), Row(statement: statement).string(1)]
            XCTAssertEqual(typed, ["text", text], "bound by the typed binding: \(text.prefix(40))")
            statement.reset()
        }
        let missing: String? = nil
        try statement.bind(missing, at: 1)
        XCTAssertTrue(try statement.step())
        XCTAssertEqual(Row(statement: statement).string(0), "null", "no text binds NULL")
        statement.reset()
    }
}
