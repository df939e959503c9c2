import Foundation
import XCTest
import Synchronization
@testable import HaulCore
import HaulTestSupport

/// URL-list lines: what is accepted, and every reason a line is rejected.
final class InputParsingTests: XCTestCase {
    private let resolver = DestinationResolver(directory: "/srv/out")

    func testValidLineWithOutAndSHA256() throws {
        let sha = String(repeating: "AbCd", count: 16)
        let parsed = try line("https://example.org/a/file.iso out=isos/x.iso sha256=\(sha)", in: resolver)
        XCTAssertEqual(parsed.url.string, "https://example.org/a/file.iso")
        XCTAssertEqual(parsed.url.hostKey, "example.org:443")
        XCTAssertEqual(parsed.destination, "/srv/out/isos/x.iso")
        XCTAssertEqual(parsed.checksum, Checksum(.sha256, hex: sha.lowercased()))
        XCTAssertEqual(parsed.checksum?.description, "sha256=" + sha.lowercased())
        // Fields may be separated by tabs and runs of spaces, and followed by a comment.
        let spaced = try line("http://Example.ORG:8080/f.txt \t out=g.txt   # a note", in: resolver)
        XCTAssertEqual(spaced.url.hostKey, "example.org:8080")
        XCTAssertEqual(spaced.destination, "/srv/out/g.txt")
        XCTAssertNil(spaced.checksum)
    }

    func testHostIsTheHostKeyWithoutItsPort() throws {
        XCTAssertEqual(try HTTPURL("https://User@EXAMPLE.org.:8443/x").host, "example.org")
        XCTAssertEqual(try HTTPURL("https://User@EXAMPLE.org.:8443/x").hostKey, "example.org:8443")
        XCTAssertEqual(try HTTPURL("HTTP://[::1]/x").host, "[::1]")
        XCTAssertEqual(try HTTPURL("HTTP://[::1]/x").hostKey, "[::1]:80")
        XCTAssertEqual(try HTTPURL("hTtPs://a/").scheme, "https")
    }

    /// An IPv4 address however it is spelled (libcurl connects each to the same address) is one
    /// host: one key, one cap. Names, and what is neither, keep their own.
    func testEverySpellingOfAnIPv4AddressIsOneHost() throws {
        for spelling in ["127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f.1", "0X7F.0.0.1", "0177.0.0.1", "127.000.000.001",
                         "0x7f000001", "017700000001", "127.0.0.1."] {
            XCTAssertEqual(try HTTPURL("http://\(spelling):8080/x").hostKey, "127.0.0.1:8080", spelling)
        }
        XCTAssertEqual(try HTTPURL("http://010.0.0.1/x").hostKey, "8.0.0.1:80", "a leading 0 is octal, as inet_aton reads it")
        XCTAssertEqual(try HTTPURL("http://1.2.3.4/x").hostKey, "1.2.3.4:80")
        // As a user types a host to filter by (`haul list --host`).
        XCTAssertEqual(HTTPURL.canonicalHost("127.1:8080"), "127.0.0.1:8080")
        XCTAssertEqual(HTTPURL.canonicalHost("0x7F.1"), "127.0.0.1")
        XCTAssertEqual(HTTPURL.canonicalHost("Example.ORG.:443"), "example.org:443")
        XCTAssertEqual(HTTPURL.canonicalHost("[::1]:80"), "[::1]:80")
        for name in ["localhost", "a1.example", "1e3", "1.2.3.4.5", "256.1.1.1", "1.2.3.0x100", "08.1.1.1", "1..2", "host-1"] {
            XCTAssertEqual(try? HTTPURL("http://\(name)/x").hostKey, try? HTTPURL("http://\(name)/x").host + ":80", name)
            XCTAssertEqual((try? HTTPURL("http://\(name)/x"))?.host, (try? HTTPURL("http://\(name)/x")).map { _ in name.lowercased() }, name)
        }
    }

    func testBlankAndCommentLinesAreSkipped() throws {
        for text in ["", "   ", "\t", "# comment", "   # indented comment", "#http://example.org/x"] {
            XCTAssertNil(try InputLine.parse(Array(text.utf8), resolver: resolver), "'\(text)'")
        }
    }

    func testInvalidURLs() {
        for text in ["not-a-url", "example.org/file", "http//example.org/x", "http:/example.org/x", "http://",
                     "http:///path", "http://exa%20mple.org/x", "http://example.org:99999/x", "http://example.org:abc/x",
                     "http://[::1/x", "http://ex\u{E4}mple.org/x", "://example.org/x", "http://.example.org/x"] {
            guard let rejection = rejection(of: text, in: resolver) else { continue }
            guard case .url(.invalid) = rejection else { XCTFail("'\(text)': expected an invalid-URL rejection, got \(rejection)"); continue }
            XCTAssertTrue(rejection.description.hasPrefix("invalid URL"), rejection.description)
        }
    }

    func testSchemesOtherThanHTTPAndHTTPSAreRejected() throws {
        for (text, scheme) in [("ftp://example.org/x", "ftp"), ("file:///etc/passwd", "file"), ("FTP://example.org/x", "ftp"),
                               ("javascript:alert(1)", "javascript"), ("gopher://example.org/", "gopher"), ("httpx://example.org/", "httpx")] {
            XCTAssertEqual(rejection(of: text, in: resolver), .url(.unsupportedScheme(scheme)), text)
        }
        // Scheme matching ignores case.
        XCTAssertEqual(try line("HTTPS://example.org/x", in: resolver).url.scheme, "https")
        XCTAssertEqual(try line("Http://example.org/x", in: resolver).url.hostKey, "example.org:80")
    }

    func testDestinationsOutsideTheFolderAreRejected() {
        XCTAssertEqual(rejection(of: "https://e.org/x out=../x", in: resolver), .destination(.escapesDirectory))
        XCTAssertEqual(rejection(of: "https://e.org/x out=a/../../x", in: resolver), .destination(.escapesDirectory))
        XCTAssertEqual(rejection(of: "https://e.org/x out=a/b/../c", in: resolver), .destination(.escapesDirectory),
                       "any .. component is refused, even one that would stay inside")
        XCTAssertEqual(rejection(of: "https://e.org/x out=/etc/passwd", in: resolver), .destination(.absoluteOutPath))
        XCTAssertEqual(rejection(of: "https://e.org/x out=/srv/out/inside-but-absolute", in: resolver), .destination(.absoluteOutPath))
        XCTAssertEqual(rejection(of: "https://e.org/x out=", in: resolver), .destination(.emptyOutPath))
        XCTAssertEqual(rejection(of: "https://e.org/x out=./", in: resolver), .destination(.emptyOutPath))
    }

    func testSymlinkInsideTheFolderPointingOutsideIsRejected() throws {
        let directory = try makeTempDirectory()
        let output = try directory.makeDirectory("out")
        let outside = try directory.makeDirectory("outside")
        try FileManager.default.createSymbolicLink(atPath: output + "/escape", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: output + "/relative-escape", withDestinationPath: "../outside")
        try directory.makeDirectory("out/real")
        try FileManager.default.createSymbolicLink(atPath: output + "/alias", withDestinationPath: output + "/real")
        let resolver = DestinationResolver(directory: output)
        XCTAssertEqual(rejection(of: "https://e.org/x out=escape/file", in: resolver), .destination(.escapesDirectory))
        XCTAssertEqual(rejection(of: "https://e.org/x out=relative-escape/deeper/file", in: resolver), .destination(.escapesDirectory))
        // A link that stays inside the folder is fine.
        XCTAssertEqual(try line("https://e.org/x out=alias/file", in: resolver).destination, output + "/alias/file")
    }

    func testMalformedSHA256() {
        let good = String(repeating: "0123456789abcdef", count: 4)
        for value in ["", String(good.dropLast()), good + "0", String(good.dropLast()) + "g", String(good.dropLast()) + " ",
                      String(repeating: "é", count: 32)] {
            let text = "https://e.org/x sha256=\(value)"
            guard let rejection = rejection(of: text, in: resolver) else { continue }
            if value.hasSuffix(" ") {
                XCTAssertEqual(rejection, .malformedChecksum(.sha256, String(value.dropLast()), line: nil), text)
            } else {
                XCTAssertEqual(rejection, .malformedChecksum(.sha256, value, line: nil), text)
            }
            XCTAssertTrue(rejection.description.contains("malformed sha256"), rejection.description)
            XCTAssertTrue(rejection.description.contains("expected 64 hex digits"), rejection.description)
        }
    }

    /// md5=, sha1=, sha256= and sha512= after the URL, and aria2's checksum=md5|sha-1|sha-256|
    /// sha-512=, take hex of their algorithm's length in either case, stored lower-case.
    func testEveryChecksumAlgorithmIsAccepted() throws {
        for algorithm in Checksum.Algorithm.allCases {
            let hex = String(String(repeating: "0123456789ABCDEFabcdef", count: 6).prefix(algorithm.hexDigits))
            let expected = Checksum(algorithm, hex: hex.lowercased())
            XCTAssertEqual(expected?.hex, hex.lowercased())
            XCTAssertEqual(try line("https://e.org/x \(algorithm.rawValue)=\(hex)", in: resolver).checksum, expected, "\(algorithm)")
            XCTAssertEqual(try line("https://e.org/x \(algorithm.rawValue)=\(hex) out=y", in: resolver).checksum, expected, "\(algorithm), then out=")
            for type in [algorithm.aria2Name, algorithm.aria2Name.uppercased()] {
                let option = InputLine.Aria2Option(line: 2, key: "checksum", value: "\(type)=\(hex)")
                let parsed = try InputLine.parse(Array("https://e.org/x".utf8), resolver: resolver, aria2: [option])
                XCTAssertEqual(parsed?.checksum, expected, "checksum=\(type)=")
            }
            XCTAssertEqual(expected.flatMap { Checksum(stored: $0.description) }, expected, "\(algorithm): stored text reads back")
        }
        // The field names are haul's, not aria2's, and lower-case like out=.
        XCTAssertEqual(rejection(of: "https://e.org/x sha-1=\(String(repeating: "a", count: 40))", in: resolver),
                       .unknownOption("sha-1=\(String(repeating: "a", count: 40))"))
        XCTAssertEqual(rejection(of: "https://e.org/x MD5=\(String(repeating: "a", count: 32))", in: resolver),
                       .unknownOption("MD5=\(String(repeating: "a", count: 32))"))
    }

    /// A value of the wrong length, or with a character that is not hex, is refused naming the
    /// algorithm and the digits it takes (and, for an aria2 option, its line).
    func testMalformedChecksumsNameTheAlgorithmAndTheDigitsExpected() throws {
        for algorithm in Checksum.Algorithm.allCases {
            let good = String(repeating: "a", count: algorithm.hexDigits)
            for value in ["", String(good.dropLast()), good + "0", String(good.dropLast()) + "g", "0123"] {
                let rejection = rejection(of: "https://e.org/x \(algorithm.rawValue)=\(value)", in: resolver)
                XCTAssertEqual(rejection, .malformedChecksum(algorithm, value, line: nil), "\(algorithm)=\(value)")
                let text = rejection?.description ?? ""
                XCTAssertTrue(text.hasPrefix("malformed \(algorithm.rawValue) "), text)
                XCTAssertTrue(text.contains("expected \(algorithm.hexDigits) hex digits"), text)
                let option = InputLine.Aria2Option(line: 7, key: "checksum", value: "\(algorithm.aria2Name)=\(value)")
                XCTAssertThrowsError(try InputLine.parse(Array("https://e.org/x".utf8), resolver: resolver, aria2: [option])) { error in
                    XCTAssertEqual(error as? InputLine.Rejection, .malformedChecksum(algorithm, value, line: 7))
                    XCTAssertTrue("\(error)".contains("on line 7"), "\(error)")
                    XCTAssertTrue("\(error)".contains("expected \(algorithm.hexDigits) hex digits"), "\(error)")
                }
            }
        }
        // The digits of another algorithm are named as such.
        let sha256Digits = InputLine.Rejection.malformedChecksum(.md5, String(repeating: "a", count: 64), line: nil).description
        XCTAssertTrue(sha256Digits.contains("found 64 (the length of a sha256: give it as sha256=)"), sha256Digits)
        let notHex = InputLine.Rejection.malformedChecksum(.sha1, String(repeating: "z", count: 40), line: nil).description
        XCTAssertTrue(notHex.contains("not one (0-9, a-f)"), notHex)
    }

    /// One checksum per URL: a second one, of the same algorithm or another, after the URL or
    /// on an aria2 line, refuses the line (naming the aria2 line).
    func testASecondChecksumIsRefused() throws {
        let md5 = String(repeating: "a", count: 32), sha1 = String(repeating: "b", count: 40)
        XCTAssertEqual(rejection(of: "https://e.org/x md5=\(md5) sha1=\(sha1)", in: resolver),
                       .duplicateChecksum(first: .md5, second: .sha1, line: nil))
        XCTAssertEqual(rejection(of: "https://e.org/x md5=\(md5) md5=\(md5)", in: resolver),
                       .duplicateChecksum(first: .md5, second: .md5, line: nil))
        let onLine = InputLine.Aria2Option(line: 3, key: "checksum", value: "sha-1=\(sha1)")
        XCTAssertThrowsError(try InputLine.parse(Array("https://e.org/x md5=\(md5)".utf8), resolver: resolver, aria2: [onLine])) { error in
            XCTAssertEqual(error as? InputLine.Rejection, .duplicateChecksum(first: .md5, second: .sha1, line: 3))
            XCTAssertTrue("\(error)".contains("sha1=") && "\(error)".contains("line 3") && "\(error)".contains("one per URL"), "\(error)")
        }
        let first = InputLine.Aria2Option(line: 2, key: "checksum", value: "md5=\(md5)")
        XCTAssertThrowsError(try InputLine.parse(Array("https://e.org/x".utf8), resolver: resolver, aria2: [first, onLine])) { error in
            XCTAssertEqual(error as? InputLine.Rejection, .duplicateChecksum(first: .md5, second: .sha1, line: 3))
        }
    }

    /// aria2's other hash types (sha-224, sha-384, adler32…) and names that are not aria2's are
    /// refused by line, naming the four haul takes.
    func testAria2ChecksumTypesHaulDoesNotComputeAreRefused() {
        for type in ["sha-224", "sha-384", "SHA-384", "sha1", "sha256", "adler32", ""] {
            let option = InputLine.Aria2Option(line: 5, key: "checksum", value: "\(type)=\(String(repeating: "a", count: 96))")
            XCTAssertThrowsError(try InputLine.parse(Array("https://e.org/x".utf8), resolver: resolver, aria2: [option])) { error in
                XCTAssertEqual(error as? InputLine.Rejection, .unsupportedAria2Checksum(line: 5, type), type)
                XCTAssertTrue("\(error)".contains("on line 5") && "\(error)".contains("md5, sha-1, sha-256, sha-512"), "\(error)")
            }
        }
        let bare = InputLine.Aria2Option(line: 5, key: "checksum", value: "sha-384")
        XCTAssertThrowsError(try InputLine.parse(Array("https://e.org/x".utf8), resolver: resolver, aria2: [bare])) { error in
            XCTAssertEqual(error as? InputLine.Rejection, .unsupportedAria2Checksum(line: 5, "sha-384"))
        }
    }

    func testNULByteAnywhereIsRejected() {
        XCTAssertEqual(rejection(of: Array("https://e.org/a".utf8) + [0] + Array("b".utf8), in: resolver), .containsNUL)
        XCTAssertEqual(rejection(of: Array("https://e.org/a out=x".utf8) + [0], in: resolver), .containsNUL)
        XCTAssertEqual(rejection(of: [0], in: resolver), .containsNUL)
        XCTAssertEqual(rejection(of: Array("# a comment ".utf8) + [0], in: resolver), .containsNUL)
    }

    func testInvalidUTF8IsRejected() {
        let prefix = Array("https://e.org/".utf8)
        for bad: [UInt8] in [[0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]] {
            XCTAssertEqual(rejection(of: prefix + bad, in: resolver), .invalidUTF8, "\(bad)")
            XCTAssertEqual(rejection(of: Array("https://e.org/x out=".utf8) + bad, in: resolver), .invalidUTF8, "out= \(bad)")
        }
    }

    func testUnknownAndDuplicateFields() {
        XCTAssertEqual(rejection(of: "https://e.org/x foo=bar", in: resolver), .unknownOption("foo=bar"))
        XCTAssertEqual(rejection(of: "https://e.org/x out", in: resolver), .unknownOption("out"))
        XCTAssertEqual(rejection(of: "https://e.org/x OUT=y", in: resolver), .unknownOption("OUT=y"))
        XCTAssertEqual(rejection(of: "https://e.org/x https://e.org/y", in: resolver), .unknownOption("https://e.org/y"))
        XCTAssertEqual(rejection(of: "https://e.org/x out=a out=b", in: resolver), .duplicateOption("out"))
        let sha = String(repeating: "a", count: 64)
        XCTAssertEqual(rejection(of: "https://e.org/x sha256=\(sha) sha256=\(sha)", in: resolver),
                       .duplicateChecksum(first: .sha256, second: .sha256, line: nil))
        XCTAssertTrue(InputLine.Rejection.unknownOption("foo=bar").description.contains("unknown field 'foo=bar'"))
    }

    func testTooLongLinesAreRejectedByNumberWithoutStoppingTheOthers() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(path: directory.file("haul.db"))
        let long = "https://e.org/" + String(repeating: "a", count: 200)
        let text = "https://e.org/one\n\(long)\r\nhttps://e.org/two\r\n\n# comment\n\(long)x\nhttps://e.org/three"
        let path = try directory.write("urls.txt", Data(text.utf8))
        let rejections = RejectionLog()
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path),
                                       batchSize: 2, maximumLineLength: 100) { rejections.append($0, $1); _ = $2 }
        var summary = URLListImporter.Summary()
        let descriptor = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        try importer.importLines(from: descriptor, into: &summary)
        XCTAssertEqual(rejections.entries.map(\.line), [2, 6])
        for entry in rejections.entries {
            guard case .tooLong(let length, let limit) = entry.reason else { XCTFail("line \(entry.line): \(entry.reason)"); continue }
            XCTAssertEqual(limit, 100)
            XCTAssertGreaterThan(length, long.utf8.count - 1, "line \(entry.line)")
            XCTAssertTrue(entry.reason.description.hasPrefix("line too long"), entry.reason.description)
        }
        XCTAssertEqual(summary.added, 3)
        XCTAssertEqual(summary.rejected, 2)
        XCTAssertEqual(try queue.list(JobFilter()).map(\.url), ["https://e.org/one", "https://e.org/two", "https://e.org/three"])

        // The same through command-line arguments.
        var argumentSummary = URLListImporter.Summary()
        let argumentRejections = RejectionLog()
        let fromArguments = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path),
                                            maximumLineLength: 100) { argumentRejections.append($0, $1); _ = $2 }
        try fromArguments.importLines(["https://e.org/four", long], into: &argumentSummary)
        XCTAssertEqual(argumentRejections.entries.map(\.line), [2])
        XCTAssertEqual(argumentRejections.entries.first?.reason, .tooLong(long.utf8.count, limit: 100))
        XCTAssertEqual(argumentSummary.added, 1)
    }

    /// aria2c's input format: indented out=, dir= and checksum= lines belong to the URL
    /// line above them (values may hold spaces); any other option refuses that record, by line;
    /// option lines after a blank line, a comment or nothing are refused; records cross batches.
    func testAria2InputFilesAreRead() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(database: Database(path: directory.file("q.db")))
        let sha = String(repeating: "ab", count: 32)
        let text = """
            https://e.org/a.iso
              out=disc one.iso
              dir=isos/2026
            \tchecksum=SHA-256=\(sha.uppercased())
            https://e.org/b.bin
             dir=other
            https://e.org/c
              header=X-A: b
              out=c
            https://e.org/d  out=d-from-the-line
              out=again

              out=orphan
            # a comment
              http-passwd=S3CRET
            https://e.org/e
              dir=/etc
            https://e.org/f
            \tchecksum=md5=0123
            https://e.org/g
            """
        let path = try directory.write("aria.txt", Data(text.utf8))
        let rejections = RejectionLog()
        let texts = RejectionLog()
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path),
                                       batchSize: 2) { rejections.append($0, $1); texts.shown.append($2 ?? "") }
        var summary = URLListImporter.Summary()
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        try importer.importLines(from: descriptor, into: &summary)

        XCTAssertEqual(rejections.entries.map(\.line), [7, 10, 13, 15, 16, 18])
        XCTAssertEqual(rejections.entries.map(\.reason), [
            .unsupportedAria2Option(line: 8, "header"), .duplicateOption("out"), .aria2OptionWithoutURL, .aria2OptionWithoutURL,
            .aria2FolderOutside("/etc"), .malformedChecksum(.md5, "0123", line: 19),
        ])
        let jobs = try queue.list(JobFilter())
        XCTAssertEqual(jobs.map(\.destination), [directory.file("isos/2026/disc one.iso"), directory.file("other/b.bin"), directory.file("g")])
        XCTAssertEqual(jobs.first?.checksum, "sha256=\(sha)")
        XCTAssertEqual(summary.added, 3)
        // An option that may hold a secret is shown without its value.
        XCTAssertEqual(texts.shown[2...3], ["  out=orphan", "  http-passwd=…"])
    }

    /// A URL followed by more option lines than any URL haul takes could need is refused, the
    /// extra lines not kept (memory stays bounded: 10 million lines held 1 GB), and the URL after
    /// them is queued.
    func testAURLWithEndlessOptionLinesIsRefusedWithoutKeepingThem() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(database: Database(path: directory.file("q.db")))
        var text = "https://e.org/a\n"
        for index in 0..<100_000 { text += "  out=x\(index).bin\n" }
        text += "https://e.org/b\n"
        let path = try directory.write("many.txt", Data(text.utf8))
        let rejections = RejectionLog()
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path)) { rejections.append($0, $1); _ = $2 }
        var summary = URLListImporter.Summary()
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        try importer.importLines(from: descriptor, into: &summary)
        let limit = URLListImporter.maximumAria2Options
        XCTAssertEqual(rejections.entries.map(\.line), [1])
        XCTAssertEqual(rejections.entries.map(\.reason), [.tooManyAria2Options(line: limit + 2, limit: limit)])
        XCTAssertEqual(try queue.list(JobFilter()).map(\.url), ["https://e.org/b"])
        XCTAssertEqual(summary.added, 1)
    }

    /// An option line that cannot be read (a value that is not UTF-8 or holds a NUL, a key in
    /// upper case) refuses its URL instead of being dropped with the URL queued without it; an
    /// indented comment among a URL's options does not end them.
    func testAnUnreadableAria2OptionRefusesItsURL() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(database: Database(path: directory.file("q.db")))
        let sha = String(repeating: "ab", count: 32)
        var text = Data("https://e.org/a\n  out=caf".utf8) + Data([0xE9]) + Data(".bin\n  checksum=sha-256=\(sha)\n".utf8)
        text += Data("https://e.org/b\n  out=x".utf8) + Data([0]) + Data("y.bin\n".utf8)
        text += Data("https://e.org/c\n  OUT=upper.bin\n".utf8)
        text += Data("https://e.org/d\n  # its file:\n  out=d.bin\n\tchecksum=sha-256=\(sha)\n".utf8)
        let path = try directory.write("aria.txt", text)
        let rejections = RejectionLog()
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path)) { line, reason, _ in rejections.append(line, reason) }
        var summary = URLListImporter.Summary()
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        try importer.importLines(from: descriptor, into: &summary)

        XCTAssertEqual(rejections.entries.map(\.line), [1, 4, 6])
        XCTAssertEqual(rejections.entries.map(\.reason), [
            .unreadableAria2Option(line: 2, "out", "its value is not valid UTF-8"),
            .unreadableAria2Option(line: 5, "out", "its value holds a NUL byte"),
            .unsupportedAria2Option(line: 7, "OUT"),
        ])
        let jobs = try queue.list(JobFilter())
        XCTAssertEqual(jobs.map(\.destination), [directory.file("d.bin")])
        XCTAssertEqual(jobs.first?.checksum, "sha256=\(sha)")
        XCTAssertEqual(summary.added, 1)
    }

    /// `haul add URL out=NAME sha256=HEX` unquoted: the fields given as arguments of their own
    /// belong to the URL before them.
    func testFieldsGivenAsArgumentsOfTheirOwnBelongToTheURLBefore() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(database: Database(path: directory.file("q.db")))
        let sha = String(repeating: "cd", count: 32)
        let rejections = RejectionLog()
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path)) { line, reason, _ in rejections.append(line, reason) }
        var summary = URLListImporter.Summary()
        try importer.importLines(["https://e.org/a?x=1", "out=mine.bin", "sha256=\(sha)", "https://e.org/b", "size=3",
                                  "https://e.org/c", "SHA256=\(sha)", "https://e.org/d", "out=my file.bin",
                                  "https://e.org/e # a mirror", "out=e.bin", "sha256=\(sha)"], into: &summary)

        // Fields the line's parser does not take refuse their URL, never drop out of it.
        XCTAssertEqual(rejections.entries.map(\.line), [4, 6, 8])
        XCTAssertEqual(rejections.entries.map(\.reason), [.unknownOption("size=3"), .unknownOption("SHA256=\(sha)"), .unknownOption("file.bin")])
        let jobs = try queue.list(JobFilter())
        XCTAssertEqual(jobs.map(\.destination), [directory.file("mine.bin"), directory.file("e.bin")])
        XCTAssertEqual(jobs.map(\.checksum), ["sha256=\(sha)", "sha256=\(sha)"], "fields go before a trailing comment")
        XCTAssertEqual(summary.added, 2)
    }

    /// A reader waits only when no whole line is buffered and the input has nothing more now: a
    /// pipe whose writer has not written the rest yet; never a regular file, nor an input at its end.
    func testAReaderWouldWaitOnlyForAPipeWithNoWholeLineToGive() throws {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]) }
        var reader = LineReader(descriptor: ends[0])
        XCTAssertTrue(reader.wouldWait(), "an empty pipe")
        XCTAssertEqual(write(ends[1], "a\nb\nc", 5), 5)
        XCTAssertFalse(reader.wouldWait(), "lines to read")
        guard case .bytes(let a)? = try reader.next() else { return XCTFail("no first line") }
        XCTAssertEqual(a, Array("a".utf8))
        XCTAssertFalse(reader.wouldWait(), "a whole line still buffered")
        _ = try reader.next()
        XCTAssertTrue(reader.wouldWait(), "only part of a line, and nothing more to read")
        XCTAssertTrue(reader.wouldWait(milliseconds: 20))
        close(ends[1])
        XCTAssertFalse(reader.wouldWait(), "the input ended: the last line is ready")
        guard case .bytes(let c)? = try reader.next() else { return XCTFail("no last line") }
        XCTAssertEqual(c, Array("c".utf8))
        XCTAssertNil(try reader.next())
        XCTAssertFalse(reader.wouldWait())

        let directory = try makeTempDirectory()
        let file = open(try directory.write("urls.txt", Data("x\n".utf8)), O_RDONLY)
        defer { close(file) }
        XCTAssertFalse(LineReader(descriptor: file).wouldWait(), "a regular file")
    }

    /// Streaming (`haul get`): the lines a pipe gave so far are queued, and `afterBatch` called,
    /// before the writer sends the rest: at once, but for the last URL line, which waits a moment
    /// for the indented options that may follow it.
    func testAStreamingImportQueuesWhatCameBeforeTheInputEnds() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("haul.db")
        let queue = try JobQueue(path: db)
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]) }
        let committed = DispatchSemaphore(value: 0)
        let queuedBeforeTheEnd = Mutex<[Int]>([])
        let writer = ends[1]
        Thread.detachNewThread {
            let first = "https://e.org/a\nhttps://e.org/b\n"
            _ = write(writer, first, first.utf8.count)
            for _ in 0..<2 where committed.wait(timeout: .now() + 20) == .success {
                let count = (try? Database(path: db, mode: .mustExist).scalarInt("SELECT count(*) FROM jobs")) ?? -1
                queuedBeforeTheEnd.withLock { $0.append(count) }
            }
            let rest = "https://e.org/c\n"
            _ = write(writer, rest, rest.utf8.count)
            close(writer)
        }
        var importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path)) { _, _, _ in }
        importer.streaming = URLListImporter.Streaming(afterBatch: { committed.signal() })
        var summary = URLListImporter.Summary()
        try importer.importLines(from: ends[0], into: &summary)
        XCTAssertEqual(queuedBeforeTheEnd.withLock { $0 }, [1, 2],
                       "the lines that came were queued while the input stayed open, the held URL line after the others")
        XCTAssertEqual(summary.added, 3)
        try assertCountersConsistent(queue.database)
    }

    func testRejectionsAreReportedInLineOrderAcrossBatches() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(path: directory.file("haul.db"))
        var lines: [String] = []
        var expectedBad: [Int] = []
        for number in 1...50 {
            if number % 7 == 0 {
                lines.append("ftp://e.org/\(number)")
                expectedBad.append(number)
            } else if number % 11 == 0 {
                lines.append("https://e.org/dup")  // the first is added, the others already queued
            } else {
                lines.append("https://e.org/f\(number)")
            }
        }
        let path = try directory.write("urls.txt", Data(lines.joined(separator: "\n").utf8))
        let rejections = RejectionLog()
        let importer = URLListImporter(queue: queue, resolver: DestinationResolver(directory: directory.path),
                                       batchSize: 4) { rejections.append($0, $1); _ = $2 }
        var summary = URLListImporter.Summary()
        let descriptor = open(path, O_RDONLY)
        defer { close(descriptor) }
        try importer.importLines(from: descriptor, into: &summary)
        XCTAssertEqual(rejections.entries.map(\.line), expectedBad)
        XCTAssertEqual(summary.rejected, expectedBad.count)
        XCTAssertEqual(summary.alreadyQueued, 3)  // 22, 33, 44
        XCTAssertEqual(summary.added, 50 - expectedBad.count - 3)
        try assertCountersConsistent(queue.database)
    }
}

/// Collects an importer's rejections (the importer calls back on the importing thread).
final class RejectionLog: @unchecked Sendable {
    // @unchecked Sendable: only touched from the test's own thread, which runs the importer.
    private(set) var entries: [(line: Int, reason: InputLine.Rejection)] = []
    func append(_ line: Int, _ reason: InputLine.Rejection) { entries.append((line, reason)) }
    var shown: [String] = []
}
