import CSQLite
import Foundation

/// Feeds URL-list lines into a queue (`JobStore`) in large transactions (small ones when a run
/// goes on meanwhile, see `Streaming`).
///
/// Guarantees: every line is either queued, recognised as already queued, or rejected with its
/// line number and reason — a bad line never stops the others; memory is bounded by two batches,
/// whatever the input's length; a batch that is committed stays committed even if a later one
/// fails (the error is thrown, the earlier lines are kept). Lines are read and parsed on a second
/// thread while the calling thread writes the previous batch, so both cores are used. With
/// `streaming`, the lines read are committed as soon as the input pauses (a pipe), a last URL
/// line `optionsWait` later, nothing is written once `Streaming.stopped` says so, and a queue
/// that cannot be reached is waited for (`Streaming.outageLimit`) rather than ending the import.
public struct URLListImporter {
    /// Counts for the user.
    public struct Summary: Sendable, Equatable {
        public var added = 0
        public var alreadyQueued = 0
        public var rejected = 0
        public init() {}
    }

    public let queue: any JobStore
    public let resolver: DestinationResolver
    public let batchSize: Int
    public let maximumLineLength: Int
    public let maxAttempts: Int
    /// The request profile of every job added (`JobStore.storeProfile`), or nil.
    public let profileID: Int?
    /// What every job added does with a file already at its destination.
    public let ifExists: ExistingFilePolicy
    /// Called for every rejected line with its number and reason, in line order.
    public let onRejection: (_ line: Int, _ reason: InputLine.Rejection, _ text: String?) -> Void
    /// Set when a run downloads the jobs while they are added (`haul get`), see `Streaming`.
    public var streaming: Streaming?
    /// Asks the process's allocator to give the memory freed so far back to the system; called
    /// after each batch of an import from a descriptor (a file, stdin) that is not `streaming` is
    /// written, so that peak memory stays at about two batches. (Lines given as arguments are
    /// few, and not followed by a call.) The haul executable sets it for jemalloc, which
    /// otherwise keeps freed memory for some seconds (`Allocator.releaseFreedMemory`); glibc's
    /// allocator needs no call (see `configureAllocatorOnce`).
    public var releaseFreedMemory: (@Sendable () -> Void)?

    /// How an import feeds a run that goes on meanwhile: small batches (the first smaller
    /// still, so the run starts within milliseconds, and its claims wait less for each batch's
    /// transaction), each batch written as soon as the input would make the reader wait (a pipe
    /// whose writer is slower: what came is queued at once), and `afterBatch` called after each
    /// batch is committed. A URL line read last is held a moment longer (`optionsWait`),
    /// as its indented aria2 options may follow it.
    public struct Streaming: Sendable {
        public var firstBatchSize: Int
        public var batchSize: Int
        public var afterBatch: @Sendable () -> Void
        /// Asked before each batch is written: true once the run has stopped, when the import
        /// stops too (returning what it queued so far), so nothing more is queued or reported.
        public var stopped: @Sendable () -> Bool
        /// How long (ms) a batch waits for a queue that cannot be reached (`StoreError.isUnavailable`:
        /// a database server restarting or cut off), tried again after 1, 2, 4, then every 8 s,
        /// before the import ends on the error; the run beside it waits as long for its own
        /// exchanges. A batch whose commit was done but not confirmed before the cut is then
        /// found already queued (and counted so).
        public var outageLimit: Int
        /// Told before each wait for a queue that cannot be reached: the error, the batch's first
        /// and last line numbers (numbered from 1, as in rejections) and the wait in ms.
        public var waiting: @Sendable (_ error: any Error, _ lines: ClosedRange<Int>, _ wait: Int) -> Void

        public init(firstBatchSize: Int = 256, batchSize: Int = 1_024, afterBatch: @escaping @Sendable () -> Void,
                    stopped: @escaping @Sendable () -> Bool = { false }, outageLimit: Int = StoreOutage.limit,
                    waiting: @escaping @Sendable (_ error: any Error, _ lines: ClosedRange<Int>, _ wait: Int) -> Void = { _, _, _ in }) {
            self.firstBatchSize = firstBatchSize
            self.batchSize = batchSize
            self.afterBatch = afterBatch
            self.stopped = stopped
            self.outageLimit = outageLimit
            self.waiting = waiting
        }
    }

    /// How long a streaming import holds a URL line for options that may follow it, once the
    /// input has nothing more to read, in ms (see `Streaming`).
    static let optionsWait: Int32 = 50

    /// How long `haul add` (no run waiting for its lines) holds a URL line for options that may
    /// follow it, once the input has nothing more to read, in ms: a program writes a line's
    /// options with it; a person typing URLs gets each queued a second after it.
    static let heldLineWait: Int32 = 1_000

    /// Indented aria2 option lines kept under one URL: haul takes out=, dir= and checksum=, each
    /// once, so a URL with more is refused anyway; past this many, the rest are not kept (10
    /// million `out=` lines under one URL held 1 GB before this).
    static let maximumAria2Options = 16

    /// Lines in a batch at most, after `committed` batches of this import.
    private func batchLimit(committed: Int) -> Int {
        guard let streaming else { return batchSize }
        return committed == 0 ? streaming.firstBatchSize : streaming.batchSize
    }

    public init(queue: any JobStore, resolver: DestinationResolver, batchSize: Int = 64_000,
                maximumLineLength: Int = 16 * 1024, maxAttempts: Int = 5, profileID: Int? = nil,
                ifExists: ExistingFilePolicy = .skip,
                onRejection: @escaping (_ line: Int, _ reason: InputLine.Rejection, _ text: String?) -> Void) {
        self.queue = queue
        self.resolver = resolver
        self.batchSize = batchSize
        self.maximumLineLength = maximumLineLength
        self.maxAttempts = maxAttempts
        self.profileID = profileID
        self.ifExists = ifExists
        self.onRejection = onRejection
    }

    /// Batches are large arrays allocated on one thread and freed on another. glibc raises its
    /// mmap threshold to the largest block freed, after which such arrays come from the heap and
    /// their freed space stays in the process; a fixed threshold keeps them mapped, so each
    /// batch's memory goes back to the system once it is written (tens of MB of peak RSS).
    private static let configureAllocatorOnce: Void = {
        _ = csqlite_set_mmap_threshold(1 << 20)
    }()

    /// Imports every line readable from `descriptor`.
    public func importLines(from descriptor: Int32, into summary: inout Summary) throws {
        Self.configureAllocatorOnce
        // One batch waiting while one is written and one is parsed: parsing is faster than writing,
        // so a deeper queue would only hold more memory.
        let channel = BatchChannel(capacity: 1)
        let (resolver, maximumLineLength, streams) = (self.resolver, self.maximumLineLength, streaming != nil)
        let limits = (first: batchLimit(committed: 0), later: batchLimit(committed: 1))
        // The parser reads its own duplicate of the descriptor and closes it when it ends: this
        // may return (on a failed write, or stopped) while the parser still waits in a read of a
        // pipe, and the caller may then close `descriptor` without the parser reading whatever
        // file takes its number next.
        let own = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard own >= 0 else { throw InputError.readFailed(String(cString: strerror(errno))) }
        let parser = Thread {
            defer { close(own) }
            var reader = LineReader(descriptor: own, maximumLineLength: maximumLineLength)
            var batch = ParsedBatch()
            var sent = 0
            // A URL line waits here while indented aria2 option lines follow it; past
            // `maximumAria2Options` of them, they are not kept (the line of the first one left
            // out says why the URL is refused), so memory stays bounded whatever follows.
            var record: (bytes: [UInt8], line: Int, options: [InputLine.Aria2Option], overflow: Int?)?
            func takeRecord() {
                if let held = record {
                    if let extra = held.overflow {
                        let text = String(validating: held.bytes, as: UTF8.self).flatMap { $0.contains("\0") ? nil : $0 }
                        batch.reject(held.line, .tooManyAria2Options(line: extra, limit: Self.maximumAria2Options), text: text)
                    } else {
                        batch.take(held.bytes, lineNumber: held.line, resolver: resolver, aria2: held.options)
                    }
                }
                record = nil
            }
            /// Hands the batch to the writing thread and starts the next; false once that has
            /// stopped (the channel is closed).
            func sendBatch() -> Bool {
                let next = ParsedBatch(sizedLike: batch)
                guard channel.send(.batch(batch)) else { return false }
                batch = next
                sent += 1
                return true
            }
            do {
                while true {
                    // What was read goes to the queue before the reader waits for more (a pipe
                    // or a terminal with nothing more yet: a file never waits), so lines typed
                    // or piped slowly are queued, not held until a batch fills, and a Ctrl-C
                    // then loses none of them. A held URL line's indented aria2 options come
                    // right after it, so it waits for them a moment before it goes without
                    // them (`optionsWait` when a run waits for it, `heldLineWait` for `haul
                    // add`); the lines before it do not wait.
                    if batch.size > 0 || record != nil, reader.wouldWait() {
                        if batch.size > 0 { guard sendBatch() else { return } }
                        if record != nil, reader.wouldWait(milliseconds: streams ? Self.optionsWait : Self.heldLineWait) {
                            takeRecord()
                            guard sendBatch() else { return }
                        }
                    }
                    guard let line = try reader.next() else { break }
                    switch line {
                    case .tooLong(let length):
                        takeRecord()
                        batch.reject(reader.lineNumber, .tooLong(length, limit: maximumLineLength), text: nil)
                    case .bytes(let bytes):
                        if let option = InputLine.aria2Option(bytes, line: reader.lineNumber) {
                            if let held = record {
                                if held.options.count < Self.maximumAria2Options { record?.options.append(option) }
                                else if held.overflow == nil { record?.overflow = reader.lineNumber }
                            }
                            else { batch.reject(reader.lineNumber, .aria2OptionWithoutURL, text: InputLine.shown(option, bytes)) }
                        } else if record != nil, bytes.first == 0x20 || bytes.first == 0x09, InputLine.isBlankOrComment(bytes),
                                  bytes.contains(UInt8(ascii: "#")), !bytes.contains(0) {
                            // An indented comment among a URL's option lines: the options go on.
                            continue
                        } else {
                            takeRecord()
                            if InputLine.isBlankOrComment(bytes) {
                                // Not a record: options after it have no URL line (a NUL still rejects it).
                                batch.take(bytes, lineNumber: reader.lineNumber, resolver: resolver)
                                continue
                            }
                            record = (bytes, reader.lineNumber, [], nil)
                        }
                    }
                    if batch.isFull(lines: sent == 0 ? limits.first : limits.later) { guard sendBatch() else { return } }
                }
                takeRecord()
                if channel.send(.batch(batch)) { _ = channel.send(.end) }
            } catch InputError.readFailed(let reason) {
                if channel.send(.batch(batch)) { _ = channel.send(.failed(reason)) }
            } catch {
                if channel.send(.batch(batch)) { _ = channel.send(.failed(String(describing: error))) }
            }
        }
        parser.stackSize = 1 << 20
        parser.start()
        defer { channel.close() }  // lets the parser finish if we stop early on an error
        while true {
            switch channel.receive() {
            case .batch(let batch):
                if streaming?.stopped() == true { return }
                try flush(batch, into: &summary)
            case .end: return
            case .failed(let message): throw InputError.readFailed(message)
            }
            // The batch written is freed by now (its scope ended).
            if streaming == nil { releaseFreedMemory?() }
        }
    }

    /// Imports lines given as strings (command-line arguments), numbered from 1.
    public func importLines(_ lines: [String], into summary: inout Summary) throws {
        var batch = ParsedBatch()
        var sent = 0
        var index = -1
        while index + 1 < lines.count {
            index += 1
            var line = lines[index]
            let number = index + 1
            // `haul add URL out=NAME sha256=HEX`, unquoted: fields given as arguments of their
            // own belong to the URL before them (none of them can be a URL).
            if index + 1 < lines.count, Self.isField(lines[index + 1]), !Self.isField(line) {
                // Before a trailing comment, which would swallow them.
                var comment = ""
                if let start = line.range(of: " #") ?? line.range(of: "\t#") {
                    comment = String(line[start.lowerBound...])
                    line = String(line[..<start.lowerBound])
                }
                while index + 1 < lines.count, Self.isField(lines[index + 1]) {
                    index += 1
                    line += " " + lines[index]
                }
                line += comment
            }
            let bytes = Array(line.utf8)
            if bytes.count > maximumLineLength {
                batch.reject(number, .tooLong(bytes.count, limit: maximumLineLength), text: nil)
            } else {
                batch.take(bytes, lineNumber: number, resolver: resolver)
            }
            if batch.isFull(lines: batchLimit(committed: sent)) {
                if streaming?.stopped() == true { return }
                try flush(batch, into: &summary)
                batch = ParsedBatch()
                sent += 1
            }
        }
        if streaming?.stopped() == true { return }
        try flush(batch, into: &summary)
    }

    /// Whether an argument is a URL's field (`out=NAME`, `SHA256=HEX`: a key of letters, digits
    /// and `-`, then `=`), not a URL. Joined to its URL, one the line's parser does not take (an
    /// unknown key, a value with a space) refuses that URL rather than being dropped.
    static func isField(_ argument: String) -> Bool {
        guard let equals = argument.utf8.firstIndex(of: UInt8(ascii: "=")), equals > argument.utf8.startIndex else { return false }
        return InputLine.isOptionKey(argument.utf8[..<equals])
    }

    /// Writes one batch and reports its rejections, in line order.
    private func flush(_ batch: ParsedBatch, into summary: inout Summary) throws {
        let outcomes = batch.jobs.isEmpty ? [] : try add(batch)
        var pending = batch.rejections[...]
        for (index, outcome) in outcomes.enumerated() {
            let number = batch.numbers[index]
            while let first = pending.first, first.line < number {
                onRejection(first.line, first.reason, first.text)
                summary.rejected += 1
                pending.removeFirst()
            }
            switch outcome {
            case .added: summary.added += 1
            case .alreadyQueued: summary.alreadyQueued += 1
            case .rejected(let reason):
                onRejection(number, reason, batch.jobs.url(index))
                summary.rejected += 1
            }
        }
        for rejection in pending {
            onRejection(rejection.line, rejection.reason, rejection.text)
            summary.rejected += 1
        }
        if !batch.jobs.isEmpty {
            streaming?.afterBatch()
            // The next batch is usually parsed already and would take the write lock again
            // within microseconds: a writer waiting for it (this run's claims, another process)
            // looks every 0.2 ms (Database's busy handler), so it would wait out the import.
            usleep(Self.pauseBetweenBatches)
        }
    }

    /// Adds the batch's jobs; while streaming, waits for a queue that cannot be reached (see
    /// `Streaming.outageLimit`), unless the run stops meanwhile.
    private func add(_ batch: ParsedBatch) throws -> [AddOutcome] {
        var jobs = batch.jobs
        jobs.root = resolver.directory
        var failures = 0
        let start = DispatchTime.now().uptimeNanoseconds
        while true {
            do {
                return try queue.add(jobs, maxAttempts: maxAttempts, profileID: profileID, ifExists: ifExists)
            } catch let error as any StoreError where error.isUnavailable && streaming != nil {
                guard let streaming, !streaming.stopped() else { throw error }
                failures += 1
                let wait = StoreOutage.retryDelay(afterFailures: failures)
                let waited = Int((DispatchTime.now().uptimeNanoseconds - start) / 1_000_000)
                guard waited + wait <= streaming.outageLimit else { throw error }
                streaming.waiting(error, (batch.numbers.first ?? 0)...(batch.numbers.last ?? 0), wait)
                // In slices, so a run that stops meanwhile is not kept waiting.
                let until = DispatchTime.now().uptimeNanoseconds + UInt64(wait) * 1_000_000
                while DispatchTime.now().uptimeNanoseconds < until {
                    if streaming.stopped() { throw error }
                    usleep(50_000)
                }
            }
        }
    }

    /// Microseconds the writer leaves the queue unlocked after each batch (see `flush`).
    static let pauseBetweenBatches: UInt32 = 300
}

/// Parsed lines waiting for their transaction, and rejections waiting to be reported in order.
struct ParsedBatch: Sendable {
    /// A batch is sent once its text reaches this size, however few its lines, so memory stays
    /// bounded even when lines are long.
    static let textLimit = 16 << 20

    var jobs = JobBatch()
    /// The line number of each of `jobs`' entries.
    var numbers: [Int] = []
    var rejections: [(line: Int, reason: InputLine.Rejection, text: String?)] = []

    init() {}

    /// An empty batch with room for as many lines and as much text as `previous` held (plus a
    /// little), so a full batch is allocated once instead of grown by doubling.
    init(sizedLike previous: ParsedBatch) {
        jobs.reserve(entries: previous.jobs.count,
                     textBytes: min(previous.jobs.textBytes + previous.jobs.textBytes / 16, Self.textLimit + (64 << 10)))
        numbers.reserveCapacity(previous.numbers.count)
    }

    var size: Int { jobs.count + rejections.count }
    /// Whether the batch should be written now: `lines` lines, or too much text.
    func isFull(lines: Int) -> Bool { size >= lines || jobs.textBytes >= Self.textLimit }

    mutating func take(_ bytes: [UInt8], lineNumber: Int, resolver: DestinationResolver, aria2: [InputLine.Aria2Option] = []) {
        do throws(InputLine.Rejection) {
            guard let line = try InputLine.parse(bytes, resolver: resolver, aria2: aria2) else { return }
            jobs.append(line)
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
}

/// A bounded hand-off of parsed batches from the parsing thread to the writing thread.
// @unchecked Sendable: every stored property is read and written only while holding `condition`.
final class BatchChannel: @unchecked Sendable {
    enum Message: Sendable {
        case batch(ParsedBatch)
        case end
        case failed(String)
    }

    private let condition = NSCondition()
    private var messages: [Message] = []
    private var closed = false
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Waits for room; false when the receiver has gone away.
    func send(_ message: Message) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while messages.count >= capacity && !closed { condition.wait() }
        guard !closed else { return false }
        messages.append(message)
        condition.broadcast()
        return true
    }

    func receive() -> Message {
        condition.lock()
        defer { condition.unlock() }
        while messages.isEmpty { condition.wait() }
        let message = messages.removeFirst()
        condition.broadcast()
        return message
    }

    func close() {
        condition.lock()
        closed = true
        messages.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
