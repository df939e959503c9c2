import Foundation

/// The hidden file a download is written to, beside its destination, so the final rename is
/// atomic (same folder, same file system).
///
/// Guarantees: the name is stable for a job and destination (`.haul-<job>-<hash>.part`), so a
/// later attempt, run or process finds it to resume; `place()` makes the bytes durable (fsync),
/// renames the file over the destination, then makes the rename durable (fsync of the folder) —
/// a reader of the destination sees the old state or the whole new file, never a part.
public struct TempFile: Sendable {
    public static let prefix = ".haul-"
    public static let suffix = ".part"

    public let path: String
    public let destination: String

    public init(destination: String, jobID: Int) {
        self.destination = destination
        let folder = destination.parentFolder
        let hash = String(FNV1a.hash(destination), radix: 16)
        path = (folder.isEmpty ? "" : folder + "/") + "\(Self.prefix)\(jobID)-\(hash)\(Self.suffix)"
    }

    /// The job id a temp file name belongs to, or nil when the name is not a haul temp file.
    public static func jobID(fromName name: String) -> (jobID: Int, hash: String)? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
        let core = name.dropFirst(prefix.count).dropLast(suffix.count)
        let parts = core.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, let id = Int(parts[0]) else { return nil }
        return (id, String(parts[1]))
    }

    /// Refuses a destination whose way there now runs through a symbolic link made after
    /// `since` (Unix ms). Links that existed when the job was added were checked then (see
    /// `DestinationResolver`); one made later (a folder swapped for a link) could lead outside
    /// the output folder, so the download must not follow it.
    public func checkNoNewLinks(since: Int) throws {
        var current = ""
        for component in destination.parentFolder.split(separator: "/") {
            current += "/" + component
            var info = stat()
            guard lstat(current, &info) == 0 else { return }  // the rest does not exist yet
            guard (info.st_mode & S_IFMT) == S_IFLNK else { continue }
            let changed = Int(info.st_ctim.tv_sec) * 1000 + Int(info.st_ctim.tv_nsec) / 1_000_000
            if changed >= since {
                throw TransferIOError("refused: \(current) became a symbolic link after the job was added, so \(destination) could lie outside the output folder")
            }
        }
    }

    /// Opens the temp file for writing, creating it and its folders (with the user's umask), and
    /// takes an exclusive lock on it, so two haul processes never write one temp file (the lock
    /// dies with its process, even on kill -9). Returns the descriptor and the bytes already in
    /// the file, measured once the lock is held, so no other writer can still be growing it.
    /// A symbolic link at the temp file's name is refused (O_NOFOLLOW), never written through: the
    /// name is predictable, and a link planted there could lead outside the output folder.
    public func open() throws -> (descriptor: Int32, length: Int64) {
        var fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o666)
        var openError = errno
        let folder = path.parentFolder
        if fd < 0, openError == ENOENT, !folder.isEmpty {
            // The folder does not exist yet (checked only now: most folders already exist).
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                throw TransferIOError("cannot create folder \(folder): \((error as NSError).localizedDescription)")
            }
            fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o666)
            openError = errno
        }
        if fd < 0 && openError == ELOOP {
            throw TransferIOError("refused: temp file \(path) is a symbolic link; haul does not write through it, as it could lead outside the output folder (remove it to go on)", code: ELOOP)
        }
        guard fd >= 0 else { throw TransferIOError.errno("cannot open temp file \(path)", code: openError) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw TransferIOError("temp file \(path) is being written by another haul process", code: EWOULDBLOCK)
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = TransferIOError.errno("cannot measure temp file \(path)")
            close(fd)
            throw error
        }
        return (fd, Int64(info.st_size))
    }

    /// Removes the temp file, if any.
    public func remove() {
        unlink(path)
    }

    /// fsync the file, rename it over the destination, then (when `syncFolder`) fsync the folder.
    /// A caller that passes `syncFolder: false` must call `TempFile.syncFolder(of:)` before it
    /// treats the rename as durable (this lets it sync a folder once for many files).
    public func place(descriptor fd: Int32, syncFolder: Bool = true) throws {
        guard fsync(fd) == 0 else { throw TransferIOError.errno("cannot flush \(path) to disk") }
        try moveIntoPlace()
        if syncFolder { Self.syncFolder(of: destination) }
    }

    /// Renames the temp file over the destination, refusing a destination that is a folder.
    /// The caller must have made the file's bytes durable first (see `place`, `VerifiedFile`).
    func moveIntoPlace() throws {
        var info = stat()
        if lstat(destination, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw TransferIOError("destination \(destination) is a folder; remove it or choose another out= name")
        }
        guard rename(path, destination) == 0 else { throw TransferIOError.errno("cannot move the download to \(destination)") }
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
}

/// A file-system failure while downloading; the message names the file and the system's reason.
public struct TransferIOError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public let code: Int32

    public init(_ message: String, code: Int32 = 0) {
        self.message = message
        self.code = code
    }

    /// `what`, with the system's reason for `code` (by default, the current errno).
    static func errno(_ what: String, code: Int32 = Glibc.errno) -> TransferIOError {
        TransferIOError("\(what): \(String(cString: strerror(code)))", code: code)
    }

    public var description: String { message }
}
