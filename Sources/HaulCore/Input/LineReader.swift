import Foundation

/// Reads a file descriptor line by line in fixed-size chunks.
///
/// Guarantees: memory stays bounded by the chunk size plus `maximumLineLength`, whatever the
/// input; a longer line is reported by its length and skipped, not buffered; `\r\n` endings
/// are accepted; line numbers start at 1.
public struct LineReader {
    public enum Line {
        case bytes([UInt8])
        /// The line was longer than the limit; its length in bytes.
        case tooLong(Int)
    }

    public let maximumLineLength: Int
    private let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var bufferStart = 0
    private var bufferEnd = 0
    private var atEnd = false
    /// The index of the buffer's last newline, or -1: a whole line is buffered while it is at or
    /// after `bufferStart`.
    private var lastNewline = -1
    public private(set) var lineNumber = 0

    public init(descriptor: Int32, maximumLineLength: Int = 16 * 1024) {
        self.descriptor = descriptor
        self.maximumLineLength = maximumLineLength
    }

    /// The next line without its terminator, or nil at the end of the input.
    public mutating func next() throws -> Line? {
        var pending: [UInt8] = []
        var overflow = 0  // bytes seen of a line already known to be too long
        while true {
            if bufferStart < bufferEnd {
                let end = buffer[bufferStart..<bufferEnd].firstIndex(of: 0x0A)
                let chunkEnd = end ?? bufferEnd
                let length = chunkEnd - bufferStart
                if overflow > 0 || pending.count + length > maximumLineLength {
                    if overflow == 0 { overflow = pending.count }
                    overflow += length
                    pending = []
                } else {
                    pending.append(contentsOf: buffer[bufferStart..<chunkEnd])
                }
                bufferStart = chunkEnd
                if end != nil {
                    bufferStart += 1
                    return finish(pending, overflow: overflow)
                }
            }
            if atEnd {
                if pending.isEmpty && overflow == 0 { return nil }
                return finish(pending, overflow: overflow)
            }
            try fill()
        }
    }

    /// Whether `next()` would now wait for input: no whole line is buffered, the input has not
    /// ended, and the descriptor has nothing to read within `milliseconds` (a pipe whose writer
    /// is slower than this reader). A regular file never makes it wait.
    public func wouldWait(milliseconds: Int32 = 0) -> Bool {
        if atEnd || (bufferStart < bufferEnd && lastNewline >= bufferStart) { return false }
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&poller, 1, milliseconds)
            if ready >= 0 || errno != EINTR { return ready == 0 }
        }
    }

    private mutating func finish(_ line: [UInt8], overflow: Int) -> Line {
        lineNumber += 1
        if overflow > 0 { return .tooLong(overflow) }
        var line = line[...]
        // A UTF-8 byte order mark (as some editors write) before the first line is not part of it.
        if lineNumber == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line = line.dropFirst(3) }
        if line.last == 0x0D { line = line.dropLast() }
        return .bytes(Array(line))
    }

    private mutating func fill() throws {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { return }
            throw InputError.readFailed(String(cString: strerror(errno)))
        }
        bufferStart = 0
        bufferEnd = count
        lastNewline = buffer[..<count].lastIndex(of: 0x0A) ?? -1
        if count == 0 { atEnd = true }
    }
}

/// An input that cannot be read at all (as opposed to a bad line, which is rejected alone).
public enum InputError: Error, CustomStringConvertible, Sendable {
    case readFailed(String)
    case cannotOpen(path: String, reason: String)

    public var description: String {
        switch self {
        case .readFailed(let reason): return "cannot read the input: \(reason)"
        case .cannotOpen(let path, let reason): return "cannot open \(path): \(reason)"
        }
    }
}
