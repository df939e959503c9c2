import CFileSync
import Foundation

/// A download whose status, length and checksum (when given) checked out, still in its temp file,
/// which stays open and locked (so no other haul process takes it) until it is placed or closed.
///
/// Placing many small files one fsync at a time costs more than the downloads themselves, so
/// a batch is placed in three steps, in this order: `makeDurable` (one syncfs per file system
/// for a batch of several files, an fsync for each of one or two), then `place()` for each file whose bytes made it (the rename), then
/// `TempFile.syncFolder(of:)` for each folder (the renames made durable). A file therefore never
/// reaches its destination before its bytes are on disk.
public struct VerifiedFile: Sendable {
    public var temp: TempFile { storage.temp }
    public var descriptor: Int32 { storage.descriptor }
    public var bytes: Int64 { storage.bytes }
    public var status: Int { storage.status }
    /// What the response said of the file (validators, type, final URL) and its sha256 when
    /// computed.
    public var metadata: ResponseMetadata {
        get { storage.metadata }
        _modify {
            let storage = unique()
            yield &storage.metadata
        }
    }
    /// Written on the file (an extended attribute) just before it is moved into place, so that
    /// haul knows it as its own even when a crash came before the queue recorded it.
    public var mark: String? {
        get { storage.mark }
        _modify {
            let storage = unique()
            yield &storage.mark
        }
    }
    /// The file has no name yet: it is linked into place, not renamed (see `TempFile`).
    public var unnamed: Bool {
        get { storage.unnamed }
        _modify {
            let storage = unique()
            yield &storage.unnamed
        }
    }
    /// The body's last bytes, not yet in the temp file: a small body held in memory while it
    /// arrived (see `DownloadAttempt.heldLimit`). `makeDurable` writes them first.
    public var held: [UInt8] {
        get { storage.held }
        _modify {
            let storage = unique()
            yield &storage.held
        }
    }

    /// The fields, in one object shared by copies until one is changed (copy on write): a
    /// verified file passes through four or five hands on its way to its place, and copying nine
    /// strings and arrays each time cost about 80 reference count changes a file.
    private var storage: Storage

    /// Safe to send: a storage is changed only while this value holds the one reference to it
    /// (`unique()`), so no other thread can see it change.
    private final class Storage: @unchecked Sendable {
        let temp: TempFile
        let descriptor: Int32
        let bytes: Int64
        let status: Int
        var metadata = ResponseMetadata()
        var mark: String?
        var unnamed = false
        var held: [UInt8] = []

        init(temp: TempFile, descriptor: Int32, bytes: Int64, status: Int) {
            self.temp = temp
            self.descriptor = descriptor
            self.bytes = bytes
            self.status = status
        }

        func copy() -> Storage {
            let copy = Storage(temp: temp, descriptor: descriptor, bytes: bytes, status: status)
            copy.metadata = metadata
            copy.mark = mark
            copy.unnamed = unnamed
            copy.held = held
            return copy
        }
    }

    public init(temp: TempFile, descriptor: Int32, bytes: Int64, status: Int) {
        storage = Storage(temp: temp, descriptor: descriptor, bytes: bytes, status: status)
    }

    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// Writes the bytes of every file in `files` to disk and returns, for each file (same
    /// order), nil or why its bytes may not be on disk. One syncfs(2) per file system writes
    /// the whole batch (when it holds at least `syncfsBatchSize` files: syncfs also waits for
    /// every other dirty file there); each file's own write-back errors are then read through its descriptor
    /// (syncfs alone reports only errors of the file system as a whole). Where syncfs fails, or
    /// is not trusted on that file system, each file gets fsync(2) instead, so one bad file does
    /// not fail the others.
    /// A file whose held bytes cannot be written fails with the reason (see `LocalFault` for
    /// those that are the machine's fault).
    public static func makeDurable(_ files: [VerifiedFile]) -> [TransferIOError?] {
        // The reason is read from errno at once, before any other call can change it.
        let devices = files.map { file -> Result<UInt64, TransferIOError> in
            if let problem = file.writeHeld() {
                return .failure(problem)
            }
            var info = stat()
            guard fstat(file.descriptor, &info) == 0 else { return .failure(.errno("cannot examine \(file.temp.path)")) }
            return .success(UInt64(info.st_dev))
        }
        var filesOnDevice: [UInt64: Int] = [:]
        for case .success(let device) in devices { filesOnDevice[device, default: 0] += 1 }
        var syncedDevices: [UInt64: Bool] = [:]
        for (file, device) in zip(files, devices) {
            guard case .success(let device) = device, syncedDevices[device] == nil else { continue }
            // syncfs writes every dirty file of the file system, the user's too: worth it for a
            // batch of files, not for one or two, which get their own fsync.
            syncedDevices[device] = filesOnDevice[device, default: 0] >= Self.syncfsBatchSize
                && Self.syncfsIsTrusted(for: file.descriptor) && haul_syncfs(file.descriptor) == 0
        }
        return zip(files, devices).map { file, examined -> TransferIOError? in
            let device: UInt64
            switch examined {
            case .failure(let error): return error
            case .success(let found): device = found
            }
            let written = syncedDevices[device] == true
                ? haul_wait_for_writeback(file.descriptor) == 0
                : fsync(file.descriptor) == 0
            return written ? nil : TransferIOError.errno("cannot flush \(file.temp.path) to disk")
        }
    }

    /// Writes the held bytes (if any) where they belong, the end of the file: nil, or why not.
    func writeHeld() -> TransferIOError? {
        held.withUnsafeBytes { temp.write($0, to: descriptor, at: bytes - Int64($0.count)) }
    }

    /// Batches with fewer files than this on one file system are flushed file by file.
    static let syncfsBatchSize = 4

    /// Local block file systems whose syncfs writes and waits for every dirty file and flushes
    /// the device (ext4, XFS, btrfs, F2FS). Elsewhere (NFS, FUSE, …) syncfs may promise less
    /// than fsync, so each file gets its own fsync.
    private static let syncfsFileSystems: Set<UInt64> = [0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010]

    private static func syncfsIsTrusted(for descriptor: Int32) -> Bool {
        let type = haul_filesystem_type(descriptor)
        return type >= 0 && syncfsFileSystems.contains(UInt64(type))
    }

    /// Renames the temp file over the destination. Call only after `makeDurable` included it:
    /// a file that does not hold all its bytes (its held bytes not written) is refused.
    public func place(_ mode: Placement.Mode = .replace) throws -> Placement.Moved {
        var info = stat()
        guard fstat(descriptor, &info) == 0, Int64(info.st_size) == bytes else {
            throw TransferIOError("\(temp.path) holds \(info.st_size) of its \(bytes) bytes: not placed")
        }
        return try temp.moveIntoPlace(descriptor: descriptor, mode: mode, unnamed: unnamed)
    }

    /// What identifies the file now (it keeps its inode, size and time when renamed).
    public func identity() -> FileIdentity? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return FileIdentity(stat: info)
    }

    /// Closes the temp file (releasing its lock); call once, after `place()` or instead of it.
    public func close() {
        _ = Glibc.close(descriptor)
    }
}
