import Foundation
import HaulCore

enum VerifyCommand: Command {
    static let spec = CommandSpec(
        name: "verify",
        abstract: "Check every done job's file: present, its size, its checksum when one is known (else its modification time).",
        arguments: "",
        options: [
            .init(names: ["--fix"], value: nil, help: "Queue the jobs whose files are missing or changed, to be fetched again and replaced."),
            .init(names: ["--json"], value: nil, help: "Print one JSON object per file found wrong, then a summary."),
        ],
        discussion: """
            Reads each done job's file (a checksum, when the job has one or `run --checksum
            sha256` recorded one, is computed again). Files haul kept because they were already
            there are yours: they are checked, and only a missing one is fetched again by --fix.
            Exit status: 0 when every file checked out, 1 when any is missing or changed.
            """)

    /// What is wrong with one done job's file.
    struct Finding {
        let job: Job
        let path: String
        let problem: String
        let detail: String
        /// With --fix: fetch it again (nil: leave it).
        let refetch: Refetch?
    }

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        try requireNoPositionals(arguments)
        let queue = try openQueue(arguments)
        let json = arguments.flag("--json")
        let fix = arguments.flag("--fix")
        var filter = JobFilter(state: .done, limit: 1000)
        var checked = 0, missing = 0, changed = 0, queued = 0
        while true {
            let page = try queue.list(filter)
            var fixes: [Refetch] = []
            for job in page {
                checked += 1
                guard let finding = examine(job) else { continue }
                if finding.problem == "missing" { missing += 1 } else { changed += 1 }
                if let refetch = finding.refetch { fixes.append(refetch) }
                if json {
                    Console.out(JSON.object([
                        ("id", .int(job.id)), ("destination", .string(finding.path)), ("problem", .string(finding.problem)),
                        ("detail", .string(finding.detail)), ("kept", .bool(job.kept)),
                        ("queued_again", .bool(fix && finding.refetch != nil)),
                    ]).text)
                } else {
                    Console.out("\(finding.problem.padding(toLength: 8, withPad: " ", startingAt: 0)) #\(job.id) \(finding.path): \(finding.detail)")
                }
            }
            if fix && !fixes.isEmpty { queued += try queue.refetch(fixes) }
            guard let last = page.last, page.count == filter.limit else { break }
            filter.afterID = last.id
        }
        if json {
            Console.out(JSON.object([("checked", .int(checked)), ("missing", .int(missing)), ("changed", .int(changed)),
                                     ("queued_again", .int(queued))]).text)
        } else {
            var line = "verified \(checked) \(checked == 1 ? "file" : "files"): \(checked - missing - changed) as placed, \(missing) missing, \(changed) changed"
            if fix { line += "; \(queued) queued to be fetched again (haul run fetches them)" }
            else if missing + changed > 0 { line += " (--fix queues them to be fetched again)" }
            Console.out(line)
        }
        return missing + changed == 0 ? 0 : 1
    }

    /// Nil when the job's file is as haul left it.
    static func examine(_ job: Job) -> Finding? {
        let path = job.placed?.path ?? job.destination
        var info = stat()
        guard lstat(path, &info) == 0 else {
            return Finding(job: job, path: path, problem: "missing", detail: "no file there",
                           refetch: Refetch(jobID: job.id, adopt: nil, conditional: false))
        }
        // A changed file haul placed is still haul's: the fetch replaces it. A kept one is the
        // user's: reported, never replaced.
        let ours = job.kept ? nil : Refetch(jobID: job.id, adopt: ExistingFile.identity(of: path), conditional: false)
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            return Finding(job: job, path: path, problem: "changed", detail: "not a regular file any more", refetch: nil)
        }
        if Int(info.st_size) != job.receivedBytes {
            return Finding(job: job, path: path, problem: "changed", detail: "\(info.st_size) bytes, was \(job.receivedBytes)", refetch: ours)
        }
        let expected = job.checksum.flatMap(Checksum.init(stored:))
            ?? job.placed?.metadata.sha256.flatMap { Checksum(.sha256, hex: $0) }
        if let expected {
            do {
                let actual = try ExistingFile.digest(of: path, expected.algorithm)
                if actual != expected.hex {
                    return Finding(job: job, path: path, problem: "changed",
                                   detail: "\(expected.algorithm.rawValue) \(actual), was \(expected.hex)", refetch: ours)
                }
            } catch {
                return Finding(job: job, path: path, problem: "changed", detail: "cannot read it: \(error)", refetch: nil)
            }
        } else if let placed = job.placed?.identity, let now = ours?.adopt,  // `ours`: haul's file, not a kept one
                  now.modified != placed.modified || now.inode != placed.inode {
            // No checksum to read the bytes against: a file written since (its modification time)
            // or replaced (another inode) is not the one haul placed, as a run would judge it.
            return Finding(job: job, path: path, problem: "changed",
                           detail: now.inode != placed.inode ? "replaced since haul placed it" : "modified since haul placed it", refetch: ours)
        }
        return nil
    }
}
