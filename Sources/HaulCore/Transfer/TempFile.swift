import CFileSync
import Foundation
import Synchronization

/// The hidden file a download is written to, beside its destination, so the final rename is
/// atomic (same folder, same file system).
///
/// Guarantees: the name is stable for a job and destination (`.haul-<job>-<hash>.part`, the hash
/// of the destination and the queue's identity), so a later attempt, run or process on the queue
/// finds it to resume, and another queue's job of the same number and destination never does;
/// it is renamed over the destination only once its bytes are durable (see `VerifiedFile`), and
/// the rename is then made durable with its folder — a reader of the destination sees the old
/// state or the whole new file, never a part.
///
/// A fresh download may start in an unnamed file of the destination's folder (O_TMPFILE, where
/// the file system has it): no name is created, and placing it adds one name to the folder
/// (a link) instead of renaming. Measured on workload A (10,000 files in one folder): the
/// create and the rename took the folder's lock twice a file and cost more kernel time than
/// anything else haul did. An unnamed file gets its name (`name(_:)`) as soon as keeping it
/// could matter: when its body is large or of unknown length, when progress is recorded while
/// it still arrives, and when an attempt ends with bytes worth resuming (see
/// `DownloadAttempt`); a kill -9 before then loses only a small, fast file's bytes, and no file
/// is left behind.
public struct TempFile: Sendable {
    public static let prefix = ".haul-"
    public static let suffix = ".part"

    public let path: String
    public let destination: String

    /// The temp file of job `jobID` of the queue whose identity is `queue` (`JobStore.identity`;
    /// 0 for a queue made before queues had one, whose names stay as they were).
    public init(destination: String, jobID: Int, queue: Int) {
        self.destination = destination
        let folder = destination.parentFolder
        // The hash of "QUEUE:DESTINATION", hashed in two pieces rather than made as one text,
        // and the path written as bytes into one string: interpolations and appends cost about
        // 10 k instructions a download on workload A.
        let hash = queue == 0 ? FNV1a.hash(destination) : FNV1a.hash(destination, continuing: FNV1a.hash("\(queue):"))
        path = Self.path(folder: folder, jobID: jobID, hash: hash)
    }

    /// "FOLDER/.haul-JOB-HASH.part" (no "FOLDER/" when `folder` is empty), HASH in lower-case hex.
    private static func path(folder: String, jobID: Int, hash: UInt64) -> String {
        var folder = folder
        return folder.withUTF8 { folderBytes in
            String(unsafeUninitializedCapacity: folderBytes.count + 64) { buffer in
                var at = 0
                func put(_ byte: UInt8) { buffer[at] = byte; at += 1 }
                for byte in folderBytes { put(byte) }
                if !folderBytes.isEmpty { put(UInt8(ascii: "/")) }
                for byte in prefix.utf8 { put(byte) }
                // The job id in decimal (negative only in a hand-made database).
                if jobID < 0 { put(UInt8(ascii: "-")) }
                var count = 1
                var rest = jobID.magnitude
                while rest >= 10 { rest /= 10; count += 1 }
                rest = jobID.magnitude
                for index in stride(from: at + count - 1, through: at, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                at += count
                put(UInt8(ascii: "-"))
                // The hash in lower-case hex, without leading zeros (as `String(_:radix:)`).
                var shift = 60
                while shift > 0, (hash >> UInt64(shift)) & 0xF == 0 { shift -= 4 }
                while shift >= 0 {
                    let nibble = UInt8((hash >> UInt64(shift)) & 0xF)
                    put(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
                    shift -= 4
                }
                for byte in suffix.utf8 { put(byte) }
                return at
            }
        }
    }

    /// The job id a temp file name belongs to, or nil when the name is not a haul temp file.
    public static func jobID(fromName name: String) -> (jobID: Int, hash: String)? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
        let core = name.dropFirst(prefix.count).dropLast(suffix.count)
        let parts = core.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, let id = Int(parts[0]) else { return nil }
        return (id, String(parts[1]))
    }

    /// The resolution of CLOCK_REALTIME_COARSE, which file times are taken from, in whole ms.
    static let coarseClockTick: Int = {
        var resolution = timespec()
        guard clock_getres(CLOCK_REALTIME_COARSE, &resolution) == 0 else { return 10 }
        return max(1, (Int(resolution.tv_sec) * 1_000_000_000 + Int(resolution.tv_nsec) + 999_999) / 1_000_000)
    }()

    /// Refuses a destination whose way there now runs through a symbolic link that could lead
    /// outside the output folder. Without `root`: a link made after `since` (Unix ms). Links that
    /// existed when the job was added were checked then (see
    /// `DestinationResolver`); one made later (a folder swapped for a link) could lead outside
    /// the output folder, so the download must not follow it. The way is resolved as the kernel
    /// resolves it: through each link's target, whose own links are checked too (an old link to a
    /// folder that was later swapped for a new link is refused).
    ///
    /// A file's change time comes from the kernel's coarse clock, which runs up to one tick
    /// (often 4 ms) behind the clock `since` was read from: a link made just after the add can
    /// carry an earlier time, so links changed up to one tick before `since` count as new too.
    ///
    /// With `root` (the output folder the job was added with, `Job.root`), a link below it is
    /// followed only when it leads to a place inside it, however old or new the link: a folder
    /// moved into place with its links, or another machine's disk, was never looked at when the
    /// job was added. Links above it (the way to the output folder) are judged by age as above.
    public func checkNoNewLinks(since: Int, root: String? = nil) throws {
        var clear: [String: UInt64] = [:]
        try checkNoNewLinks(since: since, root: root, clear: &clear, now: 0)
    }

    /// How long a folder found with no link on its way is taken at that word
    /// (`checkNoNewLinks(since:clear:now:)`), in nanoseconds: 10 ms.
    public static let clearFor: UInt64 = 10_000_000

    /// `checkNoNewLinks(since:)` for one of a batch of files prepared together: a folder in
    /// `clear` was found with no link at all on its way less than `clearFor` before `now` (a
    /// monotonic time in nanoseconds; earlier in the batch), and is not looked at again; a folder
    /// found so is added with `now`. A batch of workload A's files then looks at their one folder
    /// once, not once a file (two system calls each), and no file is prepared on a look older
    /// than 10 ms (a preparation that reads a large file for its checksum cannot stretch it).
    public func checkNoNewLinks(since: Int, root: String? = nil, clear: inout [String: UInt64], now: UInt64) throws {
        // Most ways hold no link at all: one system call says so (and the component-by-component
        // look below, which allows links older than the job, is needed only when it does not).
        let folder = destination.parentFolder
        if let checked = clear[folder], now &- checked < Self.clearFor { return }
        if haul_way_has_no_links(folder) == 1 {
            clear[folder] = now
            return
        }
        let since = since - Self.coarseClockTick
        // The output folder as the walk below sees it (links followed), looked up at the first
        // link met; nil when it does not exist (then nothing below it does) or the job does not say.
        var physicalRoot: String?? = root == nil ? .some(nil) : nil
        var pending = folder.split(separator: "/").map(String.init)
        var current = ""  // the way resolved so far, links followed
        var followed = 0
        while !pending.isEmpty {
            let component = pending.removeFirst()
            if component == "." { continue }
            if component == ".." {
                current = current.parentFolder
                if current == "/" { current = "" }
                continue
            }
            let next = current + "/" + component
            var info = stat()
            guard lstat(next, &info) == 0 else { return }  // the rest does not exist yet
            guard (info.st_mode & S_IFMT) == S_IFLNK else { current = next; continue }
            let changed = Int(info.st_ctim.tv_sec) * 1000 + Int(info.st_ctim.tv_nsec) / 1_000_000
            if physicalRoot == nil { physicalRoot = .some(root.flatMap(\.realPath)) }
            if let inside = physicalRoot.flatMap({ $0 }).map({ $0 == "/" ? "/" : $0 + "/" }), next.hasPrefix(inside) {
                guard let resolved = next.realPath else {
                    throw TransferIOError("refused: \(next), on the way to \(destination), is a symbolic link that leads nowhere (its target does not exist)")
                }
                guard resolved + "/" == inside || resolved.hasPrefix(inside) else {
                    throw TransferIOError("refused: \(next) is a symbolic link that leads outside the output folder \(root ?? ""), so \(destination) would lie outside it")
                }
            } else if changed >= since {
                throw TransferIOError("refused: \(next) became a symbolic link after the job was added, so \(destination) could lie outside the output folder")
            }
            followed += 1
            var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlink(next, &target, target.count - 1)
            guard followed <= 40, length > 0 else {
                throw TransferIOError("refused: the way to \(destination) runs through \(next), a symbolic link that cannot be followed")
            }
            let text = String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("/") { current = "" }
            pending = text.split(separator: "/").map(String.init) + pending
        }
    }

    /// Opens the temp file for reading and writing, creating it and its folders (with the user's
    /// umask), and takes an exclusive lock on it, so two haul processes never write one temp file
    /// (the lock dies with its process, even on kill -9). Returns the descriptor and the bytes
    /// already in the file, measured once the lock is held, so no other writer can still be
    /// growing it.
    ///
    /// The name is predictable, so something planted there is refused (`TransferIOError.unsafe`),
    /// never written through or waited on: a symbolic link (O_NOFOLLOW), anything but a regular
    /// file (a FIFO would block the open: O_NONBLOCK), and a file with other hard links (one of
    /// them could lie outside the output folder).
    public func open() throws -> (descriptor: Int32, length: Int64) {
        let opened = try open(unnamed: false)
        return (opened.descriptor, opened.length)
    }

    /// `open()`, except that when no temp file exists yet and `unnamed` is set, the download
    /// starts in an unnamed file of the folder (`unnamed` in the result), where the file system
    /// has them. With `lookForEarlier` false as well, the download starts unnamed without
    /// looking for an earlier attempt's file: for a job no earlier attempt can have left one
    /// (see `Lease.firstTry`); whatever else holds the name is left alone. Looking costs a lookup
    /// of a name that is not there, which on ext4 searches the folder's blocks: measured on
    /// workload A, a tenth of the kernel time a file spent opening.
    public func open(unnamed: Bool, lookForEarlier: Bool = true) throws -> (descriptor: Int32, length: Int64, unnamed: Bool) {
        let flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
        let folder = path.parentFolder
        var fd: Int32 = -1
        var openError = ENOENT
        if unnamed && Self.unnamedFilesWork && !Self.linkRefused.load(ordering: .relaxed) {
            if lookForEarlier {
                fd = Glibc.open(path, flags)  // an earlier attempt's file, to resume
                openError = errno
            }
            if fd < 0 && openError == ENOENT {
                if let kept = UnnamedFilePool.take(folder: folder) { return (kept, 0, true) }
                var created = haul_open_unnamed(folder.isEmpty ? "." : folder, 0o666)
                if created < 0 && errno == ENOENT && !folder.isEmpty {
                    try Self.createFolders(folder)
                    created = haul_open_unnamed(folder, 0o666)
                }
                if created >= 0 { return (created, 0, true) }
                // Not on this file system (EOPNOTSUPP, EISDIR…): a named file, as below.
            }
        }
        if fd < 0 && openError == ENOENT {
            fd = Glibc.open(path, flags | O_CREAT, 0o666)
            openError = errno
        }
        if fd < 0, openError == ENOENT, !folder.isEmpty {
            // The folder does not exist yet (checked only now: most folders already exist).
            try Self.createFolders(folder)
            fd = Glibc.open(path, flags | O_CREAT, 0o666)
            openError = errno
        }
        guard fd >= 0 else {
            var info = stat()
            if lstat(path, &info) == 0 {
                switch info.st_mode & S_IFMT {
                case S_IFLNK: throw TransferIOError.refused("temp file \(path) is a symbolic link")
                case S_IFREG: break
                default: throw TransferIOError.refused("temp file \(path) is not a regular file")
                }
            }
            throw TransferIOError.errno("cannot open temp file \(path)", code: openError)
        }
        // Locked first, then examined once: what it is, its links, and its length with no other
        // writer left. O_NONBLOCK stays set: it changes nothing for a regular file, the only
        // kind kept (clearing it cost two system calls a file).
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(fd)
            if code == EWOULDBLOCK {
                throw TransferIOError("temp file \(path) is being written by another haul process", code: EWOULDBLOCK)
            }
            throw TransferIOError.errno("cannot lock temp file \(path)", code: code)
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = TransferIOError.errno("cannot examine temp file \(path)")
            close(fd)
            throw error
        }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1 else {
            close(fd)
            throw TransferIOError.refused((info.st_mode & S_IFMT) == S_IFREG
                ? "temp file \(path) has other hard links (one could lie outside the output folder)"
                : "temp file \(path) is not a regular file")
        }
        return (fd, Int64(info.st_size), false)
    }

    /// Whether unnamed files can be named here: through /proc/self/fd (without /proc, a
    /// download always starts in a named file).
    static let unnamedFilesWork = access("/proc/self/fd", X_OK) == 0
    /// Set once a link through /proc/self/fd failed for another reason than a taken name (a
    /// sandbox may refuse it): from then on every download starts in a named file, so only
    /// the attempts already under way are lost to it.
    static let linkRefused = Atomic<Bool>(false)

    /// Links the open file `fd` at `target`: 0, or the errno (EEXIST: taken).
    private static func linkOpenFile(_ fd: Int32, at target: String) -> Int32 {
        if haul_link_open_file(fd, target) == 0 { return 0 }
        let code = errno
        if code != EEXIST { linkRefused.store(true, ordering: .relaxed) }
        return code
    }

    /// Gives the unnamed file open as `fd` this temp file's name, locked first (see `open()`),
    /// so a later attempt can resume it. False when the name is taken or the link fails: the
    /// file then stays unnamed (and is not resumable).
    @discardableResult
    func name(_ fd: Int32) -> Bool {
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
        return Self.linkOpenFile(fd, at: path) == 0
    }

    /// Removes the temp file, if any.
    public func remove() {
        unlink(path)
    }

    /// Moves the temp file into place as `mode` says, refusing a destination that is a folder,
    /// and refusing when the name no longer holds the open file `fd` (it was swapped since: what
    /// the name holds now was never checked). The caller must have made the file's bytes durable
    /// first (see `VerifiedFile`).
    func moveIntoPlace(descriptor fd: Int32, mode: Placement.Mode, unnamed: Bool = false) throws -> Placement.Moved {
        var mode = mode
        if case .replaceOwn(let beside, let placed, let mark, let otherwise) = mode {
            // Looked at again just before the move: the user may have written there since.
            let target = beside ?? destination
            switch ExistingFile.examine(target, placed: placed, mark: mark) {
            case .nothing, .haulsOwn, .folder: mode = beside.map { .replaceAt($0) } ?? .replace  // (a folder is refused below)
            case .usersFile: mode = otherwise
            }
        }
        let replacing = mode == .replace || { if case .replaceAt = mode { true } else { false } }()
        if unnamed {
            // Linked where nothing is, a taken name fails the link (so a folder there is looked
            // for only then); renamed over what is there once it has the temp file's name.
            if replacing {
                try Self.refuseFolder(destination)
                let code = Self.linkOpenFile(fd, at: path)
                guard code == 0 else {
                    throw TransferIOError.errno("cannot name the download \(path) to move it over \(destination)", code: code)
                }
            }
        } else {
            try Self.refuseFolder(destination)
            var named = stat(), opened = stat()
            guard fstat(fd, &opened) == 0 else { throw TransferIOError.errno("cannot examine \(path)") }
            guard lstat(path, &named) == 0, named.st_dev == opened.st_dev, named.st_ino == opened.st_ino else {
                throw TransferIOError.refused("temp file \(path) was replaced while haul wrote it")
            }
        }
        /// Puts the download at `target` only when nothing is there; false when it is taken.
        func placeUnlessTaken(_ target: String) throws -> Bool {
            guard unnamed else { return try moveUnlessTaken(to: target) }
            let code = Self.linkOpenFile(fd, at: target)
            if code == 0 { return true }
            guard code == EEXIST else { throw TransferIOError.errno("cannot move the download to \(target)", code: code) }
            try Self.refuseFolder(target)
            return false
        }
        switch mode {
        case .replaceOwn:
            preconditionFailure("resolved above")
        case .replace, .replaceAt:
            let target: String
            if case .replaceAt(let beside) = mode { target = beside } else { target = destination }
            guard rename(path, target) == 0 else {
                let error = TransferIOError.errno("cannot move the download to \(target)")
                if unnamed { unlink(path) }  // the name it took just now
                throw error
            }
            return .moved(to: mode == .replace ? nil : target)
        case .keepExisting:
            if try placeUnlessTaken(destination) { return .moved(to: nil) }
            var there = stat()
            let size = lstat(destination, &there) == 0 ? Int64(there.st_size) : 0
            // A whole, verified download nobody needs: the user's file stays (an unnamed one
            // goes with its descriptor).
            if !unnamed { unlink(path) }
            return .destinationTaken(size: size)
        case .besideExisting:
            if try placeUnlessTaken(destination) { return .moved(to: nil) }
            for number in 1...Self.besideLimit {
                let candidate = Self.beside(destination, number)
                if try placeUnlessTaken(candidate) { return .moved(to: candidate) }
            }
            throw TransferIOError("\(destination) and \(Self.besideLimit) numbered names beside it are all taken; remove some, or use --if-exists replace")
        }
    }

    /// Refuses to place a download at `target` when a folder is there.
    private static func refuseFolder(_ target: String) throws {
        var info = stat()
        if lstat(target, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw TransferIOError("destination \(target) is a folder; remove it or choose another out= name")
        }
    }

    /// How many numbered names `rename` tries beside a taken destination.
    static let besideLimit = 999

    /// `NAME.N.EXT` beside `destination` (`NAME.N` when it has no extension).
    static func beside(_ destination: String, _ number: Int) -> String {
        let folder = destination.parentFolder
        let name = String(destination.dropFirst(folder.isEmpty ? 0 : folder.count + 1))
        let numbered: String
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            numbered = "\(name[..<dot]).\(number)\(name[dot...])"
        } else {
            numbered = "\(name).\(number)"
        }
        return folder.isEmpty ? numbered : folder + "/" + numbered
    }

    /// Renames the temp file to `target` only when nothing is there (atomically, with
    /// RENAME_NOREPLACE; with a hard link on a file system without it). False when taken.
    private func moveUnlessTaken(to target: String) throws -> Bool {
        if haul_rename_noreplace(path, target) == 0 { return true }
        if errno == EEXIST { return false }
        guard errno == EINVAL || errno == ENOSYS else { throw TransferIOError.errno("cannot move the download to \(target)") }
        if link(path, target) == 0 {
            unlink(path)
            return true
        }
        if errno == EEXIST { return false }
        throw TransferIOError.errno("cannot move the download to \(target) without replacing what may be there")
    }

    /// Creates `folder` and the folders above it that are missing; the error carries errno.
    static func createFolders(_ folder: String) throws {
        guard !folder.isEmpty, mkdir(folder, 0o777) != 0 else { return }
        switch errno {
        case EEXIST: return
        case ENOENT:
            try createFolders(folder.parentFolder)
            if mkdir(folder, 0o777) != 0 && errno != EEXIST { throw TransferIOError.errno("cannot create folder \(folder)") }
        default:
            throw TransferIOError.errno("cannot create folder \(folder)")
        }
    }

    /// Makes renames in the folder holding `path` durable. Returns false when the folder could
    /// not be opened or flushed.
    @discardableResult
    public static func syncFolder(of path: String) -> Bool {
        let folder = path.parentFolder
        let dirFD = Glibc.open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else { return false }
        defer { close(dirFD) }
        return fsync(dirFD) == 0
    }

    /// Writes `bytes` at `offset` of this temp file, open as `fd`: nil, or why not (the file is
    /// then not whole; `code` is the errno). Every body byte goes through here at its own
    /// offset, so no write depends on where the descriptor's position was left.
    func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32, at offset: Int64) -> TransferIOError? {
        var done = 0
        while done < bytes.count {
            let count = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if count < 0 {
                if errno == EINTR { continue }
                return TransferIOError.errno("cannot write \(path)")
            }
            done += count
        }
        return nil
    }
}

/// A file-system failure while downloading; the message names the file and the system's reason.
public struct TransferIOError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public let code: Int32
    /// Writing here could leave the output folder (something was planted at the temp file's
    /// name): the job fails at once, and what is there is left alone.
    public let unsafe: Bool

    public init(_ message: String, code: Int32 = 0, unsafe: Bool = false) {
        self.message = message
        self.code = code
        self.unsafe = unsafe
    }

    /// A refusal to write where `what` says, with what the user can do.
    static func refused(_ what: String) -> TransferIOError {
        TransferIOError("refused: \(what); haul does not write through it, as it could lead outside the output folder (remove it to go on)",
                        unsafe: true)
    }

    /// `what`, with the system's reason for `code` (by default, the current errno).
    static func errno(_ what: String, code: Int32 = Glibc.errno) -> TransferIOError {
        TransferIOError("\(what): \(String(cString: strerror(code)))", code: code)
    }

    public var description: String { message }
}
