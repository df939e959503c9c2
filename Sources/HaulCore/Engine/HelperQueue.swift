import Dispatch

/// The dispatch queues of the engine's helpers: the store's exchanges, preparations, held-body
/// writes and placement. They run at utility quality of service, below libcurl's loop thread.
///
/// On workload A the loop thread is the critical path (it ran about 0.41 s of a 0.7 s run), yet
/// it spent about 0.25 s of each run runnable but waiting for a core, behind helpers of equal
/// priority (`/proc/<pid>/task/<tid>/schedstat`). On Linux, libdispatch gives a utility thread a
/// nice value 2 above the process's (a weight of 655 against 1,024), which any user may set; the
/// helpers still get their share of a busy machine, just less of the loop's.
///
/// Guarantees: every queue made here runs its blocks on threads of utility quality of service,
/// never on the caller's thread; a serial one runs them one at a time, in order.
enum HelperQueue {
    static let qos = DispatchQoS.utility

    static func serial(_ label: String) -> DispatchQueue {
        DispatchQueue(label: label, qos: qos)
    }

    static func concurrent(_ label: String) -> DispatchQueue {
        DispatchQueue(label: label, qos: qos, attributes: .concurrent)
    }
}
