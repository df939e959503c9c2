import Foundation

/// What a run does before its first claim: hand back at once the jobs and slots of lease holders
/// known to be dead, and remove temp files no job owns any more.
///
/// Guarantees: only owners on this machine and boot whose process is gone are reclaimed (see
/// `ProcessIdentity.isDead`); a temp file is removed only when it is a regular file, not locked
/// by another process, and no queued or running job owns it: it is this queue's name for a job
/// that ended, or names a job number the queue does not have. A name another queue gives its
/// job of the same number (see `TempFile`) is left alone.
enum Startup {
    static func reclaimDeadOwners(_ store: any JobStore) throws {
        let dead = try store.leaseOwners().filter { text in
            guard let owner = LeaseOwner(text) else { return false }
            return ProcessIdentity.isDead(owner)
        }
        try store.expireLeases(ofOwners: dead)
    }

    /// Removes `.haul-*.part` files that no queued or running job owns; returns how many.
    static func removeOrphanedTempFiles(_ store: any JobStore, queueIdentity: Int) throws -> Int {
        var removed = 0
        // Memory: one entry per distinct folder, not per job.
        for folder in try store.jobFolders() {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names {
                guard let (id, _) = TempFile.jobID(fromName: name) else { continue }
                let path = folder + "/" + name
                if let job = try store.job(id: id) {
                    // Another queue's name for a job of the same number (its identity differs):
                    // that queue's partial file, not this one's to remove.
                    guard TempFile(destination: job.destination, jobID: id, queue: queueIdentity).path == path else { continue }
                    if job.state == .queued || job.state == .running { continue }  // still a partial file to resume
                }
                // Only a regular file of ours: a link is not followed, a FIFO not waited on; a
                // file another haul process holds a lock on (another queue writing into the same
                // folder) is in use: leave it.
                let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
                guard fd >= 0 else { continue }
                defer { close(fd) }
                var info = stat()
                guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
                guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
                if unlink(path) == 0 { removed += 1 }
            }
        }
        return removed
    }
}
