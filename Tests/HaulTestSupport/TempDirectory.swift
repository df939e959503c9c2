import Foundation

/// A fresh, private directory for one test's files, removed with everything in it by `remove()`.
///
/// Made with `mkdtemp`, so two tests (or two test processes) never share one.
public final class TempDirectory: Sendable {
    /// The directory's absolute path, with symbolic links resolved (so paths compare equal to
    /// what `realpath` returns).
    public let path: String

    public init(prefix: String = "haul-test") throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/" + prefix + ".XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: base, NSLocalizedDescriptionKey:
                "mkdtemp failed: \(String(cString: strerror(errno)))"])
        }
        let raw = String(cString: made)
        if let resolved = realpath(raw, nil) {
            path = String(cString: resolved)
            free(resolved)
        } else {
            path = raw
        }
    }

    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    /// The absolute path of `name` inside the directory (not created).
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `data` to `name` inside the directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ data: Data) throws -> String {
        let target = file(name)
        try data.write(to: URL(fileURLWithPath: target))
        return target
    }

    /// Creates a sub-directory (and its parents) and returns its path.
    @discardableResult
    public func makeDirectory(_ name: String) throws -> String {
        let target = file(name)
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        return target
    }

    /// The names in the directory, sorted (not recursive).
    public func contents() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// Removes the directory and everything in it. Symbolic links are removed, never followed.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// SplitMix64: a tiny seeded generator, so random test inputs are the same on every run.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count + 8)
        while result.count < count {
            var word = next()
            for _ in 0..<8 { result.append(UInt8(truncatingIfNeeded: word)); word >>= 8 }
        }
        result.removeLast(result.count - count)
        return result
    }
}
