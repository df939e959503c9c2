import Foundation

/// A pseudo-terminal for end-to-end tests of what haul shows a person: a child started on it
/// has a terminal for stdout and stderr (`isatty` is true, `TIOCGWINSZ` answers), of a size the
/// test sets and can change while the child runs.
///
/// Guarantees: everything the child writes is kept, in order, until the child and every copy
/// of the terminal's other end have closed it; `waitForOutput` is woken by each chunk, not by
/// polling; `resize` takes effect for the child's next size query.
public final class PseudoTerminal: Sendable {
    public let master: Int32
    private let slavePath: String
    private let output = Locked((data: Data(), closed: false))

    public init(columns: Int, rows: Int) throws {
        // posix_openpt, unlockpt and ptsname are not visible to Swift's Glibc module, so what
        // they do on Linux is done here: open the multiplexer, unlock, ask the number.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, Self.TIOCSPTLCK, &unlock) == 0, ioctl(master, Self.TIOCGPTN, &number) == 0 else {
            let code = POSIXErrorCode(rawValue: errno) ?? .EIO
            if master >= 0 { close(master) }
            throw POSIXError(code)
        }
        let name = "/dev/pts/\(number)"
        self.master = master
        slavePath = name
        resize(columns: columns, rows: rows)
    }

    deinit { close(master) }

    /// `_IOW('T', 0x31, int)` and `_IOR('T', 0x30, unsigned int)` from <asm-generic/ioctls.h>
    /// (function-like macros, which Swift does not import).
    private static let TIOCSPTLCK: UInt = 0x4004_5431
    private static let TIOCGPTN: UInt = 0x8004_5430

    public func resize(columns: Int, rows: Int) {
        var size = winsize(ws_row: UInt16(rows), ws_col: UInt16(columns), ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
    }

    /// Starts `executable` with this terminal as its stdout and stderr (stdin: /dev/null).
    public func start(_ executable: URL, _ arguments: [String], environment: [String: String],
                      currentDirectory: String) throws -> RunningProcess {
        let slave = open(slavePath, O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let handle = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        let running = try HaulProcess.start(executable, arguments, environment: environment, currentDirectory: currentDirectory,
                                            stdout: .handle(handle), stderr: .handle(handle))
        try handle.close()  // the child holds its own copies: reads end when it exits
        let master = self.master
        let output = self.output
        running.group.enter()
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(master, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }  // EIO: every copy of the slave side is closed
                output.update { $0.data.append(contentsOf: buffer[0..<count]) }
            }
            output.update { $0.closed = true }
            running.group.leave()
        }
        return running
    }

    /// What was written so far.
    public var data: Data { output.withLock { $0.data } }

    public var text: String { String(decoding: data, as: UTF8.self) }

    /// Waits until what was written satisfies `predicate` (true), or the terminal is closed or
    /// `timeout` passes first (false).
    @discardableResult
    public func waitForOutput(timeout: TimeInterval = 20, _ predicate: @escaping (String) -> Bool) -> Bool {
        var result = false
        output.wait(timeout: timeout) { state in
            result = predicate(String(decoding: state.data, as: UTF8.self))
            return result || state.closed
        }
        return result
    }
}
