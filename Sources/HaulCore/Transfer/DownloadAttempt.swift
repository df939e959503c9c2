import CFileSync
import Foundation
import Synchronization

/// One attempt at downloading one job: decides how to resume, checks the response head before
/// any byte is kept, streams the body into the temp file, verifies it and moves it into place.
///
/// Guarantees:
/// - a non-2xx answer, a non-identity Content-Encoding, or a 206 that does not continue the
///   partial file exactly (start, total length, validator) writes nothing; a 416 completes the
///   partial file only when its `bytes */N` is the length kept and no other validator comes with it;
/// - a partial file is continued only with `Range` + `If-Range` carrying its stored strong
///   validator; anything else starts from zero, and a partial file that had a validator is
///   never overwritten in this attempt (the caller first forgets the validator, then starts
///   over: see `Failure.mustRestart`), so no file is ever spliced from two versions;
/// - the destination is written only by `VerifiedFile.place`, after the length (and checksum,
///   when given) checked out; the checksum is computed over every byte kept, the partial file's
///   included when resuming.
public final class DownloadAttempt: BodySink {
    /// Why an attempt did not place its file. The scheduler's retry policy decides what follows.
    public enum Failure: Sendable, Equatable, CustomStringConvertible {
        /// A non-2xx answer (its body was not kept). `retryAfter` is the raw header; `answeredBy`,
        /// the host key of the server that sent it when a redirect led to another host than the
        /// job's and the answer asks for a wait (its Retry-After is that host's, not the job's).
        case http(status: Int, retryAfter: String?, answeredBy: String? = nil)
        /// Stall, timeout, reset mid-body, truncated…
        case transport(String)
        /// Nothing of a response arrived (refused, DNS, connect timeout, TLS handshake, closed
        /// before any byte): the host is down, not the job at fault.
        case unreachable(String)
        /// A redirect haul will not follow.
        case badRedirect(String)
        /// The server encoded the body although haul asked for identity.
        case encoding(String)
        /// The partial file cannot be continued; forget its validator and start from zero.
        case mustRestart(String)
        /// The body was shorter or longer than announced.
        case length(String)
        /// The body's digest is not the one the job gives (both as lower-case hex).
        case checksum(Checksum.Algorithm, expected: String, actual: String)
        /// Writing the temp file or placing it failed (disk full, permissions…).
        case disk(String)
        /// The output folder cannot be written (missing, not writable, read-only, full): not
        /// the job's fault. `why` says what failed and what to do.
        case local(folder: String, why: String)
        /// The way to the destination changed so that writing there could leave the output folder.
        case unsafeDestination(String)
        /// The request cannot succeed as asked, however often it is tried: an untrusted
        /// certificate, an option the transport lacks. The reason says what to do.
        case refused(String)
        /// Another haul process still holds the temp file (a worker taken off a shared queue that
        /// has not stopped yet): not the job's fault; try it again a little later.
        case tempInUse(String)
        case cancelled

        /// The server answered (whatever it said): it is reachable.
        public var isAnswer: Bool {
            switch self {
            case .http, .encoding, .mustRestart, .length, .checksum, .badRedirect: return true
            case .transport, .unreachable, .disk, .local, .unsafeDestination, .refused, .tempInUse, .cancelled: return false
            }
        }

        public var description: String {
            switch self {
            case .http(let status, _, _): return "HTTP \(status) \(HTTPStatus.reason(status))"
            case .transport(let why), .unreachable(let why), .badRedirect(let why), .encoding(let why), .mustRestart(let why),
                 .length(let why), .disk(let why), .unsafeDestination(let why), .refused(let why), .local(_, let why),
                 .tempInUse(let why):
                return why
            case .checksum(let algorithm, let expected, let actual):
                return "\(algorithm.rawValue) mismatch: expected \(expected), got \(actual)"
            case .cancelled: return "cancelled"
            }
        }
    }

    /// The outcome of `verify`: a file ready to be placed, or why there is none.
    public enum Verification: Sendable {
        case verified(VerifiedFile)
        case failed(Failure, status: Int?)
        /// A conditional request (see `Conditional`) was answered 304: the file placed before
        /// is current. The (empty) temp file is removed.
        case notModified
    }

    /// The validators of a file placed before, for a conditional request (a refresh): sent as
    /// If-None-Match and If-Modified-Since when nothing is resumed.
    public struct Conditional: Sendable, Equatable {
        public var etag: String?
        public var lastModified: String?

        public init(etag: String?, lastModified: String?) {
            self.etag = etag
            self.lastModified = lastModified
        }
    }

    /// What is known about the partial file, for the database.
    public struct Snapshot: Sendable, Equatable {
        public var bytesOnDisk: Int64
        public var expectedTotal: Int64?
        public var validator: Validator?
        /// The URL (after redirects) that sent the bytes and the validator: a validator holds
        /// for its own resource only.
        public var url: String?

        public init(bytesOnDisk: Int64, expectedTotal: Int64?, validator: Validator?, url: String? = nil) {
            self.bytesOnDisk = bytesOnDisk
            self.expectedTotal = expectedTotal
            self.validator = validator
            self.url = url
        }
    }

    private enum Mode { case awaitingHead, writing, alreadyComplete, notModified, stopped }

    private struct State {
        var descriptor: Int32 = -1
        var mode = Mode.awaitingHead
        var written: Int64 = 0
        var expectedTotal: Int64?
        var validator: Validator?
        /// Where the bytes and the validator came from (see `Snapshot.url`).
        var url: String?
        var hasher: (any StreamingDigest)?
        var failure: Failure?
        var status: Int?
        var metadata = ResponseMetadata()
        /// The temp file has no name yet (see `TempFile`).
        var unnamed = false
        /// The body is held in memory (`held`), not written as it arrives (see `heldLimit`).
        var holding = false
        var held: [UInt8] = []

        /// What is on disk. An unnamed file's validator is not given: its bytes cannot be
        /// resumed, and what holds the temp file's name may be another attempt's (after a lease
        /// was lost), so recording this one's validator could splice the two.
        var snapshot: Snapshot {
            Snapshot(bytesOnDisk: written, expectedTotal: expectedTotal, validator: unnamed ? nil : validator, url: url)
        }

        /// Gives an unnamed temp file open as `fd` its name, when it has bytes worth resuming
        /// (the bytes held in memory written first: a name is given to whole bytes only).
        mutating func name(_ temp: TempFile, _ fd: Int32) {
            guard unnamed, fd >= 0, written > 0, validator != nil else { return }
            if holding {
                guard held.withUnsafeBytes({ temp.write($0, to: fd, at: written - Int64($0.count)) }) == nil else { return }
                holding = false
                held = []
            }
            if temp.name(fd) { unnamed = false }
        }
    }

    /// Bodies at least this long (or of unknown length) are kept under their temp file's name
    /// from their head on, and have their validator recorded then, so a kill -9 mid-body can
    /// resume them; smaller ones are cheaper to fetch again than to record twice.
    public static let resumableSize: Int64 = 1 << 20

    /// Bodies of at most this many bytes, in an unnamed temp file, are held in memory as they
    /// arrive and written to the file when it is placed (`VerifiedFile.held`), on the placement
    /// thread: the transfer loop, whose one thread drives every transfer, makes no file system
    /// call for them. Measured on workload A (10,000 files of 10 KB): the body writes were
    /// almost half of the loop thread's time, most of it the kernel copying into new page-cache
    /// pages. Memory stays bounded whatever the files and the disk: bodies are held by the
    /// running transfers (`-j`) and the verified files waiting to be placed (at most
    /// `EngineCore.unplacedLimit`, 512), so at most (`-j` + 512) × 64 KiB, 33 MiB at `-j` 16.
    public static let heldLimit: Int64 = 64 << 10

    public let temp: TempFile
    public let expectedChecksum: Checksum?
    /// Ask whether the file placed before changed (nil, or ignored when resuming: fetch).
    public let conditional: Conditional?
    /// Where this attempt continues from (0: from scratch).
    public let resumeOffset: Int64
    private let storedValidator: Validator?
    /// The URL the partial file's bytes came from, when recorded (see `Snapshot.url`).
    private let storedURL: String?
    private let state: Mutex<State>
    private let onAccepted: @Sendable (Snapshot) -> Void

    /// Opens the temp file and decides whether to resume.
    /// - Parameters:
    ///   - storedValidator: the strong validator recorded for the partial file, if any.
    ///   - storedTotal: the total length recorded for the partial file, if any.
    ///   - storedURL: the URL (after redirects) the partial file's bytes came from, if recorded:
    ///     a resume answered from another URL starts over.
    /// - Parameter onAccepted: called once the head is accepted, before any body byte is written,
    ///   with what is then known (total length, validator), so it can be recorded for a resume.
    /// - Parameter recordSHA256: compute the file's sha256 (kept in the verified file's
    ///   metadata) even when no sha256 is expected.
    /// - Parameter unnamed: a fresh download may start in an unnamed file (see `TempFile`).
    /// - Parameter lookForEarlier: with `unnamed`, whether an earlier attempt may have left a
    ///   temp file under the name: false only when none can have (the job's first try, see
    ///   `Lease.firstTry`, with no validator or bytes recorded), so the download starts unnamed
    ///   without looking.
    /// The job's host key (`HTTPURL.hostKey`): an answer asking for a wait from another host, a
    /// redirect's, names that host (`Failure.http`'s `answeredBy`).
    private let jobHost: String?

    public init(temp: TempFile, expectedChecksum: Checksum?, storedValidator: Validator?, storedTotal: Int64?,
                storedURL: String? = nil, recordSHA256: Bool = false, conditional: Conditional? = nil, unnamed: Bool = false,
                lookForEarlier: Bool = true, jobHost: String? = nil,
                onAccepted: @escaping @Sendable (Snapshot) -> Void = { _ in }) throws {
        self.onAccepted = onAccepted
        self.jobHost = jobHost
        self.temp = temp
        self.expectedChecksum = expectedChecksum
        let (descriptor, existing, isUnnamed) = try temp.open(unnamed: unnamed, lookForEarlier: lookForEarlier)
        let resume = existing > 0 && storedValidator != nil && (storedTotal.map { existing <= $0 } ?? true)
        if !resume && existing > 0 && ftruncate(descriptor, 0) != 0 {
            let error = TransferIOError.errno("cannot empty temp file \(temp.path)")
            close(descriptor)
            throw error
        }
        self.resumeOffset = resume ? existing : 0
        self.storedValidator = resume ? storedValidator : nil
        self.storedURL = resume ? storedURL : nil
        self.conditional = resume ? nil : conditional
        var initial = State()
        initial.descriptor = descriptor
        initial.written = resumeOffset
        initial.expectedTotal = resume ? storedTotal : nil
        initial.validator = self.storedValidator
        initial.url = self.storedURL
        initial.unnamed = isUnnamed
        if let algorithm = expectedChecksum?.algorithm ?? (recordSHA256 ? .sha256 : nil) {
            var hasher = algorithm.makeDigest()
            if resume {
                do {
                    try Self.hashPrefix(of: descriptor, path: temp.path, length: existing, into: &hasher,
                                        algorithm: algorithm)
                } catch {
                    close(initial.descriptor)
                    throw error
                }
            }
            initial.hasher = hasher
        }
        state = Mutex(initial)
    }

    deinit {
        state.withLock { if $0.descriptor >= 0 { close($0.descriptor) } }
    }

    /// The request headers this attempt needs (Range and If-Range when resuming).
    public var requestHeaders: [String: String] {
        if let conditional {
            var headers: [String: String] = [:]
            if let etag = conditional.etag { headers["If-None-Match"] = etag }
            if let date = conditional.lastModified { headers["If-Modified-Since"] = date }
            return headers
        }
        guard resumeOffset > 0, let storedValidator else { return [:] }
        return ["Range": "bytes=\(resumeOffset)-", "If-Range": storedValidator.headerValue]
    }

    /// What is on disk now (see `State.snapshot`).
    public var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// Ends an attempt whose request was never sent, or is given up before its end: its temp
    /// file closes (bytes worth resuming keep their name, as `verify` keeps them).
    public func closeUnsent() {
        _ = verify(FetchResult(head: nil, failure: .cancelled))
    }

    /// The snapshot to record as progress: an unnamed file with bytes worth resuming gets its
    /// name first, so a slow transfer (one still running when progress is recorded, about a
    /// second in) resumes after a crash whatever its size, as a named one always did.
    public func snapshotForProgress() -> Snapshot {
        state.withLock { state in
            if state.mode == .writing { state.name(temp, state.descriptor) }
            return state.snapshot
        }
    }

    // MARK: BodySink

    public func head(_ head: ResponseHead) -> HeadDisposition {
        let accepted: Snapshot? = state.withLock { state in
            state.status = head.status
            if (200..<300).contains(head.status) {
                state.metadata = ResponseMetadata(etag: head["etag"], lastModified: head["last-modified"],
                                                  contentType: head["content-type"], finalURL: head.url?.absoluteString)
            }
            if var failure = decide(head, &state) {
                if case .http(let status, let retryAfter?, nil) = failure {
                    failure = .http(status: status, retryAfter: RetryAfter.byServerClock(retryAfter, sentAt: head["date"]))
                }
                if case .http(let status, let retryAfter?, nil) = failure, let jobHost, let url = head.url,
                   let answered = try? HTTPURL(url.absoluteString).hostKey, answered != jobHost {
                    failure = .http(status: status, retryAfter: retryAfter, answeredBy: answered)
                }
                state.failure = failure
                state.mode = .stopped
                return nil
            }
            if state.unnamed, state.mode == .writing, state.expectedTotal ?? .max >= Self.resumableSize,
               temp.name(state.descriptor) {
                state.unnamed = false  // large: kept under its name from the first byte
            }
            if state.unnamed, state.mode == .writing, let total = state.expectedTotal, total <= Self.heldLimit {
                state.holding = true
                state.held.reserveCapacity(Int(total))
            }
            return state.snapshot
        }
        guard let accepted else { return .reject(state.withLock { $0.failure?.description ?? "rejected" }) }
        onAccepted(accepted)
        return .accept
    }

    public func body(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock { state in
            guard state.mode == .writing else { return }  // e.g. the body of a 416
            if let total = state.expectedTotal, state.written + Int64(bytes.count) > total {
                let failure = Failure.length("server sent more than the announced \(total) bytes")
                state.failure = failure
                state.mode = .stopped
                throw TransferIOError(failure.description)
            }
            state.hasher?.update(bytes)
            if state.holding {
                state.held.append(contentsOf: bytes)
                state.written += Int64(bytes.count)
                return
            }
            if let error = temp.write(bytes, to: state.descriptor, at: state.written) {
                state.failure = LocalFault.failure(error, destination: temp.destination) ?? .disk(error.message)
                state.mode = .stopped
                throw error
            }
            let before = state.written
            state.written += Int64(bytes.count)
            // A large file is made durable before it is placed: start writing its bytes to the
            // device as they come, a window at a time, so the flush at the end waits for the
            // last window only, not for the whole file (a hint: a failure here is not an error).
            let window = Self.writebackWindow
            if state.written / window > before / window {
                let end = state.written / window * window
                _ = haul_start_writeback(state.descriptor, end - window, window)
            }
        }
    }

    /// Whether the destination's name says its bytes are in `encoding` (`x.tar.gz` sent with
    /// `Content-Encoding: gzip`, a common server setting for compressed files): the bytes as
    /// sent are then the file the name promises, and are kept, as curl, wget and aria2c keep them.
    static func nameSays(_ encoding: String, _ destination: String) -> Bool {
        let name = destination.lowercased()
        let suffixes: [String] = switch encoding {
        case "gzip", "x-gzip": [".gz", ".tgz", ".svgz"]
        case "br": [".br"]
        case "zstd": [".zst"]
        case "compress", "x-compress": [".z"]
        default: []
        }
        return suffixes.contains { name.hasSuffix($0) }
    }

    /// How many bytes of a body are written before their write-back to the device is started.
    static let writebackWindow: Int64 = 8 << 20

    /// Decides, from the head alone, whether the body may be written; nil means yes.
    private func decide(_ head: ResponseHead, _ state: inout State) -> Failure? {
        if conditional != nil && head.status == 304 {
            state.mode = .notModified
            return nil
        }
        // Only a body that would be kept must be unencoded: an encoded error page (a 503 with
        // Retry-After) is still the error it reports, and is retried as such.
        if (200..<300).contains(head.status),
           let encoding = head["content-encoding"]?.trimmingCharacters(in: .whitespaces).lowercased(),
           !encoding.isEmpty, encoding != "identity", !(head.bodyAsSent && Self.nameSays(encoding, temp.destination)) {
            return .encoding("server sent Content-Encoding: \(encoding) although haul asked for identity; haul keeps only the bytes as sent unencoded")
        }
        // A Content-Length that is there but cannot be read, or differing values: where the
        // body ends is unknown (RFC 9112 §6.3 makes it an unrecoverable error).
        let length = head.contentLength
        if (200..<300).contains(head.status), length == nil, head["content-length"] != nil {
            return .length("server sent an unusable Content-Length (\(head["content-length"] ?? "")): where the body ends cannot be known")
        }
        let fresh = Validator.strong(etag: head["etag"], lastModified: head["last-modified"], date: head["date"])
        if resumeOffset > 0 {
            // A validator is one resource's: a resume that a redirect took to another URL than
            // the one the bytes kept came from (`/latest` leading to a newer file) would splice
            // two files whose validators happen to match (a revision counter, a date). The query
            // is left out of the comparison: signed links (a release asset's, a presigned
            // object's) carry a new signature each time, to the same file.
            if head.status == 206 || head.status == 416, let storedURL, let url = head.url?.absoluteString,
               Self.resource(url) != Self.resource(storedURL) {
                return .mustRestart("the resume was answered from another URL than the one the bytes kept came from "
                                    + "(a redirect now leads elsewhere): their validator does not hold there")
            }
            switch head.status {
            case 206:
                guard let range = head["content-range"].flatMap(ContentRange.parse),
                      let first = range.first, let last = range.last, let complete = range.complete else {
                    return .mustRestart("server answered the resume request with an unusable Content-Range (\(head["content-range"] ?? "none"))")
                }
                guard first == resumeOffset, last == complete - 1 else {
                    return .mustRestart("server sent bytes \(first)-\(last) when asked for \(resumeOffset)-")
                }
                if let known = state.expectedTotal, known != complete {
                    return .mustRestart("the total length changed from \(known) to \(complete) bytes")
                }
                if let fresh, fresh != storedValidator {
                    return .mustRestart("the resource changed (validator \(fresh.headerValue), was \(storedValidator?.headerValue ?? "none"))")
                }
                // A 206 must carry the ETag a 200 would (RFC 9110, 15.3.7): one without the ETag
                // kept does not show that it continues the version on disk (a server that ignores
                // If-Range and drops it would splice two versions). A date is not required there
                // (a server answering If-Range may leave Last-Modified out), but without it the
                // bytes could be another version's: such a server's resumes start over instead.
                if let stored = storedValidator, !stored.isContinued(etag: head["etag"], lastModified: head["last-modified"]) {
                    if case .etag = stored {
                        return .mustRestart("server's partial answer (206) has no strong ETag to show it continues \(stored.headerValue)")
                    }
                    return .mustRestart("server's partial answer (206) has no Last-Modified of \(stored.headerValue) to show it continues that version")
                }
                state.expectedTotal = complete
                state.mode = .writing
                return nil
            case 416:
                // The bytes kept are the whole file only when the server's length is theirs and
                // something shows it is the same version: the total known before (from the first
                // answer's length), or the validator kept, sent again. A body of unknown length
                // (chunked, or to the close) cut short, then a 416 with neither, would place a
                // prefix of a version whose length was never known.
                let range = head["content-range"].flatMap(ContentRange.parse)
                if let complete = range?.complete, complete == resumeOffset,
                   state.expectedTotal == nil || state.expectedTotal == complete,
                   fresh == nil || fresh == storedValidator,
                   state.expectedTotal == complete || fresh != nil {
                    state.expectedTotal = complete
                    state.mode = .alreadyComplete
                    return nil
                }
                if let fresh, fresh != storedValidator {
                    return .mustRestart("the resource changed (validator \(fresh.headerValue), was \(storedValidator?.headerValue ?? "none"))")
                }
                if let complete = range?.complete, complete == resumeOffset {
                    return .mustRestart("server says 416 (range not satisfiable) for the \(resumeOffset) bytes kept, but shows no validator "
                                        + "and no length was known before: the bytes kept are not known to be the whole file")
                }
                return .mustRestart("server says 416 (range not satisfiable) for \(resumeOffset) bytes kept; its length is \(range?.complete.map(String.init) ?? "unknown")")
            case 202:
                // Not ready yet: tried again later, the bytes kept.
                return .http(status: head.status, retryAfter: head["retry-after"])
            case 200..<300:
                return .mustRestart(head.status == 200
                    ? "server sent the whole file instead of the rest (it changed, or ignores Range)"
                    : "server answered the resume request with HTTP \(head.status)")
            default:
                return .http(status: head.status, retryAfter: head["retry-after"])
            }
        }
        guard (200..<300).contains(head.status) else {
            return .http(status: head.status, retryAfter: head["retry-after"])
        }
        if head.status == 206 {
            return .mustRestart("server sent a partial answer (206) to a request for the whole file")
        }
        // Only 200 (and 203, the same through a transforming proxy) carries the file itself:
        // 202's body says it is not ready yet (tried again later), 204 and 205 have none, and
        // 207, 208 and 226 carry something else (a WebDAV status list, a delta).
        guard head.status == 200 || head.status == 203 else {
            return .http(status: head.status, retryAfter: head["retry-after"])
        }
        state.expectedTotal = length
        state.validator = fresh
        state.url = head.url?.absoluteString
        state.mode = .writing
        return nil
    }

    /// A URL without its query and fragment: what names the resource a validator belongs to,
    /// as far as a resume can tell.
    static func resource(_ url: String) -> Substring {
        url.prefix { $0 != "?" && $0 != "#" }
    }

    /// Closes the temp file of an attempt that ended without placing it; an unnamed one that
    /// nothing was written to is kept for the next download into its folder (`UnnamedFilePool`).
    private func closeOrKeep(_ descriptor: Int32, unnamed: Bool) {
        if unnamed {
            UnnamedFilePool.giveBack(descriptor, folder: temp.path.parentFolder)
        } else {
            close(descriptor)
        }
    }

    /// Ends the attempt: checks the response and the body (length, checksum) and, when they check
    /// out, hands over the open temp file to be placed (see `VerifiedFile`); otherwise closes it.
    public func verify(_ fetch: FetchResult) -> Verification {
        let (failure, status, written, total, digest, descriptor, mode, metadata, unnamed) = state.withLock { state in
            let digest = state.hasher.map { hasher -> String in var copy = hasher; return copy.finalize() }
            let descriptor = state.descriptor
            state.descriptor = -1  // owned from here on by this call
            return (state.failure, state.status, state.written, state.expectedTotal, digest, descriptor, state.mode, state.metadata,
                    state.unnamed)
        }
        func fail(_ failure: Failure, _ status: Int?) -> Verification {
            if descriptor >= 0 {
                // Bytes a later attempt can resume keep the name a named temp file would have had
                // (its snapshot then gives their validator).
                let stillUnnamed = state.withLock { state in
                    state.name(temp, descriptor)
                    return state.unnamed
                }
                closeOrKeep(descriptor, unnamed: stillUnnamed)
            }
            return .failed(failure, status: status)
        }
        if let failure { return fail(failure, status) }
        if let fetchFailure = fetch.failure {
            switch fetchFailure {
            case .badRedirect(let why): return fail(.badRedirect(why), status)
            case .cancelled: return fail(.cancelled, status)
            case .untrusted(let why), .unsupported(let why): return fail(.refused(why), status)
            case .unreachable(let why): return fail(.unreachable(why), status)
            case .stalled, .timedOut, .transport, .rejected:
                return fail(.transport(fetchFailure.description), status)
            }
        }
        if mode == .notModified {
            if descriptor >= 0 { closeOrKeep(descriptor, unnamed: unnamed) }
            if !unnamed { temp.remove() }
            return .notModified
        }
        guard mode == .writing || mode == .alreadyComplete, let status, descriptor >= 0 else {
            return fail(.transport("the transfer ended without a response"), status)
        }
        if let total, written != total {
            return fail(.length("body ended after \(written) of \(total) bytes"), status)
        }
        if let expectedChecksum, let digest, digest != expectedChecksum.hex {
            return fail(.checksum(expectedChecksum.algorithm, expected: expectedChecksum.hex, actual: digest), status)
        }
        var file = VerifiedFile(temp: temp, descriptor: descriptor, bytes: written, status: status)
        file.unnamed = unnamed
        file.held = state.withLock { state in
            defer { state.held = [] }
            return state.holding ? state.held : []
        }
        file.metadata = metadata
        if expectedChecksum?.algorithm ?? .sha256 == .sha256 { file.metadata.sha256 = digest }
        return .verified(file)
    }

    /// Hashes the first `length` bytes of the open temp file (read from the descriptor, not the
    /// name, so the bytes hashed are the bytes kept).
    private static func hashPrefix(of fd: Int32, path: String, length: Int64, into hasher: inout any StreamingDigest,
                                   algorithm: Checksum.Algorithm) throws {
        var offset: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while offset < length {
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, min($0.count, Int(length - offset)), off_t(offset)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw TransferIOError.errno("cannot read \(path) to check its \(algorithm.rawValue)") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += Int64(count)
        }
    }
}
