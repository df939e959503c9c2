import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Seeded property tests of the input line parser, the destination resolver and the response
/// header parsers: thousands of hostile inputs each, the same on every run. Whatever the input,
/// nothing traps, and whatever is accepted keeps the guarantees (an http(s) URL, a destination
/// strictly inside the output folder — also after following links already on disk).
final class ParserFuzzTests: XCTestCase {
    // MARK: - The output folder, with links in it

    private struct Fixture {
        /// The output folder, and a link to it (a second output folder to resolve against).
        let out: String
        let linkedOut: String
        let physicalOut: String
        let outside: String
    }

    /// An output folder holding links that lead out of it in every way (absolute, relative, via
    /// `..`, dangling, looping, chained, to a file, to `/`) and some that stay inside.
    private func makeFixture() throws -> Fixture {
        let directory = try makeTempDirectory()
        let out = try directory.makeDirectory("out")
        let outside = try directory.makeDirectory("outside")
        try directory.makeDirectory("out/real/deeper")
        try directory.write("outside/secret", Data("secret".utf8))
        let links: [(String, String)] = [
            ("esc", outside), ("up", ".."), ("rel-esc", "../outside"), ("root", "/"), ("dangling", outside + "/nope"),
            ("loop", "loop"), ("chain", "esc"), ("secret", outside + "/secret"), ("real/deeper/back", "../../../outside"),
            ("inside", "real"), ("self", "."), ("deep", "real/deeper"), ("inside-abs", out + "/real"),
        ]
        for (name, target) in links {
            try FileManager.default.createSymbolicLink(atPath: out + "/" + name, withDestinationPath: target)
        }
        let linkedOut = directory.file("linked-out")
        try FileManager.default.createSymbolicLink(atPath: linkedOut, withDestinationPath: out)
        return Fixture(out: out, linkedOut: linkedOut, physicalOut: Self.realPath(out) ?? out, outside: outside)
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Why `destination` is not strictly inside `folder`, or nil when it is: under it lexically,
    /// with no empty, `.` or `..` component, no component over 255 bytes or holding NUL, no temp-file
    /// name, and every folder on the way that exists resolving inside `physicalFolder`. All on
    /// bytes: as Characters, `/` followed by a combining mark is not `/`.
    private static func violation(of destination: String, folder: String, physicalFolder: String) -> String? {
        let bytes = Array(destination.utf8)
        let prefix = Array((folder + "/").utf8)
        guard bytes.count > prefix.count, bytes.starts(with: prefix) else { return "not under \(folder)" }
        guard bytes.count <= 4095 else { return "longer than 4095 bytes" }
        let components = bytes[prefix.count...].split(separator: 0x2F, omittingEmptySubsequences: false)
        for component in components {
            if component.isEmpty { return "an empty component" }
            if component.elementsEqual([0x2E]) || component.elementsEqual([0x2E, 0x2E]) { return "a . or .. component" }
            if component.count > 255 { return "a component of \(component.count) bytes" }
            if component.contains(0) { return "a NUL" }
        }
        if components.last!.starts(with: Array(DestinationResolver.tempPrefix.utf8)) { return "a temp-file name" }
        var current = folder
        for component in components.dropLast() {
            current += "/" + String(decoding: component, as: UTF8.self)
            var info = stat()
            guard lstat(current, &info) == 0 else { break }
            guard let real = realPath(current) else { return "\(current) exists but does not resolve" }
            guard real == physicalFolder || real.hasPrefix(physicalFolder + "/") else { return "\(current) leads to \(real)" }
        }
        return nil
    }

    /// Collects property violations, reporting the first few in full.
    private final class Violations {
        private(set) var count = 0
        private var shown: [String] = []
        func add(_ text: String) {
            count += 1
            if shown.count < 10 { shown.append(text) }
        }
        func assertNone(_ what: String, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertEqual(count, 0, "\(what): \(count) violations, e.g.\n" + shown.joined(separator: "\n"), file: file, line: line)
        }
    }

    // MARK: - Random text

    private static let giantGrapheme = "e" + String(repeating: "\u{301}", count: 200)  // one Character, 401 bytes

    /// Pieces of URL paths: dots, slashes and backslashes, encoded and not, look-alikes, marks
    /// that fuse with the character before them, control characters, overlong names.
    private static let pathPieces = [
        "/", "//", "a", "file.txt", ".", "..", "...", "%2e", "%2E%2e", "%2e%2e%2f", "%2f", "%2F", "%5c", "%5C", "\\", "..\\",
        "%00", "%0a", "%0D", "%7f", "%", "%2", "%zz", "%25", "%252F", "%c3%a9", "%C0%AE", "%C0%AF", "%e2%88%95", "%ff", "%cc%81",
        "é", "e\u{301}", "\u{301}", "\u{200D}", "\u{FE0F}", "．．／", "．", "／", "∕", "⁄", "\u{2215}..", "\u{202E}", "\u{FEFF}",
        ".haul-", ".haul-1-x.part", "%2Ehaul-2-y.part", "?q=/../x", "#/../y", "~", "$HOME", "\u{7F}", "\u{1}", "🙂", "中文",
        String(repeating: "n", count: 255), String(repeating: "é", count: 130), giantGrapheme, giantGrapheme + ".txt",
        "." + giantGrapheme + ".",
    ]

    /// Pieces of `out=` paths, naming the links of the fixture among others.
    private static let outPieces = [
        "a", "b", "/", "//", ".", "..", "./", "../", "esc", "up", "rel-esc", "root", "dangling", "loop", "chain", "secret",
        "real", "deeper", "back", "inside", "self", "deep", "inside-abs", "new", "\\", "..\\..", "%2e%2e", "%2F", "．．", "／",
        "∕", "\u{301}", "\u{200D}", "\u{FE0F}", "\u{20DD}", ".haul-", ".haul-3-z.part", "...", "~", "é", "\u{1}", "\u{7F}",
        String(repeating: "n", count: 255), String(repeating: "n", count: 256), String(repeating: "é", count: 128),
        giantGrapheme, "#",
    ]

    private static let urlStarts = [
        "http://", "https://", "HTTP://", "hTTpS://", "http:/", "http:", "http//", "//", "", "ftp://", "file://", "file:///",
        "javascript:", "http://user:pw@", "https://u@", "http://@", "\u{FEFF}http://", " http://", "ht\u{301}tp://",
    ]

    private static let hosts = [
        "e.org", "127.0.0.1", "E.ORG.", "a-b.c_d", "[::1]", "[::ffff:1.2.3.4]", "[::1", "[zz]", "é.org", "", ".", "e.org:8080",
        "e.org:0", "e.org:65536", "e.org:", "e.org:99999", "e.org:8o", "xn--e1a.org", "e..org", "[::1]:8443", "[::1]x",
    ]

    /// Unicode scalars that trouble path handling.
    private static let awkwardScalars: [Unicode.Scalar] = [
        "/", ".", "\\", " ", "\t", "\u{0}", "\u{1}", "\u{7F}", "\u{301}", "\u{20DD}", "\u{200D}", "\u{FE0F}", "\u{FF0E}",
        "\u{FF0F}", "\u{2215}", "\u{2044}", "\u{202E}", "\u{FEFF}", "\u{FFFD}", "\u{1F642}", "\u{10FFFF}", "é", "a", "%",
    ]

    private static func pick<T>(_ items: [T], _ random: inout SeededGenerator) -> T {
        items[Int(random.next() % UInt64(items.count))]
    }

    private static func join(_ pieces: [String], count: ClosedRange<Int>, _ random: inout SeededGenerator) -> String {
        let n = Int.random(in: count, using: &random)
        return (0..<n).map { _ in pick(pieces, &random) }.joined()
    }

    /// A string of awkward scalars, mixed with pieces.
    private static func awkwardText(_ pieces: [String], _ random: inout SeededGenerator) -> String {
        var text = ""
        for _ in 0..<Int.random(in: 1...10, using: &random) {
            if random.next() % 2 == 0 {
                text.unicodeScalars.append(pick(awkwardScalars, &random))
            } else {
                text += pick(pieces, &random)
            }
        }
        return text
    }

    private static func randomURL(_ random: inout SeededGenerator) -> String {
        // Mostly a well-formed start, so the paths and fields behind it get parsed too.
        if random.next() % 4 != 0 {
            return pick(["http://", "https://", "HTTPS://", "http://u:p@"], &random) + pick(["e.org", "127.0.0.1:8080", "[::1]"], &random)
                + "/" + join(cleanPathPieces, count: 0...5, &random)
        }
        return pick(urlStarts, &random) + pick(hosts, &random) + join(pathPieces, count: 0...6, &random)
    }

    private static let cleanPathPieces = pathPieces.filter { !$0.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F } }

    private static func randomField(_ random: inout SeededGenerator) -> String {
        let hex = Array("0123456789abcdefABCDEF")
        switch random.next() % 10 {
        case 0...3:
            return "out=" + (random.next() % 3 == 0 ? awkwardText(outPieces, &random) : join(outPieces, count: 0...6, &random))
        case 4:
            let algorithm = pick(Checksum.Algorithm.allCases, &random)
            return algorithm.rawValue + "=" + String((0..<algorithm.hexDigits).map { _ in pick(hex, &random) })
        case 5:
            return pick(Checksum.Algorithm.allCases, &random).rawValue + "="
                + String((0..<Int.random(in: 0...140, using: &random)).map { _ in pick(hex + ["g", "é", " "], &random) })
        case 6: return pick(["#", "# comment", "#out=../x", "foo=bar", "out", "OUT=x", "out:x", "sha256", "md5", "SHA1=0", "=", "out=="], &random)
        case 7: return randomURL(&random)
        default: return "out=" + pick(outPieces, &random) + "/" + pick(outPieces, &random)
        }
    }

    private static func randomLine(_ random: inout SeededGenerator) -> [UInt8] {
        var text = random.next() % 8 == 0 ? pick(["", " ", "\t", "#"], &random) : ""
        text += randomURL(&random)
        for _ in 0..<Int(random.next() % 4) {
            text += pick([" ", "\t", "  ", " \t "], &random) + randomField(&random)
        }
        var bytes = Array(text.utf8)
        // Byte-level damage: NULs, invalid UTF-8, separators and slashes in odd places.
        for _ in 0..<(random.next() % 4 == 0 ? Int(random.next() % 3) + 1 : 0) {
            let at = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count + 1))
            switch random.next() % 3 {
            case 0: bytes.insert(pick([0x00, 0x80, 0xC0, 0xC3, 0xE2, 0xED, 0xF0, 0xFF, 0x20, 0x09, 0x0D, 0x2F, 0x2E, 0x25], &random), at: at)
            case 1: if at < bytes.count { bytes.remove(at: at) }
            default: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
            }
        }
        return bytes
    }

    // MARK: - InputLine.parse

    func testFuzzedInputLinesAreRejectedOrSafe() throws {
        let fixture = try makeFixture()
        // Against the output folder and against a link to it, in turn.
        let resolvers = [DestinationResolver(directory: fixture.out), DestinationResolver(directory: fixture.linkedOut)]
        var random = SeededGenerator(seed: 0x1A7E_0001)
        let violations = Violations()
        var accepted = 0, acceptedWithOut = 0, blank = 0
        var rejections: [String: Int] = [:]
        for iteration in 0..<10_000 {
            let resolver = resolvers[iteration % 2]
            let bytes = Self.randomLine(&random)
            func shown() -> String { String(decoding: bytes, as: UTF8.self).debugDescription }
            let parsed: InputLine?
            do {
                parsed = try InputLine.parse(bytes, resolver: resolver)
            } catch {  // typed: only an InputLine.Rejection can be thrown
                XCTAssertFalse(error.description.isEmpty)
                rejections[Self.kind(error), default: 0] += 1
                continue
            }
            guard let parsed else { blank += 1; continue }
            accepted += 1
            if bytes.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 }).contains(where: { $0.starts(with: Array("out=".utf8)) }) {
                acceptedWithOut += 1
            }
            if bytes.contains(0) { violations.add("\(shown()): accepted with a NUL") }
            if String(validating: bytes, as: UTF8.self) == nil { violations.add("\(shown()): accepted invalid UTF-8") }
            let scheme = String(decoding: parsed.url.string.utf8.prefix { $0 != UInt8(ascii: ":") }, as: UTF8.self).lowercased()
            if !["http", "https"].contains(scheme) || scheme != parsed.url.scheme {
                violations.add("\(shown()): URL \(parsed.url.string) is not http(s)")
            }
            if parsed.url.string.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
                violations.add("\(shown()): URL with a space or control character")
            }
            if let checksum = parsed.checksum, checksum.hex.utf8.count != checksum.algorithm.hexDigits
                || !checksum.hex.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) {
                violations.add("\(shown()): \(checksum)")
            }
            if let why = Self.violation(of: parsed.destination, folder: resolver.directory, physicalFolder: fixture.physicalOut) {
                violations.add("\(shown()) → \(parsed.destination.debugDescription): \(why)")
            }
        }
        violations.assertNone("parsed lines")
        // The mix must reach the accepting paths, not only the rejections.
        XCTAssertGreaterThan(accepted, 2_000, "\(rejections)")
        XCTAssertGreaterThan(acceptedWithOut, 500)
        XCTAssertGreaterThan(blank, 50)
        for kind in ["containsNUL", "invalidUTF8", "url", "destination", "malformedChecksum", "duplicateChecksum", "unknownOption", "duplicateOption"] {
            XCTAssertGreaterThan(rejections[kind] ?? 0, 20, "\(kind) is barely exercised: \(rejections)")
        }
    }

    private static func kind(_ rejection: InputLine.Rejection) -> String {
        switch rejection {
        case .tooLong: return "tooLong"
        case .containsNUL: return "containsNUL"
        case .invalidUTF8: return "invalidUTF8"
        case .url: return "url"
        case .destination: return "destination"
        case .malformedChecksum: return "malformedChecksum"
        case .duplicateChecksum: return "duplicateChecksum"
        case .unknownOption: return "unknownOption"
        case .duplicateOption: return "duplicateOption"
        case .destinationTaken: return "destinationTaken"
        case .destinationKeyCollision: return "destinationKeyCollision"
        case .checksumConflict, .checksumTooLate: return "checksum"
        case .unsupportedAria2Option, .unsupportedAria2Checksum, .unreadableAria2Option, .aria2OptionWithoutURL, .aria2FolderOutside,
             .tooManyAria2Options: return "aria2"
        }
    }

    // MARK: - DestinationResolver

    func testFuzzedDestinationsStayInsideTheFolder() throws {
        let fixture = try makeFixture()
        let resolvers = [DestinationResolver(directory: fixture.out), DestinationResolver(directory: fixture.linkedOut)]
        var random = SeededGenerator(seed: 0xDE57_0001)
        let violations = Violations()
        var acceptedOut = 0, rejectedOut = 0
        for iteration in 0..<6_000 {
            let resolver = resolvers[iteration % 2]
            // Default names, from encoded URL paths.
            let path = random.next() % 2 == 0 ? Self.join(Self.pathPieces, count: 1...8, &random) : Self.awkwardText(Self.pathPieces, &random)
            if let url = try? HTTPURL("https://e.org/" + path) {
                do {
                    let destination = try resolver.defaultDestination(for: url)
                    if let why = Self.violation(of: destination, folder: resolver.directory, physicalFolder: fixture.physicalOut) {
                        violations.add("default name for \(url.string.debugDescription) → \(destination.debugDescription): \(why)")
                    } else if destination.utf8.dropFirst(resolver.directory.utf8.count + 1).contains(0x2F) {
                        violations.add("default name for \(url.string.debugDescription) → \(destination.debugDescription): not directly in the folder")
                    }
                } catch {
                    violations.add("default name for \(url.string.debugDescription) refused: \(error)")
                }
            }
            // out= paths. (A NUL cannot reach the resolver: InputLine.parse refuses it, and no
            // command-line argument can hold one.)
            let out = random.next() % 2 == 0 ? Self.join(Self.outPieces, count: 1...6, &random) : Self.awkwardText(Self.outPieces, &random)
            if out.utf8.contains(0) { continue }
            do {
                let destination = try resolver.destination(forOutPath: out)
                acceptedOut += 1
                if let why = Self.violation(of: destination, folder: resolver.directory, physicalFolder: fixture.physicalOut) {
                    violations.add("out=\(out.debugDescription) → \(destination.debugDescription): \(why)")
                }
            } catch {
                rejectedOut += 1
            }
        }
        violations.assertNone("destinations")
        XCTAssertGreaterThan(acceptedOut, 1_000)
        XCTAssertGreaterThan(rejectedOut, 1_000)
    }

    /// The host and path layouts put every file under folders named from the URL's host and path,
    /// each made safe; whatever the URL, the result stays inside the output folder, also where
    /// a host or a path segment is the name of a link leading out of it (then it is refused).
    func testFuzzedLaidOutDestinationsStayInsideTheFolder() throws {
        let fixture = try makeFixture()
        var random = SeededGenerator(seed: 0xDE57_0002)
        let violations = Violations()
        var accepted = 0, refused = 0
        let hosts = ["e.org", "esc", "up", "root", "self", "inside", "real", "e.org:8443", "[::1]:8080", "secret", "dangling"]
        for iteration in 0..<6_000 {
            let layout: DestinationResolver.Layout = iteration % 2 == 0 ? .host : .path
            let resolver = DestinationResolver(directory: iteration % 4 < 2 ? fixture.out : fixture.linkedOut, layout: layout)
            let path = random.next() % 2 == 0 ? Self.join(Self.pathPieces, count: 1...8, &random) : Self.awkwardText(Self.pathPieces, &random)
            guard let url = try? HTTPURL("https://\(hosts[Int(random.next() % UInt64(hosts.count))])/" + path) else { continue }
            do {
                let destination = try resolver.defaultDestination(for: url)
                accepted += 1
                if let why = Self.violation(of: destination, folder: resolver.directory, physicalFolder: fixture.physicalOut) {
                    violations.add("\(layout) for \(url.string.debugDescription) → \(destination.debugDescription): \(why)")
                }
            } catch {
                refused += 1
            }
        }
        violations.assertNone("laid-out destinations")
        XCTAssertGreaterThan(accepted, 1_000)
        XCTAssertGreaterThan(refused, 100, "links on the way are met and refused")
    }

    func testLayoutsNameFilesAfterHostAndPath() throws {
        let fixture = try makeFixture()
        func destination(_ url: String, _ layout: DestinationResolver.Layout) throws -> String {
            try DestinationResolver(directory: fixture.out, layout: layout).defaultDestination(for: try HTTPURL(url))
        }
        XCTAssertEqual(try destination("https://A.example/x/y/z.bin?q=1", .flat), fixture.out + "/z.bin")
        XCTAssertEqual(try destination("https://A.example/x/y/z.bin?q=1", .host), fixture.out + "/a.example/z.bin")
        XCTAssertEqual(try destination("https://a.example:8443/x/z.bin", .host), fixture.out + "/a.example:8443/z.bin")
        XCTAssertEqual(try destination("http://a.example:80/z", .host), fixture.out + "/a.example/z", "the default port is left out")
        XCTAssertEqual(try destination("https://a.example/x/y/z.bin", .path), fixture.out + "/a.example/x/y/z.bin")
        XCTAssertEqual(try destination("https://a.example/dir/", .path), fixture.out + "/a.example/dir/index.html")
        XCTAssertEqual(try destination("https://a.example/%2e%2e/%2E%2E/etc/passwd", .path), fixture.out + "/a.example/etc/passwd")
        XCTAssertEqual(try destination("https://a.example/a%2Fb/c", .path), fixture.out + "/a.example/a_b/c")
        XCTAssertThrowsError(try destination("https://esc/x", .host), "esc is a link out of the folder")
    }

    /// The cases the fuzzers above found, kept as plain examples.
    func testMarksThatFuseWithSlashesOrDotsHideNothing() throws {
        let fixture = try makeFixture()
        let resolver = DestinationResolver(directory: fixture.out)
        // "/" + a combining mark is one Character but still a "/" byte: the ".." before it must count.
        for out in ["../\u{301}x", "a/../\u{301}x", "../\u{200D}x", "esc/\u{301}x", "../\u{FE0F}"] {
            XCTAssertThrowsError(try resolver.destination(forOutPath: out), out.debugDescription)
        }
        XCTAssertThrowsError(try resolver.destination(forOutPath: "/\u{301}etc/passwd")) { error in
            XCTAssertEqual(error as? DestinationResolver.Rejection, .absoluteOutPath)
        }
        XCTAssertEqual(try resolver.destination(forOutPath: "a/\u{301}b"), fixture.out + "/a/\u{301}b")
        XCTAssertEqual(try resolver.destination(forOutPath: "\u{301}x"), fixture.out + "/\u{301}x", "a name may start with a mark")
        XCTAssertThrowsError(try resolver.destination(forOutPath: ".haul-\u{301}1-x.part"), "reserved by its bytes")
        // A name that is one long grapheme cluster is cut between its scalars, never to "", "." or "..".
        for path in [Self.giantGrapheme, "." + Self.giantGrapheme + ".", Self.giantGrapheme + ".", ".." + Self.giantGrapheme] {
            let encoded = path.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz")) ?? path
            let destination = try resolver.defaultDestination(for: try HTTPURL("https://e.org/" + encoded))
            XCTAssertNil(Self.violation(of: destination, folder: fixture.out, physicalFolder: fixture.physicalOut), destination.debugDescription)
            XCTAssertGreaterThan(destination.utf8.count - fixture.out.utf8.count - 1, 200, destination.debugDescription)
        }
    }

    // MARK: - Header parsers: what HTTPHeaderParsingTests' fuzz does not check

    /// delay-seconds against a reference: the number, saturated at `maximumDelay`.
    func testDelaySecondsMatchReference() {
        var random = SeededGenerator(seed: 0x8E7A_1200)
        let whitespace = ["", " ", "\t", "\r\n", " \t"]
        for _ in 0..<5_000 {
            let digits = String(repeating: "0", count: Int(random.next() % 4))
                + String((0..<Int.random(in: 1...24, using: &random)).map { _ in Character(String(random.next() % 10)) })
            let text = Self.pick(whitespace, &random) + digits + Self.pick(whitespace, &random)
            let significant = digits.drop { $0 == "0" }
            let expected: TimeInterval = significant.count > 10 ? RetryAfter.maximumDelay
                : min(TimeInterval(UInt64(significant.isEmpty ? "0" : String(significant))!), RetryAfter.maximumDelay)
            XCTAssertEqual(RetryAfter.delay(from: text, now: Date()), expected, text.debugDescription)
        }
    }

    /// Content-Length read as bytes against a reference written with Foundation: spaces and
    /// tabs trimmed, then digits only, within Int64.
    func testContentLengthMatchesReference() {
        var random = SeededGenerator(seed: 0xC0_17E7)
        let pieces = ["0", "1", "7", "9", "00", " ", "\t", "-", "+", "x", "1 2", "92233720368547758", "07", ""]
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...6, using: &random)).map { _ in Self.pick(pieces, &random) }.joined()
            let trimmed = text.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            let expected = !trimmed.isEmpty && trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) ? Int64(trimmed) : nil
            let head = ResponseHead(status: 200, headers: ["Content-Length": text], url: nil)
            XCTAssertEqual(head.contentLength, expected, text.debugDescription)
        }
    }

    /// Each HTTP-date form, written by the C library (not by `HTTPDate.format`), reads back as the
    /// instant it names, and as a Retry-After gives exactly the time left.
    func testHTTPDatesWrittenByTheCLibraryParseBack() {
        var random = SeededGenerator(seed: 0xDA7E_0003)
        for _ in 0..<2_500 {
            let now = TimeInterval(Int64.random(in: 0...3_000_000_000, using: &random)) + 0.5
            // Within 49 years before now: the two-digit RFC 850 year is then unambiguous.
            let seconds = Int64(now) - Int64.random(in: 0...(49 * 365 * 86_400), using: &random)
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            for form in ["%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"] {
                let text = Self.strftime(form, seconds)
                XCTAssertEqual(HTTPDate.parse(text, now: Date(timeIntervalSince1970: now)), date, text)
            }
            let ahead = TimeInterval(Int64.random(in: 1...(40 * 365 * 86_400), using: &random))
            let future = Self.strftime("%a, %d %b %Y %H:%M:%S GMT", Int64(now + ahead))
            XCTAssertEqual(RetryAfter.delay(from: future, now: Date(timeIntervalSince1970: now)), ahead - 0.5, future)
        }
    }

    private static func strftime(_ format: String, _ seconds: Int64) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        _ = gmtime_r(&clock, &parts)
        var buffer = [CChar](repeating: 0, count: 128)
        let count = Glibc.strftime(&buffer, buffer.count, format, &parts)  // the C locale: English names
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `bytes A-B/C` with random numbers (edges and overflow included) parses exactly when the
    /// numbers make a valid range, to exactly that range.
    func testContentRangeMatchesItsInvariants() {
        var random = SeededGenerator(seed: 0xC0_4A_6E)
        let edges: [String] = ["0", "1", "2", "999", "1000", "9223372036854775806", "9223372036854775807",
                               "9223372036854775808", "18446744073709551616", "00", "0001"]
        func number(_ random: inout SeededGenerator) -> String {
            random.next() % 3 == 0 ? Self.pick(edges, &random) : String(random.next() % 2_000)
        }
        var parsed = 0
        for _ in 0..<10_000 {
            let (a, b) = (number(&random), number(&random))
            let c = random.next() % 5 == 0 ? "*" : number(&random)
            let text = random.next() % 6 == 0 ? "bytes */\(c)" : "bytes \(a)-\(b)/\(c)"
            let first = text.hasPrefix("bytes */") ? nil : Int64(a)
            let last = text.hasPrefix("bytes */") ? nil : Int64(b)
            let complete = c == "*" ? nil : Int64(c)
            let overflow = (!text.hasPrefix("bytes */") && (first == nil || last == nil)) || (c != "*" && complete == nil)
            let expected = overflow ? nil : ContentRange(first: first, last: last, complete: complete)
            let actual = ContentRange.parse(text)
            XCTAssertEqual(actual, expected, text)
            if actual != nil { parsed += 1 }
        }
        XCTAssertGreaterThan(parsed, 2_000)
    }

    /// Header values as large as the transport lets through (curl's limit is 100 KiB; 64 KiB here) end
    /// promptly, whatever they hold.
    func testHugeHeaderValuesEndPromptly() {
        let size = 64 << 10
        let values = [
            String(repeating: "9", count: size), String(repeating: " ", count: size),
            String(repeating: " ", count: size) + "120" + String(repeating: "\t", count: size),
            "bytes " + String(repeating: "1", count: size) + "-2/3", "bytes 0-1/" + String(repeating: "0", count: size) + "5",
            String(repeating: "Sun, ", count: size / 5), String(repeating: "\u{301}", count: size / 2),
        ]
        let started = ContinuousClock.now
        for value in values {
            if let delay = RetryAfter.delay(from: value, now: Date()) {
                XCTAssertTrue((0...RetryAfter.maximumDelay).contains(delay))
            }
            _ = HTTPDate.parse(value)
            _ = ContentRange.parse(value)
        }
        XCTAssertEqual(ContentRange.parse("bytes 0-1/" + String(repeating: "0", count: size) + "5"),
                       ContentRange(first: 0, last: 1, complete: 5))
        XCTAssertEqual(RetryAfter.delay(from: String(repeating: " ", count: size) + "120" + String(repeating: "\t", count: size), now: Date()), 120)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(3))
    }
}
