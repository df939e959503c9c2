import Dispatch
import Foundation
import Synchronization

/// Writes the small bodies that verified files still hold in memory (`VerifiedFile.held`) on a
/// thread of its own, as soon as each file is verified, so that placing a batch no longer
/// begins with writing it.
///
/// Placement is one batch at a time, and on workload A it had become the slowest stage: in runs
/// where transfers waited for it, placing 10,000 files took 820–1,000 ms of a 1.1 s run, 390–600
/// of them writing held bodies (the page cache's first touch of fresh memory is slow in this
/// VM). Written here, while the previous batch is placed, they took 7–13 ms of placement's time.
///
/// Guarantees: everything asked of one writer runs in the order it was asked, on one serial
/// queue: the batch `afterWrites` hands on sees every write asked before it ended. A file whose
/// write succeeded comes back with `held` emptied; one whose write failed keeps its bytes, so
/// `VerifiedFile.makeDurable` writes them again and reports why (a full disk is the machine's
/// fault, see `LocalFault`). A file given to `close` or `closeAll` is closed only after any
/// write to its descriptor ended, so a write never reaches a descriptor number that the system
/// has since given to another file.
final class HeldBodyWriter: Sendable {
    private let queue = HelperQueue.serial("haul.held-bodies")
    /// Tokens of files whose held bytes are written, until their batch or their close.
    private let written = Mutex<Set<String>>([])

    /// Writes `file`'s held bytes, if it holds any, at their offset.
    func write(_ file: VerifiedFile, token: String) {
        guard !file.held.isEmpty else { return }
        queue.async { [self] in
            if file.writeHeld() == nil { written.withLock { _ = $0.insert(token) } }
        }
    }

    /// Hands `batch` to `body` (on this writer's queue) once every write asked before has
    /// ended, each file's `held` emptied if its bytes are written.
    func afterWrites(_ batch: [(token: String, file: VerifiedFile)], _ body: @escaping @Sendable ([VerifiedFile]) -> Void) {
        queue.async { [self] in
            let files = written.withLock { set in
                batch.map { token, file in
                    var file = file
                    if set.remove(token) != nil { file.held = [] }
                    return file
                }
            }
            body(files)
        }
    }

    /// Closes `file` once any write to it ended.
    func close(_ file: VerifiedFile, token: String) {
        queue.async { [self] in
            written.withLock { _ = $0.remove(token) }
            file.close()
        }
    }

    /// Closes every file of `files` once every write asked before ended, and returns then.
    func closeAll(_ files: [VerifiedFile]) {
        queue.sync {
            written.withLock { $0.removeAll() }
            for file in files { file.close() }
        }
    }
}
