/// Parsed lines on their way into a store's `add`, stored compactly.
///
/// All the texts of a batch share one byte buffer and every line is a fixed-size entry, so a
/// batch costs about 40 bytes a line plus its text (an `[InputLine]` costs about 600, in five
/// heap blocks a line), and handing it from the parsing thread to the writing thread moves three
/// buffers. The destination key and a batch-local host number are computed when a line is
/// appended, on the parsing thread, so the writing thread only binds and inserts.
///
/// Guarantees: entries keep the order lines were appended in; each entry's key is the FNV-1a hash
/// of exactly its destination's UTF-8 (`destinationKey`), as every store keys destinations;
/// `hosts` lists each host key once, in order of first appearance.
public struct JobBatch: Sendable {
    public struct Entry: Sendable {
        /// Where the line's URL starts in `text`; its destination follows it, then its checksum.
        public var offset: Int
        public var urlLength: Int32
        public var destinationLength: Int32
        /// 0, or the length of the line's checksum as stored (`Checksum.description`).
        public var checksumLength: Int32
        /// Index into `hosts`.
        public var host: Int32
        /// `JobBatch.destinationKey(destination)`: the 64-bit FNV-1a hash of its UTF-8.
        public var key: Int
        /// `InputLine.namedByURL`.
        public var namedByURL: Bool
    }

    public private(set) var text: [UInt8] = []
    public private(set) var entries: [Entry] = []
    /// The distinct host keys (`HTTPURL.hostKey`) of the batch, in order of first appearance.
    public private(set) var hosts: [String] = []
    /// The output folder every job of the batch is added with (`Job.root`), or nil: every
    /// destination starts with it (then "/").
    public var root: String?
    /// What a store keeps of `root`: its length in bytes.
    public var rootLength: Int? { root?.utf8.count }
    private var hostNumbers: [String: Int32] = [:]

    public init() {}

    public init(_ lines: [InputLine]) {
        entries.reserveCapacity(lines.count)
        for line in lines { append(line) }
    }

    mutating func reserve(entries count: Int, textBytes: Int) {
        entries.reserveCapacity(count)
        text.reserveCapacity(textBytes)
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    /// Bytes of text held: with `count`, what a batch costs in memory.
    public var textBytes: Int { text.count }

    public mutating func append(_ line: InputLine) {
        let host: Int32
        if let known = hostNumbers[line.url.hostKey] {
            host = known
        } else {
            host = Int32(hosts.count)
            hosts.append(line.url.hostKey)
            hostNumbers[line.url.hostKey] = host
        }
        let offset = text.count
        let urlLength = append(line.url.string)
        let destinationLength = append(line.destination)
        let checksumLength = line.checksum.map { append($0.description) } ?? 0
        let key = text.withUnsafeBufferPointer {
            JobBatch.destinationKey(UnsafeBufferPointer(rebasing: $0[(offset + urlLength)..<(offset + urlLength + destinationLength)]))
        }
        entries.append(Entry(offset: offset, urlLength: Int32(urlLength), destinationLength: Int32(destinationLength),
                             checksumLength: Int32(checksumLength), host: host, key: key, namedByURL: line.namedByURL))
    }

    /// The entries to insert, and those to leave out, each in order.
    ///
    /// An entry whose key an earlier entry of the batch has is left out (`repeats`): it is judged
    /// against the job holding its key once the others are in. So every key goes into one
    /// INSERT at most once, and the first line with a destination gets it.
    public func partitionedByKey() -> (insert: [Int32], repeats: [Int32]) {
        var keys = Set<Int>(minimumCapacity: entries.count)
        var insert: [Int32] = []
        insert.reserveCapacity(entries.count)
        var repeats: [Int32] = []
        for (index, entry) in entries.enumerated() {
            if keys.insert(entry.key).inserted {
                insert.append(Int32(index))
            } else {
                repeats.append(Int32(index))
            }
        }
        return (insert, repeats)
    }

    /// Appends a string's UTF-8 bytes to `text`; returns their count.
    private mutating func append(_ string: String) -> Int {
        var string = string
        return string.withUTF8 { bytes in
            text.append(contentsOf: bytes)
            return bytes.count
        }
    }

    public func url(_ index: Int) -> String {
        let entry = entries[index]
        return string(entry.offset, Int(entry.urlLength))
    }

    /// The entry's checksum as stored (`md5=HEX`), or nil.
    public func checksum(_ index: Int) -> String? {
        let entry = entries[index]
        guard entry.checksumLength > 0 else { return nil }
        return string(entry.offset + Int(entry.urlLength) + Int(entry.destinationLength), Int(entry.checksumLength))
    }

    public func destination(_ index: Int) -> String {
        let entry = entries[index]
        return string(entry.offset + Int(entry.urlLength), Int(entry.destinationLength))
    }

    /// The folders of the entries `outcomes` (one per entry) says were added, each once: a
    /// destination up to and including its last "/" ("" when it has none), as every store
    /// records them for the run's sweep of orphaned temp files. Read from the bytes; consecutive
    /// entries in one folder (the usual case) make one string between them.
    public func folders(added outcomes: [AddOutcome]) -> Set<String> {
        var folders = Set<String>()
        text.withUnsafeBufferPointer { text in
            var last: Range<Int>?
            for index in outcomes.indices {
                guard case .added = outcomes[index] else { continue }
                let entry = entries[index]
                let start = entry.offset + Int(entry.urlLength)
                var end = start + Int(entry.destinationLength)
                while end > start, text[end - 1] != 0x2F { end -= 1 }  // after the last "/"
                if let last, text[last].elementsEqual(text[start..<end]) { continue }
                last = start..<end
                folders.insert(String(decoding: UnsafeBufferPointer(rebasing: text[start..<end]), as: UTF8.self))
            }
        }
        return folders
    }

    /// The folder (a destination's `parentFolder`) that a folder recorded by `folders(added:)`
    /// stands for: the recorded form keeps the last "/", which `parentFolder` drops.
    public static func folder(recorded: String) -> String {
        (recorded + "x").parentFolder
    }

    private func string(_ start: Int, _ count: Int) -> String {
        text.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[start..<(start + count)]), as: UTF8.self) }
    }
}

extension JobBatch {
    /// The outcome of entry `index` when another job (`id`, fetching `url` to `destination`,
    /// with `checksum`, in `state`) already holds its destination key: the same job again (same
    /// URL and destination), or a rejection naming that job. Every store judges a lost entry by
    /// this. The same job with a checksum it lacks is the same job when it has not started: the
    /// store then gives it the entry's checksum (`adoptsChecksum`); once it has started (or
    /// with another checksum) the line is refused, so a checksum is never dropped unsaid.
    /// (`suffixed`: the entry's destination when it gave way to another URL's; see `suffixed(_:for:)`.)
    public func outcome(of index: Int, heldBy id: Int, url: String, destination: String,
                        checksum held: String?, state: JobState, suffixed: String? = nil) -> AddOutcome {
        if destination != suffixed ?? self.destination(index) { return .rejected(.destinationKeyCollision(byJob: id)) }
        guard url == self.url(index) else { return .rejected(.destinationTaken(byJob: id, url: url)) }
        guard let wanted = checksum(index), wanted != held else { return .alreadyQueued(jobID: id) }
        if let held { return .rejected(.checksumConflict(byJob: id, held: held)) }
        if state == .running || state == .done { return .rejected(.checksumTooLate(byJob: id, state: state)) }
        return .alreadyQueued(jobID: id)
    }

    /// Whether `outcome` found the entry's URL and destination already queued (whether or not
    /// its checksum could be taken): for an entry whose suffixed name another job holds, what
    /// replaces its first rejection.
    public static func isSameJob(_ outcome: AddOutcome) -> Bool {
        switch outcome {
        case .alreadyQueued, .rejected(.checksumConflict), .rejected(.checksumTooLate): return true
        default: return false
        }
    }

    /// Whether entry `index`, judged already queued by a job holding `held`, brings that job
    /// the checksum it lacks (see `outcome(of:heldBy:url:destination:checksum:state:)`).
    public func adoptsChecksum(_ index: Int, held: String?) -> Bool {
        held == nil && entries[index].checksumLength > 0
    }

    /// The 64-bit FNV-1a hash of a destination's UTF-8 bytes: every store keys destinations by it.
    public static func destinationKey(_ destination: String) -> Int {
        Int(Int64(bitPattern: FNV1a.hash(destination)))
    }

    public static func destinationKey(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
        Int(Int64(bitPattern: FNV1a.hash(utf8)))
    }

    /// `…/NAME.EXT` as `…/NAME-HASH.EXT`, HASH the first 8 hex digits of the URL's FNV-1a hash.
    public static func suffixed(_ destination: String, for url: String) -> String {
        let hash = String(FNV1a.hash(url) >> 32, radix: 16)
        let tag = "-" + String(repeating: "0", count: 8 - hash.count) + hash
        let slash = destination.lastIndex(of: "/").map { destination.index(after: $0) } ?? destination.startIndex
        let folder = destination[..<slash]
        let name = destination[slash...]
        let dot = name.lastIndex(of: ".").flatMap { $0 > name.startIndex && name.distance(from: $0, to: name.endIndex) <= 11 ? $0 : nil }
        let ext = name[(dot ?? name.endIndex)...]
        // The stem gives way, so the tag and the extension stay whole within 255 bytes (a name
        // already at the limit would otherwise lose the tag, and with it the way out).
        var stem = name[..<(dot ?? name.endIndex)]
        let room = 255 - tag.utf8.count - ext.utf8.count
        while stem.utf8.count > room { stem = stem.dropLast() }
        return folder + stem + tag + ext
    }
}
