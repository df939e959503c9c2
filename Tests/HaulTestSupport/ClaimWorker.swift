import Foundation
import HaulCore

/// A claimer for concurrency tests: claims small batches from its own connection, checks the
/// per-host cap in the database after every claim, and finishes (or hands back) what it holds,
/// until nothing is left to claim.
public enum ClaimWorker {
    public struct Report: Sendable {
        /// Every job id this worker claimed, in order (a rescheduled job may appear again).
        public var claimed: [Int] = []
        /// Broken invariants seen, in words.
        public var violations: [String] = []
        public var claimCalls = 0
    }

    /// Runs until the queue has no queued or running jobs left that this worker could take.
    /// - Parameters:
    ///   - rescheduleOneIn: hand a finished job back to the queue (immediately due) once in this
    ///     many finishes while it has attempts to spare; 0 never does.
    ///   - onClaimed: called after each successful claim, before any of those jobs is finished.
    ///   - willRelease: called for each job just before it is completed or rescheduled.
    ///   - maximumHeld: claim only while holding fewer jobs than this, so one worker cannot take
    ///     every slot the caps allow and shut the other out.
    public static func run(path: String, perHostCap: Int, seed: UInt64, owner: String, rescheduleOneIn: Int = 0,
                           maximumHeld: Int = .max, maximumIterations: Int = 200_000,
                           onClaimed: ([Lease]) -> Void = { _ in },
                           willRelease: (Int) -> Void = { _ in }) throws -> Report {
        let queue = try JobQueue(path: path, mode: .mustExist)
        var random = SeededGenerator(seed: seed)
        var report = Report()
        var held: [Lease] = []
        for _ in 0..<maximumIterations {
            let limit = min(Int.random(in: 1...3, using: &random), maximumHeld - held.count)
            let leases = limit > 0 ? try queue.claim(ClaimRequest(limit: limit, perHostCap: perHostCap, owner: owner)) : []
            if limit > 0 { report.claimCalls += 1 }
            if !leases.isEmpty {
                let running = try QueueInvariants.runningPerHost(queue.database)
                for (host, count) in running where count > perHostCap {
                    report.violations.append("after a claim by \(owner), \(host) has \(count) running jobs (cap \(perHostCap))")
                }
                for lease in leases where lease.job.state != .running || lease.job.leaseToken != lease.token {
                    report.violations.append("job \(lease.jobID) claimed by \(owner) is \(lease.job.state) with another token")
                }
                onClaimed(leases)
                report.claimed += leases.map(\.jobID)
                held += leases
            }
            // Finish about half of what is held, so claims and finishes interleave.
            var kept: [Lease] = []
            for lease in held {
                guard Bool.random(using: &random) else { kept.append(lease); continue }
                willRelease(lease.jobID)
                if rescheduleOneIn > 0, lease.job.attempts < lease.job.maxAttempts - 1,
                   Int.random(in: 0..<rescheduleOneIn, using: &random) == 0 {
                    try queue.reschedule(jobID: lease.jobID, token: lease.token, at: 0, status: 503, error: "try again")
                } else {
                    try queue.complete(jobID: lease.jobID, token: lease.token, status: 200, bytes: 1)
                }
            }
            held = kept
            if leases.isEmpty && held.isEmpty {
                let counts = try queue.status().counts
                if counts[.queued] == 0 { return report }
            }
        }
        report.violations.append("\(owner) gave up after \(maximumIterations) iterations")
        return report
    }
}
