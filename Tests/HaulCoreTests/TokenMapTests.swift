@testable import HaulCore
import XCTest

/// `TokenMap` hashes a token by its first eight bytes only: it must still behave as a
/// `[String: Value]`, tokens that share those bytes (or are shorter than eight) included.
final class TokenMapTests: XCTestCase {
    /// Random lookups, updates in place, insertions and removals, checked against a dictionary
    /// after every step: haul's tokens, tokens that share their first eight bytes and length,
    /// and short ones (the empty token too). Tokens are ASCII (see `TokenKey.init`).
    func testBehavesAsADictionaryOfTokens() {
        var generator = SystemRandomNumberGenerator()
        let shared = "ABCDEFGH"
        var tokens = (0..<40).map { _ in JobQueue.newToken() }
        tokens += (0..<40).map { index in shared + String(format: "%07d", index) }  // one prefix, one length
        tokens += ["", "a", "ab", "abcdefg", "abcdefgh", "abcdefghi", shared]
        var map = TokenMap<Int>()
        var expected: [String: Int] = [:]
        for step in 0..<20_000 {
            let token = tokens.randomElement(using: &generator)!
            switch Int.random(in: 0..<5, using: &generator) {
            case 0:
                map[token] = step
                expected[token] = step
            case 1:
                map[token]? += 1  // in place, only when present
                expected[token]? += 1
            case 2:
                XCTAssertEqual(map.removeValue(forKey: token), expected.removeValue(forKey: token))
            case 3:
                map[token] = nil
                expected[token] = nil
            default:
                XCTAssertEqual(map[token], expected[token], token)
            }
            XCTAssertEqual(map.count, expected.count)
            XCTAssertEqual(map.isEmpty, expected.isEmpty)
        }
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }), expected)
        XCTAssertEqual(Set(map.keys), Set(expected.keys))
        XCTAssertEqual(map.values.sorted(), expected.values.sorted())
        map.removeAll()
        XCTAssertTrue(map.isEmpty)
        XCTAssertNil(map[tokens[0]])
    }

    /// Tokens that differ only after their eighth byte have the same hash and are still two keys.
    func testTokensThatShareTheirHashAreTwoKeys() {
        var map = TokenMap<String>()
        map["ABCDEFGH0000001"] = "one"
        map["ABCDEFGH0000002"] = "two"
        XCTAssertEqual(TokenKey("ABCDEFGH0000001").hashValue, TokenKey("ABCDEFGH0000002").hashValue)
        XCTAssertEqual(map["ABCDEFGH0000001"], "one")
        XCTAssertEqual(map["ABCDEFGH0000002"], "two")
        XCTAssertEqual(map.count, 2)
    }
}
