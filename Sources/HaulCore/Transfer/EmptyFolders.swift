import Foundation
import Synchronization

/// Output folders that held nothing but haul's temp files when a run first looked at them.
///
/// A job never tried before (`Lease.firstTry`) whose folder was empty then has nothing of its
/// own anywhere and found nothing of the user's at its destination, so its preparation need
/// not look there (`ExistingFile.examine`: a lookup of a name that is not there, which on ext4
/// searches the folder's blocks, for every file of a large batch). Something put at that name
/// since is met when the download is placed, and placement never replaces what it did not
/// examine unless the job's policy is `replace` (it links where nothing is; see
/// `TempFile.moveIntoPlace`): a file made there during the run costs a download, never the file.
///
/// Guarantees: a folder is read once (one `readdir` pass, stopped at its first entry that is not
/// a temp file) until `capacity` folders are remembered, then all are forgotten and read again
/// when next asked for, so memory stays flat whatever the number of folders; a folder that does
/// not exist counts as empty (its folders are made for the download); one that cannot be read
/// counts as not empty (every job there looks); safe to call from any thread.
public final class EmptyFolders: Sendable {
    private let known = Mutex<[String: Bool]>([:])
    private let capacity: Int

    public init(capacity: Int = 4_096) {
        self.capacity = capacity
    }

    /// Whether `folder` ("" for the current one) held nothing but haul's temp files when first
    /// looked at.
    public func wereEmpty(_ folder: String) -> Bool {
        if let empty = known.withLock({ $0[folder] }) { return empty }
        let empty = Self.holdsOnlyTempFiles(folder.isEmpty ? "." : folder)
        known.withLock {
            if $0.count >= capacity { $0.removeAll(keepingCapacity: true) }
            $0[folder] = empty
        }
        return empty
    }

    /// Reads `folder` up to its first entry that is not ".", ".." or a haul temp file (a name
    /// `TempFile.jobID(fromName:)` takes, as the start-up sweep does).
    static func holdsOnlyTempFiles(_ folder: String) -> Bool {
        guard let directory = opendir(folder) else { return errno == ENOENT }
        defer { closedir(directory) }
        while true {
            errno = 0
            guard let entry = readdir(directory) else { return errno == 0 }  // the end, or an error
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != "..", TempFile.jobID(fromName: name) == nil { return false }
        }
    }
}
