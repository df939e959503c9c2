/// Parsed lines on their way into `JobQueue.add`, stored compactly.
///
/// All the texts of a batch share one byte buffer and every line is a fixed-size entry, so a
/// batch costs about 40 bytes a line plus its text (an `[InputLine]` costs about 600, in five
/// heap blocks a line), and handing it from the parsing thread to the writing thread moves three
/// buffers. The destination key and a batch-local host number are computed when a line is
/// appended, on the parsing thread, so the writing thread only binds and inserts.
struct JobBatch: Sendable {
    struct Entry: Sendable {
        /// Where the line's URL starts in `text`; its destination follows it, then its sha256.
        var offset: Int
        var urlLength: Int32
        var destinationLength: Int32
        /// 0, or 64 when the line gave a sha256.
        var sha256Length: Int32
        /// Index into `hosts`.
        var host: Int32
        /// `JobQueue.destinationKey(destination)`.
        var key: Int
    }

    private(set) var text: [UInt8] = []
    private(set) var entries: [Entry] = []
    /// The distinct host keys (`HTTPURL.hostKey`) of the batch, in order of first appearance.
    private(set) var hosts: [String] = []
    private var hostNumbers: [String: Int32] = [:]

    init() {}

    init(_ lines: [InputLine]) {
        entries.reserveCapacity(lines.count)
        for line in lines { append(line) }
    }

    mutating func reserve(entries count: Int, textBytes: Int) {
        entries.reserveCapacity(count)
        text.reserveCapacity(textBytes)
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    /// Bytes of text held: with `count`, what a batch costs in memory.
    var textBytes: Int { text.count }

    mutating func append(_ line: InputLine) {
        let host: Int32
        if let known = hostNumbers[line.url.hostKey] {
            host = known
        } else {
            host = Int32(hosts.count)
            hosts.append(line.url.hostKey)
            hostNumbers[line.url.hostKey] = host
        }
        let offset = text.count
        text.append(contentsOf: line.url.string.utf8)
        let urlLength = text.count - offset
        text.append(contentsOf: line.destination.utf8)
        let destinationLength = text.count - offset - urlLength
        var sha256Length = 0
        if let sha256 = line.sha256 {
            text.append(contentsOf: sha256.utf8)
            sha256Length = text.count - offset - urlLength - destinationLength
        }
        let key = text.withUnsafeBufferPointer {
            JobQueue.destinationKey(UnsafeBufferPointer(rebasing: $0[(offset + urlLength)..<(offset + urlLength + destinationLength)]))
        }
        entries.append(Entry(offset: offset, urlLength: Int32(urlLength), destinationLength: Int32(destinationLength),
                             sha256Length: Int32(sha256Length), host: host, key: key))
    }

    func url(_ index: Int) -> String {
        let entry = entries[index]
        return string(entry.offset, Int(entry.urlLength))
    }

    func destination(_ index: Int) -> String {
        let entry = entries[index]
        return string(entry.offset + Int(entry.urlLength), Int(entry.destinationLength))
    }

    private func string(_ start: Int, _ count: Int) -> String {
        text.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[start..<(start + count)]), as: UTF8.self) }
    }
}
