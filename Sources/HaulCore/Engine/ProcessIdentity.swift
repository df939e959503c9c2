import Foundation

/// Who this process is, for leases, and whether another lease holder is still alive.
///
/// Guarantees: an owner is reported dead only when it ran on this same boot of this machine
/// (same kernel boot id), in this same PID namespace (containers on one host share the boot id
/// but not their pids), and its pid is gone or now belongs to a process that started at another
/// time (pid reuse). Anything else — another machine, another container, an owner recorded
/// without its namespace, an unreadable /proc — counts as alive, and its jobs come back only
/// when their leases expire.
public enum ProcessIdentity {
    public static let current: LeaseOwner = LeaseOwner(machine: machine, pid: getpid(), startTime: startTime(of: getpid()) ?? 0)

    /// Where pids mean the same thing: `<boot id>:<PID namespace>`, or only the boot id when the
    /// namespace cannot be read (then no owner is ever judged dead).
    static let machine: String = pidNamespace.map { "\(bootID):\($0)" } ?? bootID

    static let bootID: String = {
        let raw = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let id = raw.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "/", with: "")
            .replacingOccurrences(of: ":", with: "")
        return id.isEmpty ? "unknown-\(ProcessInfo.processInfo.hostName)" : id
    }()

    /// This process's PID namespace: the number in the `pid:[N]` link of /proc/self/ns/pid —
    /// but only when the mounted /proc is this namespace's own (its `self` is our pid). A /proc
    /// mounted for another namespace would show other processes under our pids, so no pid can
    /// be judged from it.
    static let pidNamespace: String? = {
        let files = FileManager.default
        guard (try? files.destinationOfSymbolicLink(atPath: "/proc/self")) == String(getpid()) else { return nil }
        return namespaceNumber(fromLink: try? files.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid"))
    }()

    /// `pid:[4026531836]` → `4026531836`; nil for anything else.
    static func namespaceNumber(fromLink link: String?) -> String? {
        guard let link, link.hasPrefix("pid:["), link.hasSuffix("]") else { return nil }
        let number = link.dropFirst(5).dropLast()
        guard !number.isEmpty, number.allSatisfy(\.isASCII), number.allSatisfy(\.isNumber) else { return nil }
        return String(number)
    }

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
        isDead(owner, here: machine, namespaceKnown: pidNamespace != nil)
    }

    /// `isDead`, with where this process runs given (for tests).
    static func isDead(_ owner: LeaseOwner, here machine: String, namespaceKnown: Bool) -> Bool {
        guard namespaceKnown, owner.machine == machine, !machine.hasPrefix("unknown-") else { return false }
        if owner == current { return false }
        guard let start = startTime(of: owner.pid) else { return true }
        return start != owner.startTime
    }
}
