// haul-queue-bench: the queue alone under concurrent claimers, through the `JobStore` port.
//
// Adds --jobs jobs over --hosts hosts, sets every host's cap to --cap, then runs --claimers
// threads, each with its own store connection and owner, looping exchanges the way the engine
// does: claim up to --batch jobs ahead, ask for slots of the hosts it holds jobs of, "run" one
// job per granted slot by completing it (.done, 200, 1 byte) in the next exchange together with
// giving those slots back. A sampler thread with its own connection reads the live slots per
// host every ~5 ms. Prints one JSON line; exits 1 when the cap was exceeded in a sample, a job
// was claimed while another claimer held it, an outcome was refused, or not every job got done.
//
//   haul-queue-bench --db postgres://haul@127.0.0.1:5432/bench [--claimers 8] [--jobs 100000]
//                    [--hosts 50] [--cap 4] [--batch 64]
//   haul-queue-bench --db /tmp/q.db ...          (a SQLite file)
import Foundation
import HaulCore
import HaulPostgres
import Synchronization

struct Options {
    var db = ""
    var claimers = 8
    var jobs = 100_000
    var hosts = 50
    var cap = 4
    var batch = 64
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("haul-queue-bench: \(message)\n".utf8))
    exit(2)
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let name = arguments.popFirst() {
        guard let value = arguments.popFirst() else { fail("\(name) needs a value") }
        func number() -> Int {
            guard let n = Int(value), n > 0 else { fail("\(name) needs a positive number, not '\(value)'") }
            return n
        }
        switch name {
        case "--db": options.db = value
        case "--claimers": options.claimers = number()
        case "--jobs": options.jobs = number()
        case "--hosts": options.hosts = number()
        case "--cap": options.cap = number()
        case "--batch": options.batch = number()
        default: fail("unknown option \(name) (options: --db --claimers --jobs --hosts --cap --batch)")
        }
    }
    if options.db.isEmpty { fail("--db URL (postgres://…) or SQLite path is required") }
    return options
}

func openStore(_ location: String) throws -> any JobStore {
    let lower = location.lowercased()
    if lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://") { return try PostgresJobStore(url: location) }
    return try JobQueue(path: location, mode: .createIfMissing, busyTimeout: 60)
}

/// Hands a store (not Sendable; used by one thread at a time) to the thread that owns it.
final class Handoff<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// What one claimer counted.
struct ClaimerTally: Sendable {
    var exchanges = 0
    var recorded = 0
    var refused = 0
    var outcomesSent = 0
    var error: String?
}

let options = parseOptions()
let pid = getpid()

// ---- adding (untimed) -------------------------------------------------------------------------
let setup: any JobStore
do { setup = try openStore(options.db) } catch { fail("cannot open \(options.db): \(error)") }
do {
    let resolver = DestinationResolver(directory: "/tmp/haul-queue-bench-\(pid)")
    var lines: [InputLine] = []
    lines.reserveCapacity(5_000)
    var added = 0
    func flush() throws {
        guard !lines.isEmpty else { return }
        let outcomes = try setup.add(lines)
        added += outcomes.filter { if case .added = $0 { return true } else { return false } }.count
        lines.removeAll(keepingCapacity: true)
    }
    for i in 0..<options.jobs {
        let text = "https://host\(i % options.hosts).example/data/job\(i).bin"
        guard let line = try InputLine.parse(Array(text.utf8), resolver: resolver) else { fail("'\(text)' did not parse") }
        lines.append(line)
        if lines.count == 5_000 { try flush() }
    }
    try flush()
    guard added == options.jobs else { fail("added \(added) jobs of \(options.jobs): is the queue empty to start with?") }
    try setup.setHostCap(options.cap, host: nil)
} catch {
    fail("adding: \(error)")
}

// ---- the claimers and the sampler ---------------------------------------------------------------
let stores: [Handoff<any JobStore>]
let samplerStore: Handoff<any JobStore>
do {
    stores = try (0..<options.claimers).map { _ in Handoff(try openStore(options.db)) }
    samplerStore = Handoff(try openStore(options.db))
} catch {
    fail("opening \(options.claimers + 1) connections: \(error)")
}

let held = Mutex(Set<Int>())
let claimedTwice = Atomic(0)
let stop = Atomic(false)
let tallies = Mutex([ClaimerTally](repeating: ClaimerTally(), count: options.claimers))
let start = DispatchSemaphore(value: 0)
let claimersDone = DispatchGroup()
let samplerDone = DispatchGroup()

struct SampleTally: Sendable {
    var samples = 0
    var overCap = 0
    var maxByHost: [String: Int] = [:]
    var error: String?
}
let sampled = Mutex(SampleTally())

for n in 0..<options.claimers {
    claimersDone.enter()
    let box = stores[n]
    let owner = "bench\(n)/\(pid)/\(n)"
    let batch = options.batch, cap = options.cap
    Thread.detachNewThread {
        defer { claimersDone.leave() }
        let store = box.value
        var tally = ClaimerTally()
        var inHand: [Lease] = []
        var slots: [SlotLease] = []
        start.wait()
        do {
            while true {
                var ask = Exchange(owner: owner, leaseMilliseconds: 60_000)
                ask.worker = "bench\(n)"
                // One job per slot held, of that slot's host; then every slot goes back.
                var freeSlots: [Int: Int] = slots.reduce(into: [:]) { $0[$1.hostID, default: 0] += 1 }
                var keep: [Lease] = []
                keep.reserveCapacity(inHand.count)
                for lease in inHand {
                    if let free = freeSlots[lease.job.hostID], free > 0 {
                        freeSlots[lease.job.hostID] = free - 1
                        ask.outcomes.append(.done(jobID: lease.jobID, token: lease.token, status: 200, bytes: 1))
                    } else {
                        keep.append(lease)
                    }
                }
                inHand = keep
                if !ask.outcomes.isEmpty {
                    let finished = ask.outcomes.compactMap { outcome -> Int? in
                        if case .done(let id, _, _, _, _) = outcome { return id } else { return nil }
                    }
                    held.withLock { for id in finished { $0.remove(id) } }
                }
                ask.releaseSlots = slots
                slots = []
                ask.claim = max(0, batch - inHand.count)
                ask.heldByHost = inHand.reduce(into: [:]) { $0[$1.job.hostID, default: 0] += 1 }
                ask.wantSlots = ask.heldByHost.mapValues { min($0, cap) }
                let answer = try store.exchange(ask)
                tally.exchanges += 1
                tally.outcomesSent += ask.outcomes.count
                for result in answer.outcomes {
                    if result == .recorded { tally.recorded += 1 } else { tally.refused += 1 }
                }
                let twice = held.withLock { set in answer.claimed.reduce(0) { $0 + (set.insert($1.jobID).inserted ? 0 : 1) } }
                if twice > 0 { claimedTwice.add(twice, ordering: .relaxed) }
                inHand += answer.claimed
                slots = answer.grantedSlots
                // Done when nothing is left to claim and nothing is in hand: whatever still runs
                // belongs to the other claimers.
                if inHand.isEmpty, slots.isEmpty, answer.claimed.isEmpty, let left = answer.unfinished, left.queued == 0 { break }
            }
        } catch {
            tally.error = "\(owner): \(error)"
        }
        tallies.withLock { $0[n] = tally }
    }
}

samplerDone.enter()
do {
    let box = samplerStore
    let cap = options.cap
    Thread.detachNewThread {
        defer { samplerDone.leave() }
        let store = box.value
        var tally = SampleTally()
        do {
            while !stop.load(ordering: .relaxed) {
                let live = try store.liveSlots()
                tally.samples += 1
                var over = false
                for (host, count) in live {
                    if count > tally.maxByHost[host, default: 0] { tally.maxByHost[host] = count }
                    if count > cap { over = true }
                }
                if over { tally.overCap += 1 }
                usleep(5_000)
            }
        } catch {
            tally.error = "sampler: \(error)"
        }
        sampled.withLock { $0 = tally }
    }
}

let clock = ContinuousClock()
let began = clock.now
for _ in 0..<options.claimers { start.signal() }
claimersDone.wait()
let elapsed = clock.now - began
stop.store(true, ordering: .relaxed)
samplerDone.wait()

// ---- the figures ------------------------------------------------------------------------------
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let all = tallies.withLock { $0 }
let samples = sampled.withLock { $0 }
let recorded = all.reduce(0) { $0 + $1.recorded }
let refused = all.reduce(0) { $0 + $1.refused }
let exchanges = all.reduce(0) { $0 + $1.exchanges }
let sent = all.reduce(0) { $0 + $1.outcomesSent }
var storeDone = -1
do { storeDone = try setup.status().counts[.done] ?? 0 } catch { FileHandle.standardError.write(Data("haul-queue-bench: status: \(error)\n".utf8)) }
let maxLive = samples.maxByHost.values.max() ?? 0
let twice = claimedTwice.load(ordering: .relaxed)
func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }
let json = "{\"jobs\":\(options.jobs),\"seconds\":\(fixed(seconds, 3)),\"jobs_per_second\":\(fixed(Double(recorded) / max(seconds, 1e-9), 0)),"
    + "\"max_live_slots_per_host\":\(maxLive),\"cap\":\(options.cap),\"samples\":\(samples.samples),"
    + "\"over_cap_samples\":\(samples.overCap),\"claimed_twice\":\(twice),\"done\":\(recorded),\"exchanges\":\(exchanges),"
    + "\"claimers\":\(options.claimers),\"batch\":\(options.batch),\"hosts\":\(options.hosts),"
    + "\"outcomes_per_exchange\":\(fixed(Double(sent) / Double(max(exchanges, 1)), 1)),"
    + "\"ms_per_exchange\":\(fixed(seconds * 1000 * Double(options.claimers) / Double(max(exchanges, 1)), 2)),"
    + "\"refused_outcomes\":\(refused),\"store_done\":\(storeDone)}"
print(json)
var problems: [String] = all.compactMap(\.error)
if let error = samples.error { problems.append(error) }
if samples.overCap > 0 { problems.append("\(samples.overCap) samples saw a host above its cap of \(options.cap) (max \(maxLive))") }
if twice > 0 { problems.append("\(twice) claims of a job another claimer held") }
if refused > 0 { problems.append("\(refused) outcomes refused (stale)") }
if recorded != options.jobs || storeDone != options.jobs { problems.append("done \(recorded) (store says \(storeDone)) of \(options.jobs) jobs") }
if samples.samples == 0 { problems.append("the sampler took no sample") }
for problem in problems { FileHandle.standardError.write(Data("haul-queue-bench: \(problem)\n".utf8)) }
exit(problems.isEmpty ? 0 : 1)
