import Foundation
import HaulCore

enum AddCommand: Command {
    static let spec = CommandSpec(
        name: "add",
        abstract: "Queue URLs for download.",
        arguments: "[URL…]",
        options: [
            .init(names: ["-i", "--input"], value: "FILE", help: "Read URL lines from FILE ('-' for standard input)."),
            .init(names: ["-d", "--dir"], value: "DIR", help: "Output folder for the files (default: the current folder)."),
            .init(names: ["--layout"], value: "LAYOUT", help: "Where files without out= go: flat (DIR/NAME, the default), host (DIR/HOST/NAME) or path (DIR/HOST/PATH/NAME, as wget -x)."),
            .init(names: ["--if-exists"], value: "POLICY", help: "When a destination already holds a file haul did not place: skip (keep it; the default), replace (download over it), or rename (place the new file beside it as NAME.1.EXT)."),
            .init(names: ["--json"], value: nil, help: "Print the summary as JSON."),
        ] + RequestOptions.jobOptions,
        discussion: """
            Each input line is: URL [out=RELATIVE/PATH] [md5=|sha1=|sha256=|sha512=HEX]
            Blank lines and lines starting with '#' are ignored. Without out=, the file is named
            after the URL's last path segment (index.html when there is none). A checksum (one
            at most) must match the download before the file is placed. aria2c input files work
            too (indented out=, dir= and checksum=md5|sha-1|sha-256|sha-512=HEX lines). Adding
            the same URL for the same destination again changes nothing.

            A file already at a destination that haul did not place is never changed unless
            --if-exists says so: by default its job ends done, keeping it ("kept"), without a
            download (when a sha256 was given, the file must match it, else the job fails and the
            file is left alone). haul records the files it places, so its own are told apart.

            Every rejected line is reported on stderr as FILE:LINE: reason; the valid lines are
            queued all the same. Exit status: 0 when no line was rejected, 1 otherwise.

            -H, -A, -u and --netrc are kept with the jobs this add queues, so every later run
            sends them. Header values and passwords are never printed, and go only to each
            job's own origin (never to another host a redirect leads to). A database holding
            them is made readable by its owner only.
            """)

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        let summary = try importInput(arguments, spec: spec)
        printSummary(summary, json: arguments.flag("--json"))
        return summary.rejected == 0 ? 0 : 1
    }

    /// Queues the URLs of the arguments and of `--input`, reporting each rejected line on stderr.
    static func importInput(_ arguments: ParsedArguments, spec: CommandSpec) throws -> URLListImporter.Summary {
        try prepareImport(arguments, spec: spec).run()
    }

    /// An import ready to run: its input open, the output folder checked, the queue made and the
    /// request options stored, so every usage error and unreadable input is known before
    /// anything runs. `run` reads and queues it, once, on any one thread.
    ///
    /// `@unchecked Sendable`: `haul get` makes it on the main thread and hands it whole to the
    /// thread that runs it; the maker touches it no more after that (its `report` is set before).
    final class PreparedImport: @unchecked Sendable {
        private var importer: URLListImporter
        private let positionals: [String]
        private let descriptor: Int32
        private let inputName: String
        private let arguments: ParsedArguments
        /// Where the import's messages go (rejected lines): stderr unless set before `run`.
        var report: @Sendable (String) -> Void = { Console.error($0) }
        /// Where the lines being read come from, for the messages: "argument" or the input's name.
        private var source = "argument"

        fileprivate init(importer: URLListImporter, positionals: [String], descriptor: Int32, inputName: String,
                         arguments: ParsedArguments) {
            self.importer = importer
            self.positionals = positionals
            self.descriptor = descriptor
            self.inputName = inputName
            self.arguments = arguments
        }

        deinit { if descriptor > STDIN_FILENO { close(descriptor) } }

        /// Queues every line; with `streaming`, in the small batches a run going on meanwhile
        /// wants (see `URLListImporter.Streaming`).
        func run(streaming: URLListImporter.Streaming? = nil) throws -> URLListImporter.Summary {
            importer.streaming = streaming
            var summary = URLListImporter.Summary()
            do {
                try importer.importLines(positionals, into: &summary)
                if descriptor >= 0, streaming?.stopped() != true {
                    source = inputName
                    try importer.importLines(from: descriptor, into: &summary)
                }
            } catch InputError.readFailed(let reason) {
                throw CommandFailure(message: "cannot read \(inputName): \(reason); \(AddCommand.keptJobs(summary.added))")
            } catch {
                throw CommandFailure(message: "\(AddCommand.explain(error, arguments)); \(AddCommand.keptJobs(summary.added))")
            }
            return summary
        }

        /// Where the lines `numbers` of the input being read now come from, for a message:
        /// "arguments 1–3", "urls.txt:257–1280".
        func place(of numbers: ClosedRange<Int>) -> String {
            let span = numbers.count == 1 ? "\(numbers.lowerBound)" : "\(numbers.lowerBound)–\(numbers.upperBound)"
            return source == "argument" ? "argument\(numbers.count == 1 ? "" : "s") \(span)" : "\(source):\(span)"
        }

        fileprivate func rejected(_ line: Int, _ reason: InputLine.Rejection, _ text: String?) {
            var message = "haul: \(place(of: line...line)): \(reason)"
            if let text, !text.isEmpty, !reason.description.contains(HTTPURL.redact(text)) {
                message += " — \(AddCommand.printable(HTTPURL.redactRejected(text)))"
            }
            report(message)
        }
    }

    /// Opens and checks everything an import of the arguments and of `--input` needs (see
    /// `PreparedImport`).
    static func prepareImport(_ arguments: ParsedArguments, spec: CommandSpec) throws -> PreparedImport {
        let input = arguments.value("--input")
        guard input != nil || !arguments.positionals.isEmpty else {
            throw UsageError(message: "give URLs as arguments, or -i FILE ('-' for standard input)", spec: spec)
        }
        var descriptor: Int32 = -1
        var inputName = "stdin"
        if let input {
            if input == "-" {
                descriptor = STDIN_FILENO
            } else {
                descriptor = open(input, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else {
                    throw CommandFailure(message: "cannot open \(input): \(String(cString: strerror(errno)))")
                }
                var info = stat()
                if fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
                    close(descriptor)
                    throw CommandFailure(message: "\(input) is a folder: -i takes a file of URL lines, or - for standard input")
                }
                inputName = input
            }
        }
        var owned = descriptor > STDIN_FILENO  // closed here on an error below, else by the import
        defer { if owned { close(descriptor) } }
        if let folder = arguments.value("--dir") {
            if let control = DestinationResolver.controlCharacter(in: folder.utf8) {
                throw UsageError(message: "'--dir' holds a control character (\(DestinationResolver.notation(ofControl: control))): it would reach terminals and scripts' lines raw; name the folder without it", spec: spec)
            }
            var info = stat()
            if stat(folder, &info) == 0, (info.st_mode & S_IFMT) != S_IFDIR {
                throw UsageError(message: "'--dir' names \(folder), which is not a folder: give the output folder (it is made when missing)", spec: spec)
            }
        }

        let profile = try RequestOptions.profile(arguments, spec: spec)
        var layout = DestinationResolver.Layout.flat
        if let name = arguments.value("--layout") {
            guard let chosen = DestinationResolver.Layout(rawValue: name) else {
                throw UsageError(message: "'--layout' is flat, host or path, not '\(name)'", spec: spec)
            }
            layout = chosen
        }
        let ifExists = try existingFilePolicy(arguments, spec: spec) ?? .skip
        // Every usage error is known before the queue is opened (and made, when missing).
        let queue = try openQueue(arguments, create: true)
        let profileID = try profile.map { try queue.storeProfile($0) }
        let resolver = DestinationResolver(directory: arguments.value("--dir") ?? ".", layout: layout)
        let forward = RejectionForwarder()
        var importer = URLListImporter(queue: queue, resolver: resolver, profileID: profileID, ifExists: ifExists) { line, reason, text in
            forward.target?.rejected(line, reason, text)
        }
        importer.releaseFreedMemory = Allocator.releaseFreedMemory
        let prepared = PreparedImport(importer: importer, positionals: arguments.positionals, descriptor: descriptor,
                                      inputName: inputName, arguments: arguments)
        forward.target = prepared
        owned = false
        return prepared
    }

    /// Hands the importer's rejections to the import that owns it (held weakly: the import owns
    /// the importer, whose callback holds this).
    private final class RejectionForwarder {
        weak var target: PreparedImport?
    }

    /// `--if-exists`, or a usage error naming the choices.
    static func existingFilePolicy(_ arguments: ParsedArguments, spec: CommandSpec) throws -> ExistingFilePolicy? {
        guard let name = arguments.value("--if-exists") else { return nil }
        guard let policy = ExistingFilePolicy(rawValue: name) else {
            throw UsageError(message: "'--if-exists' is skip, replace or rename, not '\(name)'", spec: spec)
        }
        return policy
    }

    fileprivate static func keptJobs(_ count: Int) -> String {
        count == 0 ? "nothing was added" : count == 1 ? "the job added before this is kept" : "the \(count) jobs added before this are kept"
    }

    /// The text with control characters shown as escapes, so a rejected line cannot drive the
    /// terminal.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
                out += "\\x" + String(format: "%02x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func printSummary(_ summary: URLListImporter.Summary, json: Bool) {
        if json {
            Console.out(JSON.object([
                ("added", .int(summary.added)),
                ("already_queued", .int(summary.alreadyQueued)),
                ("rejected", .int(summary.rejected)),
            ]).text)
        } else {
            Console.out("added \(summary.added), already queued \(summary.alreadyQueued), rejected \(summary.rejected)")
        }
    }
}
