import CFileSync
import Foundation

/// A download whose status, length and sha256 (when given) checked out, still in its temp file,
/// which stays open and locked (so no other haul process takes it) until it is placed or closed.
///
/// Placing many small files one fsync at a time costs more than the downloads themselves, so
/// a batch is placed in three steps, in this order: `makeDurable` (one syncfs per file system
/// for the whole batch), then `place()` for each file (the rename), then
/// `TempFile.syncFolder(of:)` for each folder (the renames made durable). A file therefore never
/// reaches its destination before its bytes are on disk.
public struct VerifiedFile: Sendable {
    public let temp: TempFile
    public let descriptor: Int32
    public let bytes: Int64
    public let status: Int

    /// Writes the bytes of every file in `files` to disk: one syncfs(2) per file system they
    /// lie on. Throws when the system reports a write error.
    public static func makeDurable(_ files: [VerifiedFile]) throws {
        var synced = Set<UInt64>()
        for file in files {
            var info = stat()
            guard fstat(file.descriptor, &info) == 0 else {
                throw TransferIOError.errno("cannot examine \(file.temp.path)")
            }
            guard synced.insert(UInt64(info.st_dev)).inserted else { continue }
            guard haul_syncfs(file.descriptor) == 0 else {
                throw TransferIOError.errno("cannot flush the downloads in \(file.temp.path.parentFolder) to disk")
            }
        }
    }

    /// Renames the temp file over the destination. Call only after `makeDurable` included it.
    public func place() throws {
        try temp.moveIntoPlace()
    }

    /// Closes the temp file (releasing its lock); call once, after `place()` or instead of it.
    public func close() {
        _ = Glibc.close(descriptor)
    }
}
