import Foundation

/// Moves a batch of verified downloads to their destinations, durably: their bytes made durable
/// (one syncfs per file system, see `VerifiedFile.makeDurable`), then each renamed into place,
/// then each folder synced so the renames survive a crash.
///
/// Guarantees: a file is renamed only after its bytes are on disk; a file is reported placed
/// only after its folder was synced; every file of the batch is closed (unlocked) on return,
/// placed or not; one file's failure does not fail the others.
public enum Placement {
    /// Places `files`; returns, for each (same order), nil when it is durably in place, else why
    /// not (the reason a user reads). Blocking: run it off any latency-sensitive thread.
    public static func place(_ files: [VerifiedFile]) -> [String?] {
        var outcome = [String?](repeating: nil, count: files.count)
        let durability = VerifiedFile.makeDurable(files)
        var renamed: [Int] = []
        for (index, file) in files.enumerated() {
            defer { file.close() }
            if let problem = durability[index] {
                outcome[index] = problem.message
                continue
            }
            do {
                try file.place()
                renamed.append(index)
            } catch {
                outcome[index] = String(describing: error)
            }
        }
        // A folder that cannot be flushed leaves its jobs unfinished (their files are whole, so
        // a later attempt replaces them safely).
        var synced = Set<String>()
        var folderProblems: [String: String] = [:]
        for index in renamed {
            let destination = files[index].temp.destination
            let folder = destination.parentFolder
            if !synced.contains(folder) && folderProblems[folder] == nil {
                if TempFile.syncFolder(of: destination) {
                    synced.insert(folder)
                } else {
                    // errno is read at once, before another call can change it.
                    folderProblems[folder] = "cannot flush folder \(folder) to disk: \(String(cString: strerror(errno)))"
                }
            }
            if let problem = folderProblems[folder] { outcome[index] = problem }
        }
        return outcome
    }
}
