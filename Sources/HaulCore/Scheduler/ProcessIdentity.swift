import Foundation

/// Who this process is, for leases, and whether another lease holder is still alive.
///
/// Guarantees: an owner is reported dead only when it ran on this same boot of this machine
/// (same kernel boot id) and its pid is gone or now belongs to a process that started at
/// another time (pid reuse). Anything else — another machine, an unreadable /proc — counts as
/// alive, and its jobs come back only when their leases expire.
public enum ProcessIdentity {
    public static let current: LeaseOwner = LeaseOwner(machine: bootID, pid: getpid(), startTime: startTime(of: getpid()) ?? 0)

    static let bootID: String = {
        let raw = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let id = raw.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "/", with: "")
        return id.isEmpty ? "unknown-\(ProcessInfo.processInfo.hostName)" : id
    }()

    /// The start time of a process, in clock ticks after boot (field 22 of /proc/PID/stat).
    static func startTime(of pid: Int32) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }

    public static func isDead(_ owner: LeaseOwner) -> Bool {
        guard owner.machine == bootID, !bootID.hasPrefix("unknown-") else { return false }
        if owner == current { return false }
        guard let start = startTime(of: owner.pid) else { return true }
        return start != owner.startTime
    }
}
