import Foundation
import HaulCore

enum RefreshCommand: Command {
    static let spec = CommandSpec(
        name: "refresh",
        abstract: "Queue done jobs to be checked against their server: a file that changed is fetched again.",
        arguments: "[ID…]",
        options: [
            .init(names: ["--all"], value: nil, help: "Every done job (or every one of --host)."),
            .init(names: ["--host"], value: "HOST[:PORT]", help: "Only the done jobs of this host."),
            .init(names: ["--force"], value: nil, help: "Also fetch again the files whose server gave no validator (ETag, Last-Modified)."),
        ],
        discussion: """
            The next `haul run` asks the server whether each file changed (If-None-Match with its
            ETag, If-Modified-Since with its Last-Modified, as recorded when it was placed). A 304
            leaves the file and counts it as up to date; a 200 downloads to a temp file and
            replaces the old one atomically. A file whose server gave no validator is fetched again
            only with --force, and only while it is the file haul placed: one changed or put there
            since is yours (haul verify --fix fetches it again). Files kept because they were
            already there are yours: left alone.
            """)

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        let ids = try jobIDs(arguments)
        let all = arguments.flag("--all") || arguments.value("--host") != nil
        guard ids.isEmpty != !all else {
            throw UsageError(message: ids.isEmpty ? "name jobs by id, or pass --all (or --host HOST)" : "give job ids or --all, not both", spec: spec)
        }
        let queue = try openQueue(arguments)
        let force = arguments.flag("--force")
        var queued = 0, conditional = 0, noValidator = 0, kept = 0, notDone = 0, changedSincePlaced = 0
        func consider(_ job: Job, into refetches: inout [Refetch]) {
            guard job.state == .done else { notDone += 1; return }
            guard !job.kept else { kept += 1; return }
            let metadata = job.placed?.metadata
            if metadata?.etag != nil || metadata?.lastModified != nil {
                refetches.append(Refetch(jobID: job.id, adopt: nil, conditional: true))
                conditional += 1
            } else if force {
                // Fetched again and replaced only while the file there is still the one haul
                // placed (its identity then): one the user changed or put there since is theirs
                // (`verify --fix` is the way to fetch it again over their change). Nothing there:
                // fetched again.
                // (A file placed by an older haul, with no identity recorded, is told by its mark.)
                let path = job.placed?.path ?? job.destination
                switch ExistingFile.examine(path, placed: job.placed, mark: ExistingFile.mark(for: job)) {
                case .nothing, .haulsOwn:
                    refetches.append(Refetch(jobID: job.id, adopt: ExistingFile.identity(of: path), conditional: false))
                case .usersFile, .folder:
                    changedSincePlaced += 1
                }
            } else {
                noValidator += 1
            }
        }
        if all {
            var filter = JobFilter(state: .done, host: arguments.value("--host").map(HTTPURL.canonicalHost), limit: 1000)
            while true {
                let page = try queue.list(filter)
                var refetches: [Refetch] = []
                for job in page { consider(job, into: &refetches) }
                queued += try queue.refetch(refetches)
                guard let last = page.last, page.count == filter.limit else { break }
                filter.afterID = last.id
            }
        } else {
            var refetches: [Refetch] = []
            for id in ids {
                guard let job = try queue.job(id: id) else {
                    throw CommandFailure(message: "no job \(id) (haul list shows the ids)")
                }
                consider(job, into: &refetches)
            }
            queued += try queue.refetch(refetches)
        }
        var line = "queued \(queued) \(queued == 1 ? "job" : "jobs") to be checked (\(conditional) by validator\(force ? ", \(queued - conditional) fetched again" : ""))"
        if noValidator > 0 { line += "; \(noValidator) without a validator left as they are (--force fetches them again)" }
        if kept > 0 { line += "; \(kept) kept files (yours) left alone" }
        if changedSincePlaced > 0 {
            line += "; \(changedSincePlaced) changed since haul placed \(changedSincePlaced == 1 ? "it" : "them") (yours) left alone (haul verify --fix fetches \(changedSincePlaced == 1 ? "it" : "them") again)"
        }
        if notDone > 0 { line += "; \(notDone) not done, left as they are" }
        Console.out(line + (queued > 0 ? "; haul run does it" : ""))
        return 0
    }
}
