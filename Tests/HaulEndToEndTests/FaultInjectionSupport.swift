import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// A small tmpfs mounted over a test folder, so a test can fill a disk and free it again.
///
/// Needs the right to mount (root, or CAP_SYS_ADMIN); `mount(at:bytes:)` throws `XCTSkip`
/// when it is not there. Always `unmount()` it (in a `defer`) before the folder is removed.
final class SmallDisk {
    let path: String
    private var mounted = true
    private static let fillerName = ".filler"

    private init(path: String) { self.path = path }

    /// Mounts a tmpfs of `bytes` over the existing, empty folder `path`.
    static func mount(at path: String, bytes: Int) throws -> SmallDisk {
        let rc = Glibc.mount("tmpfs", path, "tmpfs", 0, "size=\(bytes),mode=0755")
        guard rc == 0 else {
            throw XCTSkip("cannot mount a tmpfs at \(path) (\(String(cString: strerror(errno)))); disk-full tests need root or CAP_SYS_ADMIN")
        }
        return SmallDisk(path: path)
    }

    /// Unmounts (lazily if busy). Idempotent.
    func unmount() {
        guard mounted else { return }
        mounted = false
        if umount2(path, 0) != 0 { _ = umount2(path, Int32(MNT_DETACH)) }
    }

    deinit { unmount() }

    /// Remounts the file system read-only (`readOnly`) or read-write again.
    func remount(readOnly: Bool) throws {
        let flags = UInt(MS_REMOUNT) | (readOnly ? UInt(MS_RDONLY) : 0)
        guard Glibc.mount("tmpfs", path, "tmpfs", flags, nil) == 0 else {
            throw XCTSkip("cannot remount \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Bytes still free for an ordinary user of the file system.
    var available: Int {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return 0 }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// Writes a filler file so that about `leaving` bytes stay free (0: the disk is full).
    func fill(leaving: Int) throws {
        let fd = open(path + "/" + Self.fillerName, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5A, count: 4096)
        while available > leaving {
            let want = min(chunk.count, max(available - leaving, 1))
            let count = chunk.withUnsafeBytes { write(fd, $0.baseAddress, want) }
            if count <= 0 { break }  // ENOSPC: full
        }
    }

    /// Removes the filler file, giving its space back.
    func free() {
        unlink(path + "/" + Self.fillerName)
    }
}

/// How a test runs `haul` under a restriction: as a user that cannot override file permissions,
/// with a file-size limit, or with a umask.
enum Restricted {
    static let setpriv = "/usr/bin/setpriv"
    static let prlimit = "/usr/bin/prlimit"

    /// The capabilities that let root write files whatever their modes.
    private static let overrides = "-dac_override,-dac_read_search,-fowner"

    /// The executable and arguments that run `haul ARGUMENTS` without the power to write a file
    /// or folder its modes forbid: as is for an ordinary user; for root, through setpriv with the
    /// override capabilities dropped. Throws `XCTSkip` when root and setpriv is missing or does
    /// not take the power away.
    static func withoutOverride(_ haul: URL, _ arguments: [String], probe: String) throws -> (URL, [String]) {
        guard geteuid() == 0 else { return (haul, arguments) }
        guard FileManager.default.isExecutableFile(atPath: setpriv) else {
            throw XCTSkip("running as root, and \(setpriv) is missing to drop CAP_DAC_OVERRIDE")
        }
        let prefix = ["--inh-caps=\(overrides)", "--bounding-set=\(overrides)", "--"]
        // The probe must really be unwritable for the dropped-capability process.
        let check = try HaulProcess.run(URL(fileURLWithPath: setpriv), prefix + ["/usr/bin/test", "-w", probe], timeout: 10)
        guard check.status == 1 else {
            throw XCTSkip("setpriv could not take away root's power to write \(probe) (test -w gave \(check.status))")
        }
        return (URL(fileURLWithPath: setpriv), prefix + [haul.path] + arguments)
    }

    /// `sh -c 'umask MASK; exec haul ARGUMENTS'`.
    static func withUmask(_ mask: String, _ haul: URL, _ arguments: [String]) -> (URL, [String]) {
        (URL(fileURLWithPath: "/bin/sh"), ["-c", "umask \(mask) && exec \"$0\" \"$@\"", haul.path] + arguments)
    }

    /// `prlimit --fsize=BYTES haul ARGUMENTS`: no file can grow past `bytes`. Throws `XCTSkip`
    /// when prlimit is missing.
    static func withFileSizeLimit(_ bytes: Int, _ haul: URL, _ arguments: [String]) throws -> (URL, [String]) {
        guard FileManager.default.isExecutableFile(atPath: prlimit) else {
            throw XCTSkip("\(prlimit) (util-linux) is missing")
        }
        return (URL(fileURLWithPath: prlimit), ["--fsize=\(bytes)", "--", haul.path] + arguments)
    }
}

extension XCTestCase {
    /// Runs an (executable, arguments) pair made by `Restricted` and waits for it.
    func run(_ command: (URL, [String]), in directory: String? = nil, environment: [String: String] = [:],
             timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line) throws -> ProcessResult {
        let result = try HaulProcess.run(command.0, command.1, environment: HaulProcess.environment(environment),
                                         currentDirectory: directory, timeout: timeout)
        XCTAssertFalse(result.timedOut, "\(command.1.suffix(4).joined(separator: " ")) ran past \(timeout) s", file: file, line: line)
        return result
    }

    /// Asserts a command failed the way a database or disk problem must: exit 1, exactly one
    /// line on stderr, naming `path` and holding every one of `phrases`.
    func assertOneLineFailure(_ result: ProcessResult, naming path: String, _ phrases: [String], _ what: String,
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 1, "\(what): exit \(result.status); stderr: \(result.stderrText)", file: file, line: line)
        XCTAssertEqual(result.stderrLines.count, 1, "\(what): one clear line, got: \(result.stderrText)", file: file, line: line)
        let text = result.stderrText
        XCTAssertTrue(text.hasPrefix("haul: "), "\(what): \(text)", file: file, line: line)
        XCTAssertTrue(text.contains(path), "\(what): the message does not name \(path): \(text)", file: file, line: line)
        for phrase in phrases {
            XCTAssertTrue(text.contains(phrase), "\(what): no '\(phrase)' in: \(text)", file: file, line: line)
        }
        XCTAssertFalse(text.contains("SQLite error") && !text.contains(path), "\(what): a bare SQLite error: \(text)", file: file, line: line)
    }

    /// The permission bits of `path` (lstat), or nil when it does not exist.
    func mode(_ path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int(info.st_mode & 0o7777)
    }

    /// The names in `folder` (not recursive), sorted.
    func names(in folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
    }
}
