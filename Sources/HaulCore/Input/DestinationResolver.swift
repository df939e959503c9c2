import Foundation

/// Turns a URL, or a user's `out=` path, into an absolute destination inside the output folder.
///
/// Guarantees: the result is always strictly inside `directory` — lexically (no `..`, no
/// absolute `out=`, no `/`, `\` or NUL smuggled in through percent-encoding, no control
/// character in an `out=` or `dir=`) and physically
/// (no existing symbolic link on the way leads outside). No file name is `.`, `..`, empty,
/// longer than 255 bytes, or starts with haul's temp-file prefix.
public struct DestinationResolver: Sendable {
    public enum Rejection: Error, Equatable, CustomStringConvertible, Sendable {
        case absoluteOutPath
        case escapesDirectory
        case nameTooLong(Int)
        case pathTooLong(Int)
        case emptyOutPath
        case reservedName(String)
        case controlCharacter(UInt8)

        public var description: String {
            switch self {
            case .absoluteOutPath: return "out= must be a path relative to the output folder, not an absolute path"
            case .escapesDirectory: return "destination outside the output folder"
            case .nameTooLong(let bytes): return "file name too long (\(bytes) bytes; the limit is 255)"
            case .pathTooLong(let bytes): return "destination path too long (\(bytes) bytes; the limit is 4095)"
            case .emptyOutPath: return "out= names no file"
            case .reservedName(let name): return "file name '\(name)' is reserved for haul's temp files"
            case .controlCharacter(let byte): return "the path given (out= or dir=) holds a control character (\(DestinationResolver.notation(ofControl: byte))); file names from a list may not"
            }
        }
    }

    /// The first control character in a path's UTF-8 `bytes` (C0, DEL, or the second byte of a
    /// C1 control, U+0080–U+009F, which some terminals act on too), or nil.
    public static func controlCharacter<Bytes: Collection<UInt8>>(in bytes: Bytes) -> UInt8? {
        var previous: UInt8 = 0
        for byte in bytes {
            if byte < 0x20 || byte == 0x7F { return byte }
            if previous == 0xC2 && (0x80...0x9F).contains(byte) { return byte }
            previous = byte
        }
        return nil
    }

    /// A control character as `controlCharacter(in:)` returns it, written for a message: `\x0A`
    /// for C0 and DEL, `U+0085` for C1 (`byte` the second byte of its UTF-8).
    public static func notation(ofControl byte: UInt8) -> String {
        (byte < 0x80 ? "\\x" : "U+00") + String(format: "%02X", byte)
    }

    /// How files without `out=` are laid out in the output folder (`--layout`).
    public enum Layout: String, CaseIterable, Sendable {
        /// `DIR/NAME`: the URL's last path segment.
        case flat
        /// `DIR/HOST/NAME` (`HOST:PORT` when the port is not the scheme's default).
        case host
        /// `DIR/HOST/PATH/NAME`: the URL's whole path, as `wget -x` lays it out.
        case path
    }

    /// Names starting with this prefix are haul's own temp files.
    public static let tempPrefix = ".haul-"

    /// The output folder, absolute and standardised (`.` and `..` removed).
    public let directory: String
    /// The same folder with symbolic links resolved, when it exists.
    private let physicalDirectory: String
    public let layout: Layout

    public init(directory: String, layout: Layout = .flat) {
        let absolute = directory.hasPrefix("/") ? directory
            : FileManager.default.currentDirectoryPath + "/" + directory
        self.directory = Self.standardise(absolute)
        self.physicalDirectory = self.directory.realPath ?? self.directory
        self.layout = layout
    }

    /// The destination for `url` when the line gives no `out=`: its last path segment,
    /// percent-decoded and made safe, or `index.html` when there is none; under a folder for
    /// its host (and the folders of its path) in the `host` (`path`) layout.
    public func defaultDestination(for url: HTTPURL) throws(Rejection) -> String {
        guard layout == .flat else { return try laidOutDestination(for: url) }
        var path = url.path
        let destination = path.withUTF8 { path in
            let segment = path.lastIndex(of: Self.slash).map { path[($0 + 1)...] } ?? path[...]
            if Self.isPlainFileName(segment) { return joined(UnsafeBufferPointer(rebasing: segment)) }
            var name = Self.safeFileName(fromEncoded: Array(segment))
            return name.withUTF8 { joined($0) }
        }
        guard destination.utf8.count <= 4095 else { throw .pathTooLong(destination.utf8.count) }
        return destination  // directly inside the folder: no link on the way to check
    }

    /// `defaultDestination` for the `host` and `path` layouts: every folder name made safe as a
    /// file name is, then checked as an `out=` path is (no link on the way may lead outside).
    private func laidOutDestination(for url: HTTPURL) throws(Rejection) -> String {
        let defaultPort = url.scheme == "https" ? 443 : 80
        var folders = [Self.safeFileName(fromEncoded: Array((url.port == defaultPort ? url.host : url.hostKey).utf8))]
        let segments = Array(url.path.utf8).split(separator: Self.slash, omittingEmptySubsequences: false)
        if layout == .path {
            for segment in segments.dropFirst().dropLast() {
                // An empty, "." or ".." segment (even percent-encoded) names no folder: skipped.
                let folder = Self.safeFileName(fromEncoded: Array(segment))
                if folder != "index.html" || segment.elementsEqual("index.html".utf8) { folders.append(folder) }
            }
        }
        let name = Self.safeFileName(fromEncoded: Array(segments.last ?? []))
        let path = (directory == "/" ? "" : directory) + "/" + (folders + [name]).joined(separator: "/")
        return try check(path)
    }

    /// `directory/name`, in one allocation.
    private func joined(_ name: UnsafeBufferPointer<UInt8>) -> String {
        let folder = directory == "/" ? "" : directory
        let count = folder.utf8.count + 1 + name.count
        return String(unsafeUninitializedCapacity: count) { (buffer: UnsafeMutableBufferPointer<UInt8>) -> Int in
            var end = buffer.initialize(fromContentsOf: folder.utf8)
            buffer[end] = Self.slash
            end += 1
            _ = UnsafeMutableBufferPointer(rebasing: buffer[end...]).initialize(fromContentsOf: name)
            return count
        }
    }

    /// Whether `safeFileName(fromEncoded:)` would return `segment` unchanged: 1 to 255 printable
    /// ASCII bytes with nothing to decode or replace (no `%`, `/` or `\`), not `.` or `..`, and
    /// not a temp-file name.
    static func isPlainFileName(_ segment: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        guard !segment.isEmpty, segment.count <= 255 else { return false }
        for byte in segment where byte <= 0x20 || byte >= 0x7F
            || byte == UInt8(ascii: "%") || byte == slash || byte == UInt8(ascii: "\\") {
            return false
        }
        if segment.elementsEqual(dot) || segment.elementsEqual(dotDot) { return false }
        return !segment.starts(with: tempPrefix.utf8)
    }

    /// The destination for an `out=` path given by the user.
    public func destination(forOutPath out: String) throws(Rejection) -> String {
        // Paths are split and compared as UTF-8 bytes, as the file system reads them: as
        // Characters, a combining mark after "/" fuses with it ("/\u{301}" is one Character), so
        // "../\u{301}x" would not split and its ".." would pass.
        let bytes = Array(out.utf8)
        guard bytes.first != Self.slash else { throw .absoluteOutPath }
        // A control character in a name would reach terminals (`list`, `run`'s lines) raw, and
        // a NUL would end the name early on disk.
        if let control = Self.controlCharacter(in: bytes) { throw .controlCharacter(control) }
        var components: [String] = []
        for component in bytes.split(separator: Self.slash, omittingEmptySubsequences: true) {
            if component.elementsEqual(Self.dot) { continue }
            if component.elementsEqual(Self.dotDot) { throw .escapesDirectory }
            components.append(String(decoding: component, as: UTF8.self))
        }
        guard !components.isEmpty else { throw .emptyOutPath }
        for component in components where component.utf8.count > 255 { throw .nameTooLong(component.utf8.count) }
        return try check((directory == "/" ? "" : directory) + "/" + components.joined(separator: "/"))
    }

    /// Final checks on a lexically built path: its length, its name, and that no symbolic link
    /// already on disk leads out of the output folder.
    private func check(_ path: String) throws(Rejection) -> String {
        guard path.utf8.count <= 4095 else { throw .pathTooLong(path.utf8.count) }
        let bytes = Array(path.utf8)
        let name = bytes.split(separator: Self.slash).last ?? []
        if name.starts(with: Self.tempPrefix.utf8) { throw .reservedName(String(decoding: name, as: UTF8.self)) }
        guard bytes.starts(with: (directory + "/").utf8) || (directory == "/" && bytes.count > 1) else { throw .escapesDirectory }
        // Walk the existing folders between the output folder and the file.
        let relative = bytes.dropFirst(directory == "/" ? 1 : directory.utf8.count + 1).split(separator: Self.slash)
        var current = directory
        for component in relative.dropLast() {
            current += "/" + String(decoding: component, as: UTF8.self)
            var info = stat()
            guard lstat(current, &info) == 0 else { break }  // the rest does not exist yet
            if (info.st_mode & S_IFMT) == S_IFLNK {
                guard let resolved = current.realPath,
                      resolved == physicalDirectory || resolved.hasPrefix(physicalDirectory + "/")
                else { throw .escapesDirectory }
            }
        }
        return path
    }

    /// A file name made from a percent-encoded URL path segment.
    static func safeFileName(fromEncoded segment: [UInt8]) -> String {
        var bytes = segment.contains(UInt8(ascii: "%")) ? percentDecode(segment) : segment
        if String(validating: bytes, as: UTF8.self) == nil { bytes = segment }  // keep it encoded
        for index in bytes.indices where bytes[index] < 0x20 || bytes[index] == 0x7F
            || bytes[index] == UInt8(ascii: "/") || bytes[index] == UInt8(ascii: "\\") {
            bytes[index] = UInt8(ascii: "_")
        }
        var name = String(decoding: bytes, as: UTF8.self)
        if name.isEmpty || name == "." || name == ".." { return "index.html" }
        if name.utf8.starts(with: tempPrefix.utf8) { name = "_" + name }
        return truncated(name, toBytes: 255)
    }

    /// Shortens `name` to at most `limit` UTF-8 bytes on a character boundary, keeping a short
    /// extension.
    static func truncated(_ name: String, toBytes limit: Int) -> String {
        guard name.utf8.count > limit else { return name }
        var stem = Substring(name)
        var suffix = ""
        if let dot = name.lastIndex(of: "."), name.utf8.distance(from: dot, to: name.utf8.endIndex) <= 16, dot != name.startIndex {
            stem = name[..<dot]
            suffix = String(name[dot...])
        }
        var result = ""
        for character in stem {
            if result.utf8.count + character.utf8.count + suffix.utf8.count > limit {
                // A character too long to fit whole (a grapheme cluster can be any length) is cut
                // between its scalars, so the name never shrinks to "", "." or "..".
                for scalar in character.unicodeScalars {
                    if result.utf8.count + UTF8.width(scalar) + suffix.utf8.count > limit { break }
                    result.unicodeScalars.append(scalar)
                }
                break
            }
            result.append(character)
        }
        return result + suffix
    }

    static func percentDecode(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }

    /// `/a/./b/../c` → `/a/c`, without touching the disk.
    static func standardise(_ path: String) -> String {
        var parts: [ArraySlice<UInt8>] = []
        for component in Array(path.utf8).split(separator: slash) {
            if component.elementsEqual(dot) { continue }
            if component.elementsEqual(dotDot) { if !parts.isEmpty { parts.removeLast() }; continue }
            parts.append(component)
        }
        return "/" + parts.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
    }

    private static let slash = UInt8(ascii: "/")
    private static let dot = [UInt8(ascii: ".")]
    private static let dotDot = [UInt8(ascii: "."), UInt8(ascii: ".")]
}
