import Foundation
import HaulCore
import Testing

/// SHA-256 against the FIPS 180-4 / NIST example vectors, and split-invariance.
struct SHA256Tests {
    static func digest(_ text: String) -> String {
        var hasher = SHA256()
        hasher.update(Array(text.utf8))
        return hasher.finalize()
    }

    @Test("known vectors", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func knownVectors(input: String, expected: String) {
        #expect(Self.digest(input) == expected)
    }

    @Test func oneMillionAs() {
        var hasher = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { chunk.withUnsafeBytes { hasher.update($0) } }
        #expect(hasher.finalize() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("the digest does not depend on how the bytes are split")
    func splitInvariance() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var whole = SHA256()
        whole.update(bytes)
        let expected = whole.finalize()
        for _ in 0..<50 {
            var hasher = SHA256()
            var index = 0
            while index < bytes.count {
                let size = Int.random(in: 0...130, using: &generator)
                let end = min(bytes.count, index + size)
                hasher.update(bytes[index..<end])
                index = end
            }
            #expect(hasher.finalize() == expected)
        }
    }
}
