import Foundation

/// Output for commands that print many lines (`haul export`): bytes gather in a buffer and go
/// out in chunks of `capacity` bytes, one write(2) each, not one per line.
///
/// Guarantees: bytes reach the descriptor whole and in the order they were appended (a short
/// write is continued, EINTR retried); when the reader has gone (EPIPE), haul ends quietly as
/// `Console` ends it; any other write error (a full disk, a file-size limit) is thrown as one
/// `CommandFailure` naming the output and saying what to do, and nothing more is written after
/// it. `finish()` writes what is left and, for a file it opened, closes it, reporting a late
/// error from close(2). Not thread-safe: one command's output, written from one thread.
final class BufferedOutput {
    /// How the output is named in errors: the path, or "standard output".
    let name: String
    private let descriptor: Int32
    private let capacity: Int
    private var buffer: [UInt8] = []
    private var failed = false
    /// Whether the descriptor this output opened is still open.
    private var isOpen: Bool

    private init(descriptor: Int32, name: String, ownsDescriptor: Bool, capacity: Int) {
        self.descriptor = descriptor
        self.name = name
        isOpen = ownsDescriptor
        self.capacity = max(1, capacity)
        buffer.reserveCapacity(self.capacity + 4096)
    }

    deinit {
        if isOpen { _ = Glibc.close(descriptor) }
    }

    /// The chunk size: large enough that a million lines cost a few thousand writes.
    static let defaultCapacity = 256 * 1024

    static func standardOutput(capacity: Int = defaultCapacity) -> BufferedOutput {
        BufferedOutput(descriptor: STDOUT_FILENO, name: "standard output", ownsDescriptor: false, capacity: capacity)
    }

    /// Creates (or empties) the file at `path` for writing, with the mode the umask leaves of
    /// 0666, as a shell's `>` does.
    static func create(path: String, capacity: Int = defaultCapacity) throws -> BufferedOutput {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            let code = errno
            throw CommandFailure(message: "cannot write \(path): \(String(cString: strerror(code)))\(openAdvice(code))")
        }
        return BufferedOutput(descriptor: fd, name: path, ownsDescriptor: true, capacity: capacity)
    }

    /// Appends `text`; writes a chunk once `capacity` bytes have gathered.
    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= capacity { try flush() }
    }

    /// Appends `bytes` through `body`, which writes straight into the buffer (no String in
    /// between); writes a chunk once `capacity` bytes have gathered.
    func append(_ body: (inout [UInt8]) -> Void) throws {
        body(&buffer)
        if buffer.count >= capacity { try flush() }
    }

    /// Writes everything gathered so far.
    func flush() throws {
        guard !failed else { buffer.removeAll(keepingCapacity: true); return }
        defer { buffer.removeAll(keepingCapacity: true) }
        try buffer.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count >= 0 { offset += count; continue }
                let code = errno
                if code == EINTR || code == EAGAIN { continue }
                if code == EPIPE { Console.readerGone() }
                failed = true
                throw CommandFailure(message: "cannot write \(name): \(String(cString: strerror(code)))\(Self.writeAdvice(code))")
            }
        }
    }

    /// Writes what is left and closes a file this output opened.
    func finish() throws {
        try flush()
        guard isOpen else { return }
        isOpen = false
        if Glibc.close(descriptor) != 0 {
            let code = errno
            throw CommandFailure(message: "cannot write \(name): \(String(cString: strerror(code)))\(Self.writeAdvice(code))")
        }
    }

    private static func openAdvice(_ code: Int32) -> String {
        switch code {
        case ENOENT: return "; does its folder exist?"
        case EACCES, EPERM: return "; choose a folder you can write to"
        case EISDIR: return "; name a file, not a folder"
        case EROFS: return "; the file system is read-only: choose another place"
        default: return ""
        }
    }

    private static func writeAdvice(_ code: Int32) -> String {
        switch code {
        case ENOSPC, EDQUOT: return "; free some space and export again"
        case EFBIG: return "; the file reached the size limit (ulimit -f)"
        default: return ""
        }
    }
}
