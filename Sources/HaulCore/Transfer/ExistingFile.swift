import CFileSync
import Foundation

/// What is at a job's destination before haul fetches anything for it, and what that means.
///
/// Guarantees: nothing here changes the file system; a destination is haul's own only while
/// the file there still has the identity haul recorded when it placed it (size, time to the
/// nanosecond, inode); a symbolic link or any other file there is the user's; the digest of a
/// file is read in bounded chunks (memory stays flat whatever its size).
public enum ExistingFile {
    public enum Found: Sendable, Equatable {
        case nothing
        /// The file haul placed there for this job, unchanged.
        case haulsOwn
        /// A file haul did not place (or that changed since), `size` bytes.
        case usersFile(size: Int64)
        /// A folder: no download is placed there (see `TempFile.moveIntoPlace`).
        case folder
    }

    /// - Parameter mark: what haul writes on a file it places for this job (see `mark(jobID:createdAt:)`):
    ///   a file carrying it is haul's own even when the queue did not record it (a crash came
    ///   between the move into place and the record).
    /// - Parameter destination: where to look: the job's destination, or where haul placed its
    ///   file beside it (`placed.path`).
    public static func examine(_ destination: String, placed: PlacedFile?, mark: @autoclosure () -> String? = nil) -> Found {
        var info = stat()
        guard lstat(destination, &info) == 0 else { return .nothing }
        if (info.st_mode & S_IFMT) == S_IFDIR { return .folder }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return .usersFile(size: Int64(info.st_size)) }
        if let placed, FileIdentity(stat: info) == placed.identity { return .haulsOwn }
        // Not recorded (a crash came between the move and the record): the mark tells. Once it is
        // recorded, the identity alone does, so a file changed since is the user's.
        // (The mark is made only here: most destinations hold nothing, and cost no string.)
        if placed == nil, let mark = mark(), Self.mark(of: destination) == mark { return .haulsOwn }
        return .usersFile(size: Int64(info.st_size))
    }

    /// What haul writes on the file it places for a job: unique to the job and its queue (the
    /// job's id and when it was added, to the millisecond).
    public static func mark(jobID: Int, createdAt: Int) -> String { "\(jobID)@\(createdAt)" }

    /// Where a file bearing `mark` lies beside `destination` (`NAME.1.EXT`, `NAME.2.EXT`…, as
    /// `--if-exists rename` places them, up to the first free name), or nil: a job placed by
    /// rename whose record was lost to a crash finds its file there.
    public static func markedBeside(_ destination: String, mark: String) -> String? {
        for number in 1...TempFile.besideLimit {
            let candidate = TempFile.beside(destination, number)
            var info = stat()
            guard lstat(candidate, &info) == 0 else { return nil }
            if (info.st_mode & S_IFMT) == S_IFREG, Self.mark(of: candidate) == mark { return candidate }
        }
        return nil
    }

    /// The mark for `job`'s file.
    public static func mark(for job: Job) -> String { mark(jobID: job.id, createdAt: job.createdAt) }

    /// The mark on the file at `path`, or nil.
    static func mark(of path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = haul_read_mark(path, &buffer, 63)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The identity of the regular file at `path` now (not following a link); nil when there
    /// is none.
    public static func identity(of path: String) -> FileIdentity? {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return FileIdentity(stat: info)
    }

    /// The lower-case hex digest, by `algorithm`, of the regular file at `path` (not following
    /// a link).
    public static func digest(of path: String, _ algorithm: Checksum.Algorithm) throws -> String {
        // Non-blocking, so a FIFO there cannot hang the run; only a regular file is read.
        let descriptor = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw TransferIOError.errno("cannot read \(path)") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw TransferIOError("\(path) is not a regular file; remove it, or add the URL with --if-exists rename")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        var digest = algorithm.makeDigest()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw TransferIOError.errno("cannot read \(path)") }
            if count == 0 { break }
            buffer.withUnsafeBytes { digest.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        return digest.finalize()
    }
}

extension FileIdentity {
    init(stat info: stat) {
        self.init(size: Int64(info.st_size), modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                  changed: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec), inode: UInt64(info.st_ino))
    }
}
