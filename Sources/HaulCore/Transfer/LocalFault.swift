import Foundation

/// Which file-system errors are the machine's fault, not a job's: the output folder missing or
/// not writable, a read-only file system, a full disk or quota. No job can succeed there until
/// someone mends it, so such failures use no attempts (see `EngineCore`).
///
/// Guarantees: `isLocal` is true only for those errno values; `advice` says what the user can do
/// about each, in one clause.
public enum LocalFault {
    public static func isLocal(_ code: Int32) -> Bool {
        [EACCES, EPERM, EROFS, ENOSPC, EDQUOT, ENOENT, ENOTDIR].contains(code)
    }

    public static func advice(_ code: Int32) -> String {
        switch code {
        case EACCES, EPERM: return "give haul's user write permission there, or choose another -d"
        case EROFS: return "the file system is read-only: remount it read-write, or choose another -d"
        case ENOSPC, EDQUOT: return "the disk (or quota) is full: free some space"
        default: return "create the folder, or make its path one haul can create (or choose another -d)"
        }
    }

    /// The failure a local fault of `error` writing for `destination` is, or nil when it is not one.
    static func failure(_ error: TransferIOError, destination: String) -> DownloadAttempt.Failure? {
        guard isLocal(error.code) else { return nil }
        return .local(folder: destination.parentFolder, why: "\(error.message); \(advice(error.code))")
    }
}
