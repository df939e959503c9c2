import Foundation
import HaulCore
import Testing

/// MD5, SHA-1 and SHA-512 against the RFC 1321 and FIPS 180 / NIST example vectors, each fed
/// whole and a byte at a time (SHA-256 has its own, in SHA256Tests).
struct DigestKnownAnswerTests {
    /// FIPS 180's 448-bit and 896-bit messages.
    static let message448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
    static let message896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"

    static func digest(_ text: String, _ algorithm: Checksum.Algorithm, byteAtATime: Bool = false) -> String {
        var digest = algorithm.makeDigest()
        if byteAtATime {
            for byte in text.utf8 { digest.update([byte]) }
        } else {
            digest.update(Array(text.utf8))
        }
        return digest.finalize()
    }

    @Test("known vectors", arguments: [
        // RFC 1321 §A.5, the test suite.
        (Checksum.Algorithm.md5, "", "d41d8cd98f00b204e9800998ecf8427e"),
        (.md5, "a", "0cc175b9c0f1b6a831c399e269772661"),
        (.md5, "abc", "900150983cd24fb0d6963f7d28e17f72"),
        (.md5, "message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (.md5, "abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        (.md5, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        (.md5, String(repeating: "1234567890", count: 8), "57edf4a22be3c955ac49da2e2107b67a"),
        (.md5, message448, "8215ef0796a20bcaaae116d3876c664a"),
        (.md5, message896, "03dd8807a93175fb062dfb55dc7d359c"),
        // FIPS 180 examples.
        (.sha1, "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (.sha1, "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (.sha1, message448, "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        (.sha1, message896, "a49b2446a02c645bf419f995b67091253a04a259"),
        (.sha512, "", "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"),
        (.sha512, "abc", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
        (.sha512, message448, "204a8fc6dda82f0a0ced7beb8e08a41657c16ef468b228a8279be331a703c33596fd15c13b1b07f9aa1d3bea57789ca031ad85c7a71dd70354ec631238ca3445"),
        (.sha512, message896, "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909"),
    ])
    func knownVectors(algorithm: Checksum.Algorithm, input: String, expected: String) {
        #expect(Self.digest(input, algorithm) == expected)
        #expect(Self.digest(input, algorithm, byteAtATime: true) == expected, "fed a byte at a time")
        #expect(expected.count == algorithm.hexDigits)
    }

    @Test("a million 'a'", arguments: [
        (Checksum.Algorithm.md5, "7707d6ae4e027c70eea2a935c2296f21"),
        (.sha1, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"),
        (.sha256, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        (.sha512, "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973ebde0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b"),
    ])
    func oneMillionAs(algorithm: Checksum.Algorithm, expected: String) {
        var digest = algorithm.makeDigest()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { chunk.withUnsafeBytes { digest.update($0) } }
        #expect(digest.finalize() == expected)
    }
}
