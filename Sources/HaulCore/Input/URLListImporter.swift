/// Feeds URL-list lines into a `JobQueue` in large transactions.
///
/// Guarantees: every line is either queued, recognised as already queued, or rejected with its
/// line number and reason — a bad line never stops the others; memory is bounded by the batch
/// size, whatever the input's length; a batch that is committed stays committed even if a later
/// one fails (the error is thrown, the earlier lines are kept).
public struct URLListImporter {
    /// Counts for the user.
    public struct Summary: Sendable, Equatable {
        public var added = 0
        public var alreadyQueued = 0
        public var rejected = 0
        public init() {}
    }

    public let queue: JobQueue
    public let resolver: DestinationResolver
    public let batchSize: Int
    public let maximumLineLength: Int
    public let maxAttempts: Int
    /// Called for every rejected line with its number and reason, in line order.
    public let onRejection: (_ line: Int, _ reason: InputLine.Rejection, _ text: String?) -> Void

    public init(queue: JobQueue, resolver: DestinationResolver, batchSize: Int = 50_000,
                maximumLineLength: Int = 16 * 1024, maxAttempts: Int = 5,
                onRejection: @escaping (_ line: Int, _ reason: InputLine.Rejection, _ text: String?) -> Void) {
        self.queue = queue
        self.resolver = resolver
        self.batchSize = batchSize
        self.maximumLineLength = maximumLineLength
        self.maxAttempts = maxAttempts
        self.onRejection = onRejection
    }

    /// Imports every line readable from `descriptor`.
    public func importLines(from descriptor: Int32, into summary: inout Summary) throws {
        var reader = LineReader(descriptor: descriptor, maximumLineLength: maximumLineLength)
        var batch = Batch(importer: self)
        while let line = try reader.next() {
            switch line {
            case .tooLong(let length):
                batch.reject(reader.lineNumber, .tooLong(length, limit: maximumLineLength), text: nil)
            case .bytes(let bytes):
                batch.take(bytes, lineNumber: reader.lineNumber)
            }
            if batch.size >= batchSize { try batch.flush(into: &summary) }
        }
        try batch.flush(into: &summary)
    }

    /// Imports lines given as strings (command-line arguments), numbered from 1.
    public func importLines(_ lines: [String], into summary: inout Summary) throws {
        var batch = Batch(importer: self)
        for (index, line) in lines.enumerated() {
            let bytes = Array(line.utf8)
            if bytes.count > maximumLineLength {
                batch.reject(index + 1, .tooLong(bytes.count, limit: maximumLineLength), text: nil)
            } else {
                batch.take(bytes, lineNumber: index + 1)
            }
            if batch.size >= batchSize { try batch.flush(into: &summary) }
        }
        try batch.flush(into: &summary)
    }

    /// Parsed lines waiting for their transaction, and rejections waiting to be reported in order.
    private struct Batch {
        let importer: URLListImporter
        var lines: [InputLine] = []
        var numbers: [Int] = []
        var rejections: [(Int, InputLine.Rejection, String?)] = []

        init(importer: URLListImporter) { self.importer = importer }

        var size: Int { lines.count + rejections.count }

        mutating func take(_ bytes: [UInt8], lineNumber: Int) {
            do throws(InputLine.Rejection) {
                guard let line = try InputLine.parse(bytes, resolver: importer.resolver) else { return }
                lines.append(line)
                numbers.append(lineNumber)
            } catch {
                let text = String(validating: bytes, as: UTF8.self).flatMap { $0.contains("\0") ? nil : $0 }
                reject(lineNumber, error, text: text)
            }
        }

        mutating func reject(_ lineNumber: Int, _ reason: InputLine.Rejection, text: String?) {
            // Keep only the start of a rejected line's text, so memory stays bounded.
            rejections.append((lineNumber, reason, text.map { $0.count > 200 ? String($0.prefix(200)) + "…" : $0 }))
        }

        mutating func flush(into summary: inout Summary) throws {
            let outcomes = lines.isEmpty ? [] : try importer.queue.add(lines, maxAttempts: importer.maxAttempts)
            var pending = rejections[...]
            for (index, outcome) in outcomes.enumerated() {
                let number = numbers[index]
                while let first = pending.first, first.0 < number {
                    importer.onRejection(first.0, first.1, first.2)
                    summary.rejected += 1
                    pending.removeFirst()
                }
                switch outcome {
                case .added: summary.added += 1
                case .alreadyQueued: summary.alreadyQueued += 1
                case .rejected(let reason):
                    importer.onRejection(number, reason, lines[index].url.string)
                    summary.rejected += 1
                }
            }
            for rejection in pending {
                importer.onRejection(rejection.0, rejection.1, rejection.2)
                summary.rejected += 1
            }
            lines.removeAll(keepingCapacity: true)
            numbers.removeAll(keepingCapacity: true)
            rejections.removeAll(keepingCapacity: true)
        }
    }
}
