import CFileSync
import Foundation

/// Moves a batch of verified downloads to their destinations, durably: their bytes made durable
/// (one syncfs per file system, see `VerifiedFile.makeDurable`), then each moved into place as
/// its mode says, then each folder synced so the renames survive a crash.
///
/// Guarantees: a file is moved only after its bytes are on disk; a file is reported placed
/// only after its folder was synced; `keepExisting` and `besideExisting` never replace a file
/// (an atomic no-replace rename: a file that appeared at the destination during the download is
/// kept, and the download removed); every file of the batch is closed (unlocked) on return,
/// placed or not; one file's failure does not fail the others.
public enum Placement {
    /// How a file goes into place.
    public indirect enum Mode: Sendable, Equatable {
        /// Over whatever is there (haul's own earlier file, or `--if-exists replace`).
        case replace
        /// Only where nothing is: a file there is kept, the download dropped.
        case keepExisting
        /// At the destination when it is free, else beside it as `NAME.1.EXT`, `NAME.2.EXT`…
        case besideExisting
        /// Over haul's own file placed beside the destination earlier (a refresh of a job placed
        /// by `rename`).
        case replaceAt(String)
        /// A refresh: over haul's own file at `beside` (nil: at the destination) while it is still
        /// haul's own, unchanged since it was placed (`placed`, or its `mark`), as it was when
        /// the download began; else, the user having written there meanwhile, as `otherwise`
        /// says (their file is never replaced unless they asked for it).
        case replaceOwn(beside: String?, placed: PlacedFile?, mark: String?, otherwise: Mode)
    }

    /// What a move did.
    public enum Moved: Sendable, Equatable {
        /// In place: at `to`, or at the destination when nil.
        case moved(to: String?)
        /// The destination held a file, which was kept (`size` bytes); the download is gone.
        case destinationTaken(size: Int64)
    }

    /// What became of one file of a batch.
    public enum Result: Sendable, Equatable {
        case placed(PlacedFile)
        case kept(size: Int64)
        /// Not placed: why (the reason a user reads).
        case failed(String)
        /// Not placed, and not the job's fault: its bytes could not be written or flushed because
        /// the output folder cannot be written (see `LocalFault`: a full disk, a read-only file
        /// system). `why` says what failed and what to do.
        case unwritable(folder: String, why: String)
    }

    /// Places `files`; returns what became of each (same order). Blocking: run it off any
    /// latency-sensitive thread.
    public static func place(_ files: [(file: VerifiedFile, mode: Mode)]) -> [Result] {
        var outcome = [Result](repeating: .failed("not placed"), count: files.count)
        let durability = VerifiedFile.makeDurable(files.map(\.file))
        var moved: [(index: Int, path: String)] = []
        for (index, (file, mode)) in files.enumerated() {
            defer { file.close() }
            if let problem = durability[index] {
                if case .local(let folder, let why)? = LocalFault.failure(problem, destination: file.temp.destination) {
                    outcome[index] = .unwritable(folder: folder, why: why)
                } else {
                    outcome[index] = .failed(problem.message)
                }
                continue
            }
            if let mark = file.mark { _ = haul_mark_file(file.descriptor, mark) }  // best effort: not every file system keeps it
            do {
                switch try file.place(mode) {
                case .moved(let to):
                    guard let identity = file.identity() else {
                        outcome[index] = .failed("cannot examine \(to ?? file.temp.destination) after moving it there")
                        continue
                    }
                    outcome[index] = .placed(PlacedFile(path: to, identity: identity, metadata: file.metadata))
                    moved.append((index, to ?? file.temp.destination))
                case .destinationTaken(let size):
                    outcome[index] = .kept(size: size)
                }
            } catch {
                outcome[index] = .failed(String(describing: error))
            }
        }
        // A folder that cannot be flushed leaves its jobs unfinished (their files are whole, so
        // a later attempt replaces them safely).
        var synced = Set<String>()
        var folderProblems: [String: String] = [:]
        for (index, path) in moved {
            let folder = path.parentFolder
            if !synced.contains(folder) && folderProblems[folder] == nil {
                if TempFile.syncFolder(of: path) {
                    synced.insert(folder)
                } else {
                    // errno is read at once, before another call can change it.
                    folderProblems[folder] = "cannot flush folder \(folder) to disk: \(String(cString: strerror(errno)))"
                }
            }
            if let problem = folderProblems[folder] { outcome[index] = .failed(problem) }
        }
        return outcome
    }
}
