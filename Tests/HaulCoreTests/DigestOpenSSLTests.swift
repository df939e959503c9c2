import Foundation
import HaulCore
import HaulTestSupport
import Testing

/// Every digest haul computes against `openssl dgst`, on random inputs of random lengths —
/// every length around the block and padding boundaries among them — fed in random pieces.
struct DigestOpenSSLTests {
    /// Lengths where padding changes shape: the 64-byte blocks of MD5, SHA-1 and SHA-256 (the
    /// length field fits after 55 bytes, not after 56) and the 128-byte blocks of SHA-512 (111,
    /// 112), and the block ends themselves.
    static let boundaryLengths = [0, 1, 55, 56, 57, 63, 64, 65, 111, 112, 113, 119, 120, 127, 128, 129,
                                  183, 184, 191, 192, 239, 240, 255, 256, 257]

    @Test("MD5, SHA-1, SHA-256 and SHA-512 agree with openssl dgst", arguments: Checksum.Algorithm.allCases)
    func agreesWithOpenSSL(algorithm: Checksum.Algorithm) throws {
        let openssl = try #require(HaulProcess.tool("openssl"), "openssl is not installed (Debian: apt-get install openssl); this test compares against it")
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SeededGenerator(seed: seed)
        let folder = try TempDirectory(prefix: "haul-digest")
        defer { folder.remove() }
        var lengths = Self.boundaryLengths
        lengths += (0..<40).map { _ in Int(random.next() % 1_000) }
        lengths += (0..<4).map { _ in Int(random.next() % 200_000) }
        var inputs: [(path: String, bytes: [UInt8])] = []
        for (index, length) in lengths.enumerated() {
            let bytes = random.bytes(length)
            inputs.append((try folder.write("input-\(index).bin", Data(bytes)), bytes))
        }

        // One openssl for every file: `-r` prints "HEX *PATH" a line.
        let result = try HaulProcess.run(openssl, ["dgst", "-\(algorithm.rawValue)", "-r"] + inputs.map(\.path))
        try #require(result.status == 0, "openssl dgst failed: \(result.stderrText)")
        var expected: [String: String] = [:]
        for line in result.stdoutText.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            expected[String(parts[1].dropFirst())] = String(parts[0])
        }
        try #require(expected.count == inputs.count, "openssl printed \(result.stdoutText.prefix(300))")

        for input in inputs {
            let wanted = expected[input.path]
            var whole = algorithm.makeDigest()
            input.bytes.withUnsafeBytes { whole.update($0) }
            #expect(whole.finalize() == wanted, "\(input.bytes.count) bytes at once (seed \(seed))")
            // Pieces of random sizes, empty ones and ones across several blocks among them.
            var pieces = algorithm.makeDigest()
            var splits: [Int] = []
            var start = 0
            while start < input.bytes.count {
                let size = random.next() % 8 == 0 ? Int(random.next() % 1_000) : Int(random.next() % 140)
                let end = min(input.bytes.count, start + size)
                input.bytes[start..<end].withUnsafeBytes { pieces.update($0) }
                splits.append(end - start)
                start = end
            }
            #expect(pieces.finalize() == wanted, "\(input.bytes.count) bytes in pieces \(splits.prefix(40)) (seed \(seed))")
        }
    }
}
