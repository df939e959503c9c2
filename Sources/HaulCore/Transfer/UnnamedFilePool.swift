import Foundation
import Synchronization

/// Unnamed temp files (O_TMPFILE, see `TempFile`) that a download opened and never wrote, kept
/// open to be the file of the next download into the same folder.
///
/// A download that fails before its first byte (a 404, a refused connection) used to close its
/// unnamed file, and the next download made a new one. Each such file is an inode allocated and
/// freed, and ext4 allocates around inodes freed in the last seconds (`recently_deleted`), looking
/// at each of them: `haul get` of 200,000 URLs that all answered 404 took 18.5 s, with a quarter
/// of the machine's time in ext4's search (`find_get_block_common`, `recently_deleted`), and each
/// run slower than the one before (17, 21, 25 s…).
///
/// Guarantees: a file comes back only open for reading and writing, unnamed and empty (its size
/// read with fstat when it is given back); it is handed out only for the folder path it was
/// made in, and only while that path still names a folder of the file's file system; at most
/// `capacity` files are kept, or fewer as `keep(atMost:)` says (any other given back is
/// closed), so the descriptors held here stay within what `DescriptorBudget` gives them.
enum UnnamedFilePool {
    /// Files kept at most, over every folder: enough for the preparations ahead (up to four
    /// rounds) and the transfers. With 16, a burst of preparations emptied the pool and the
    /// failures that followed overfilled it: 200,000 404s spent 11–16 s in the kernel, against
    /// 18–33 s keeping none and 4.4–5.0 s keeping 128.
    static let capacity = 128

    /// Files kept at most now: `capacity`, or fewer where the limit on open files is low (see
    /// `DescriptorBudget.keptRoom`).
    private static let limit = Atomic<Int>(capacity)

    /// Keeps at most `count` files (at most `capacity`) from now on.
    static func keep(atMost count: Int) {
        limit.store(max(0, min(count, capacity)), ordering: .relaxed)
    }

    private struct Kept {
        var descriptor: Int32
        var device: UInt64
    }

    /// The files kept, by the folder they were made in; `count` over all of them.
    private static let kept = Mutex<(byFolder: [String: [Kept]], count: Int)>(([:], 0))

    /// An empty unnamed file made in `folder` earlier, now this caller's to use or close; nil
    /// when none is kept.
    static func take(folder: String) -> Int32? {
        guard let file = kept.withLock({ kept -> Kept? in
            guard let file = kept.byFolder[folder]?.popLast() else { return nil }
            if kept.byFolder[folder]?.isEmpty == true { kept.byFolder[folder] = nil }
            kept.count -= 1
            return file
        }) else { return nil }
        // The path may name another folder by now (moved, or a mount): a file of another file
        // system could not be linked there.
        var info = stat()
        guard stat(folder.isEmpty ? "." : folder, &info) == 0, UInt64(info.st_dev) == file.device else {
            close(file.descriptor)
            return nil
        }
        return file.descriptor
    }

    /// Keeps `descriptor`, an unnamed file made in `folder` that nothing was written to, for
    /// `take`; closes it when it is not empty or `capacity` files are kept already.
    static func giveBack(_ descriptor: Int32, folder: String) {
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_size == 0, info.st_nlink == 0 else {
            close(descriptor)
            return
        }
        let file = Kept(descriptor: descriptor, device: UInt64(info.st_dev))
        let isKept = kept.withLock { kept -> Bool in
            guard kept.count < limit.load(ordering: .relaxed) else { return false }
            kept.byFolder[folder, default: []].append(file)
            kept.count += 1
            return true
        }
        if !isKept { close(descriptor) }
    }

    /// Files kept now (for tests).
    static var count: Int { kept.withLock { $0.count } }
}
