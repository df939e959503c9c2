import CFileSync
import Foundation
import Synchronization
import XCTest
@testable import HaulCore
import HaulTestSupport

/// Batched placement: every file's bytes are checked durable (syncfs, or fsync where syncfs is
/// not trusted) before any rename, and a file that cannot be checked is not placed.
final class VerifiedFileTests: XCTestCase {
    private func verifiedFile(_ name: String, in folder: TempDirectory, bytes: String) throws -> VerifiedFile {
        let temp = TempFile(destination: folder.file(name), jobID: name.count, queue: 0)
        let (descriptor, _) = try temp.open()
        XCTAssertEqual(bytes.utf8.withContiguousStorageIfAvailable { write(descriptor, $0.baseAddress, $0.count) }, bytes.utf8.count)
        return VerifiedFile(temp: temp, descriptor: descriptor, bytes: Int64(bytes.utf8.count), status: 200)
    }

    /// A verified file is a value: its fields live in one shared object, and changing a copy
    /// (as the held-body writer empties `held`) leaves every other copy as it was.
    func testCopiesAreIndependentValues() throws {
        let folder = try makeTempDirectory()
        var original = try verifiedFile("value", in: folder, bytes: "body")
        defer { original.close() }
        original.held = Array("kept".utf8)
        original.mark = "1@2"
        var copy = original
        copy.held = []
        copy.mark = nil
        copy.unnamed = true
        copy.metadata.etag = "\"e\""
        XCTAssertEqual(original.held, Array("kept".utf8))
        XCTAssertEqual(original.mark, "1@2")
        XCTAssertFalse(original.unnamed)
        XCTAssertNil(original.metadata.etag)
        XCTAssertEqual(copy.held, [])
        XCTAssertNil(copy.mark)
        XCTAssertTrue(copy.unnamed)
        XCTAssertEqual(copy.metadata.etag, "\"e\"")
        XCTAssertEqual(copy.temp.path, original.temp.path)
        XCTAssertEqual(copy.bytes, original.bytes)
        original.held.append(contentsOf: Array("!".utf8))  // a copy changed in place stays its own
        XCTAssertEqual(original.held, Array("kept!".utf8))
        XCTAssertEqual(copy.held, [])
    }

    func testABatchIsMadeDurableThenPlaced() throws {
        let folder = try makeTempDirectory()
        let files = try ["a", "bb", "ccc"].map { try verifiedFile($0, in: folder, bytes: "content of \($0)") }
        XCTAssertEqual(VerifiedFile.makeDurable(files).map { $0?.message }, [nil, nil, nil])
        for file in files {
            XCTAssertFalse(FileManager.default.fileExists(atPath: file.temp.destination), "nothing placed before place()")
            _ = try file.place()
            file.close()
            XCTAssertFalse(FileManager.default.fileExists(atPath: file.temp.path))
        }
        XCTAssertEqual(try String(contentsOfFile: folder.file("bb"), encoding: .utf8), "content of bb")
        XCTAssertTrue(TempFile.syncFolder(of: folder.file("a")))
    }

    func testAFileThatCannotBeCheckedIsReportedAndTheOthersAreNot() throws {
        let folder = try makeTempDirectory()
        let good = try verifiedFile("good", in: folder, bytes: "fine")
        let broken = try verifiedFile("broken", in: folder, bytes: "lost")
        close(broken.descriptor)  // its descriptor no longer says anything about its bytes
        let results = VerifiedFile.makeDurable([broken, good])
        XCTAssertNotNil(results[0], "a file whose bytes cannot be checked is not declared durable")
        XCTAssertTrue(results[0]?.message.contains(broken.temp.path) == true, "\(String(describing: results[0]))")
        XCTAssertNil(results[1])
        good.close()
    }

    func testAFolderThatCannotBeFlushedIsReported() {
        XCTAssertFalse(TempFile.syncFolder(of: "/nonexistent-haul-folder/file"))
    }

    // MARK: The way to the destination

    /// In a batch, a folder found without links is looked at once: its next files pass on the
    /// batch's word (`clear`), even if a link took its place meanwhile, for `clearFor` after the
    /// look; a folder with a link on its way is not remembered, and a new batch looks again.
    func testABatchLooksAtAFolderWithoutLinksOnce() throws {
        let root = try makeTempDirectory()
        let real = root.file("real")
        try FileManager.default.createDirectory(atPath: real + "/deep", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root.file("old"), withDestinationPath: real)
        let added = Int(Date().timeIntervalSince1970 * 1000) - 1000
        var clear: [String: UInt64] = [:]
        let t0: UInt64 = 1_000_000_000
        XCTAssertNoThrow(try TempFile(destination: real + "/deep/f1", jobID: 1, queue: 0)
            .checkNoNewLinks(since: added, clear: &clear, now: t0))
        XCTAssertEqual(clear, [real + "/deep": t0])
        XCTAssertThrowsError(try TempFile(destination: root.file("old") + "/deep/f", jobID: 2, queue: 0)
            .checkNoNewLinks(since: added, clear: &clear, now: t0), "a link made after the add")
        XCTAssertEqual(clear, [real + "/deep": t0], "a way with a link is not remembered")
        // The folder swapped for a new link within the batch: its next file passes unlooked,
        // until the look is `clearFor` old.
        try FileManager.default.moveItem(atPath: real + "/deep", toPath: real + "/moved")
        try FileManager.default.createSymbolicLink(atPath: real + "/deep", withDestinationPath: real + "/moved")
        XCTAssertNoThrow(try TempFile(destination: real + "/deep/f2", jobID: 3, queue: 0)
            .checkNoNewLinks(since: added, clear: &clear, now: t0 + TempFile.clearFor - 1))
        XCTAssertThrowsError(try TempFile(destination: real + "/deep/f3", jobID: 4, queue: 0)
            .checkNoNewLinks(since: added, clear: &clear, now: t0 + TempFile.clearFor), "a look 10 ms old is not used")
        var next: [String: UInt64] = [:]
        XCTAssertThrowsError(try TempFile(destination: real + "/deep/f4", jobID: 5, queue: 0)
            .checkNoNewLinks(since: added, clear: &next, now: t0), "the next batch looks again")
    }

    /// With the job's output folder known, a link below it is judged by where it leads, not by
    /// its age: one to a place inside passes even when made after the add, one outside or to
    /// nothing is refused even when older than the job; a link above the folder keeps the age
    /// rule.
    func testALinkBelowTheOutputFolderIsJudgedByWhereItLeads() throws {
        let top = try makeTempDirectory()
        let out = top.file("out")
        try FileManager.default.createDirectory(atPath: out + "/real", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: top.file("elsewhere"), withIntermediateDirectories: true)
        let before = Int(Date().timeIntervalSince1970 * 1000) - 60_000  // every link below is newer
        let after = Int(Date().timeIntervalSince1970 * 1000) + 60_000  // every link below is older
        try FileManager.default.createSymbolicLink(atPath: out + "/inside", withDestinationPath: out + "/real")
        try FileManager.default.createSymbolicLink(atPath: out + "/outside", withDestinationPath: top.file("elsewhere"))
        try FileManager.default.createSymbolicLink(atPath: out + "/nowhere", withDestinationPath: top.file("missing"))
        func check(_ folder: String, since: Int, root: String?) throws {
            try TempFile(destination: out + "/" + folder + "/f", jobID: 1, queue: 0).checkNoNewLinks(since: since, root: root)
        }
        XCTAssertNoThrow(try check("inside", since: before, root: out), "a new link that stays inside")
        XCTAssertThrowsError(try check("inside", since: before, root: nil), "without the folder, a new link is refused")
        XCTAssertThrowsError(try check("outside", since: after, root: out), "an old link that leads outside") { error in
            XCTAssertTrue("\(error)".contains("leads outside the output folder"), "\(error)")
        }
        XCTAssertNoThrow(try check("outside", since: after, root: nil), "without the folder, only its age was looked at")
        XCTAssertThrowsError(try check("nowhere", since: after, root: out)) { error in
            XCTAssertTrue("\(error)".contains("leads nowhere"), "\(error)")
        }
        // The output folder reached through a link above it: judged by age, and the links below
        // it still by where they lead.
        try FileManager.default.createSymbolicLink(atPath: top.file("via"), withDestinationPath: out)
        XCTAssertNoThrow(try TempFile(destination: top.file("via") + "/inside/f", jobID: 1, queue: 0)
            .checkNoNewLinks(since: after, root: top.file("via")))
        XCTAssertThrowsError(try TempFile(destination: top.file("via") + "/outside/f", jobID: 1, queue: 0)
            .checkNoNewLinks(since: after, root: top.file("via")))
        XCTAssertThrowsError(try TempFile(destination: top.file("via") + "/inside/f", jobID: 1, queue: 0)
            .checkNoNewLinks(since: before, root: top.file("via")), "a link above the folder, made after the add")
    }

    /// A way with no link passes (one openat2); a link made before the job was added passes;
    /// one made after it is refused, wherever it sits on the way.
    func testOnlyALinkMadeAfterTheAddIsRefusedOnTheWay() throws {
        let root = try makeTempDirectory()
        let real = root.file("real")
        try FileManager.default.createDirectory(atPath: real + "/deep", withIntermediateDirectories: true)
        XCTAssertEqual(haul_way_has_no_links(real + "/deep"), 1)
        XCTAssertNoThrow(try TempFile(destination: real + "/deep/f", jobID: 1, queue: 0).checkNoNewLinks(since: Int(Date().timeIntervalSince1970 * 1000)))
        // An old link: made, then the job added a second later.
        try FileManager.default.createSymbolicLink(atPath: root.file("old"), withDestinationPath: real)
        let afterOld = Int(Date().timeIntervalSince1970 * 1000) + 1000
        XCTAssertEqual(haul_way_has_no_links(root.file("old") + "/deep"), 0, "a link on the way is seen")
        XCTAssertNoThrow(try TempFile(destination: root.file("old") + "/deep/f", jobID: 2, queue: 0).checkNoNewLinks(since: afterOld))
        // A new link: the job was added a second before it was made.
        let beforeNew = Int(Date().timeIntervalSince1970 * 1000) - 1000
        try FileManager.default.createSymbolicLink(atPath: root.file("new"), withDestinationPath: real)
        XCTAssertThrowsError(try TempFile(destination: root.file("new") + "/deep/f", jobID: 3, queue: 0).checkNoNewLinks(since: beforeNew)) { error in
            XCTAssertTrue(String(describing: error).contains("became a symbolic link"), "\(error)")
        }
        // Deeper on the way, and the last folder itself.
        try FileManager.default.createSymbolicLink(atPath: real + "/link", withDestinationPath: real + "/deep")
        XCTAssertThrowsError(try TempFile(destination: real + "/link/f", jobID: 4, queue: 0).checkNoNewLinks(since: beforeNew))
        // A way that does not exist yet passes: its folders are made, not followed.
        XCTAssertNoThrow(try TempFile(destination: real + "/missing/more/f", jobID: 5, queue: 0).checkNoNewLinks(since: beforeNew))
        // An old link whose target folder was later swapped for a new link: the way is followed
        // through the old link's target, relative and absolute, and the new link is seen there.
        let target = root.file("target")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root.file("alias"), withDestinationPath: "target")
        try FileManager.default.createSymbolicLink(atPath: root.file("absolute"), withDestinationPath: target)
        // The job is added between the links and the swap: the swap waits until the clock has
        // passed the add by two ticks of the coarse clock file times come from.
        func now() -> Int { Int(Date().timeIntervalSince1970 * 1000) }
        let added = now() + 2 * TempFile.coarseClockTick + 1
        XCTAssertNoThrow(try TempFile(destination: root.file("alias") + "/f", jobID: 6, queue: 0).checkNoNewLinks(since: added))
        XCTAssertNoThrow(try TempFile(destination: root.file("absolute") + "/f", jobID: 6, queue: 0).checkNoNewLinks(since: added))
        while now() < added + 2 * TempFile.coarseClockTick { usleep(500) }
        try FileManager.default.removeItem(atPath: target)
        try FileManager.default.createSymbolicLink(atPath: target, withDestinationPath: "/tmp")
        for name in ["alias", "absolute"] {
            XCTAssertThrowsError(try TempFile(destination: root.file(name) + "/f", jobID: 7, queue: 0).checkNoNewLinks(since: added)) { error in
                XCTAssertTrue(String(describing: error).contains("\(target) became a symbolic link"), "\(name): \(error)")
            }
        }
        // A loop of old links is refused, not followed for ever.
        try FileManager.default.createSymbolicLink(atPath: root.file("loop1"), withDestinationPath: "loop2")
        try FileManager.default.createSymbolicLink(atPath: root.file("loop2"), withDestinationPath: "loop1")
        XCTAssertThrowsError(try TempFile(destination: root.file("loop1") + "/f", jobID: 8, queue: 0)
            .checkNoNewLinks(since: Int(Date().timeIntervalSince1970 * 1000) + 1000))
    }

    // MARK: Unnamed temp files (O_TMPFILE)

    /// The temp files (`.haul-*.part`) in `folder`.
    private func tempNames(in folder: TempDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasPrefix(TempFile.prefix) }
    }

    private func unnamedAttempt(_ name: String, in folder: TempDirectory, validator: Validator? = nil) throws -> DownloadAttempt {
        let attempt = try DownloadAttempt(temp: TempFile(destination: folder.file(name), jobID: 7, queue: 0), expectedChecksum: nil,
                                          storedValidator: validator, storedTotal: nil, unnamed: true)
        XCTAssertEqual(tempNames(in: folder), [], "a fresh download starts with no name in the folder")
        return attempt
    }

    /// Makes `file` durable (then runs `afterDurable`), places it where nothing is, closes it,
    /// and returns what its destination `name` in `folder` holds.
    private func placedText(_ file: VerifiedFile, in folder: TempDirectory, named name: String,
                            afterDurable: () -> Void = {}, line: UInt = #line) throws -> String {
        XCTAssertEqual(VerifiedFile.makeDurable([file]).map { $0?.message }, [nil], line: line)
        afterDurable()
        XCTAssertEqual(try file.place(.keepExisting), .moved(to: nil), line: line)
        file.close()
        return try String(contentsOfFile: folder.file(name), encoding: .utf8)
    }

    private func feed(_ attempt: DownloadAttempt, _ text: String) throws {
        try Data(text.utf8).withUnsafeBytes { try attempt.body($0) }
    }

    func testAnUnnamedDownloadIsLinkedIntoPlaceAndLeavesNoTempFile() throws {
        let folder = try makeTempDirectory()
        let attempt = try unnamedAttempt("small.txt", in: folder)
        XCTAssertEqual(attempt.head(ResponseHead(status: 200, headers: ["Content-Length": "5"], url: nil)), .accept)
        try feed(attempt, "small")
        XCTAssertEqual(tempNames(in: folder), [], "a small body stays unnamed")
        guard case .verified(let file) = attempt.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("not verified") }
        XCTAssertTrue(file.unnamed)
        XCTAssertEqual(VerifiedFile.makeDurable([file]).map { $0?.message }, [nil])
        XCTAssertEqual(try file.place(.keepExisting), .moved(to: nil))
        file.close()
        XCTAssertEqual(try String(contentsOfFile: folder.file("small.txt"), encoding: .utf8), "small")
        XCTAssertEqual(tempNames(in: folder), [])
    }

    /// A small body is held in memory while it arrives: the transfer's thread writes nothing to
    /// the temp file, and its bytes reach the file when the batch is made durable.
    func testASmallBodyIsWrittenOnlyWhenItsFileIsMadeDurable() throws {
        let folder = try makeTempDirectory()
        let attempt = try unnamedAttempt("held.txt", in: folder)
        _ = attempt.head(ResponseHead(status: 200, headers: ["Content-Length": "11"], url: nil))
        try feed(attempt, "held ")
        try feed(attempt, "bytes")
        try feed(attempt, "!")
        guard case .verified(let file) = attempt.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("not verified") }
        func size() -> Int { var info = stat(); return fstat(file.descriptor, &info) == 0 ? Int(info.st_size) : -1 }
        XCTAssertEqual(size(), 0, "nothing written while the body arrived")
        XCTAssertEqual(file.held, Array("held bytes!".utf8))
        XCTAssertEqual(try placedText(file, in: folder, named: "held.txt") { XCTAssertEqual(size(), 11) }, "held bytes!")

        let large = try unnamedAttempt("written.bin", in: folder)
        _ = large.head(ResponseHead(status: 200, headers: ["Content-Length": String(DownloadAttempt.heldLimit + 1)], url: nil))
        try feed(large, "x")
        XCTAssertEqual(large.snapshot.bytesOnDisk, 1)
        guard case .failed = large.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("a short body verified") }
    }

    // MARK: Held bodies written ahead of placement (HeldBodyWriter)

    /// A named temp file holding `held` in memory, nothing of it written yet.
    private func heldFile(_ name: String, in folder: TempDirectory, held: String, readOnly: Bool = false) throws -> VerifiedFile {
        let temp = TempFile(destination: folder.file(name), jobID: name.count, queue: 0)
        var (descriptor, _) = try temp.open()
        if readOnly {
            close(descriptor)
            descriptor = open(temp.path, O_RDONLY | O_CLOEXEC)
        }
        var file = VerifiedFile(temp: temp, descriptor: descriptor, bytes: Int64(held.utf8.count), status: 200)
        file.held = Array(held.utf8)
        return file
    }

    /// The files `afterWrites` hands on, waited for.
    private func afterWrites(_ writer: HeldBodyWriter, _ batch: [(token: String, file: VerifiedFile)]) -> [VerifiedFile] {
        let handed = HandedFiles()
        let done = expectation(description: "batch handed on")
        writer.afterWrites(batch) { files in
            handed.files.withLock { $0 = files }
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        return handed.files.withLock { $0 }
    }

    private func size(_ descriptor: Int32) -> Int {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int(info.st_size) : -1
    }

    /// A held body is written as soon as its file is verified; its batch comes to placement with
    /// nothing left to write, and is placed whole.
    func testAHeldBodyIsWrittenAheadOfItsBatchAndNotAgain() throws {
        let folder = try makeTempDirectory()
        let writer = HeldBodyWriter()
        let file = try heldFile("ahead.txt", in: folder, held: "written ahead")
        writer.write(file, token: "t1")
        let handed = afterWrites(writer, [("t1", file)])
        XCTAssertEqual(handed.map(\.held), [[]], "placement has nothing left to write")
        XCTAssertEqual(size(file.descriptor), 13, "the bytes are in the file before placement")
        XCTAssertEqual(Placement.place([(handed[0], .replace)]).count, 1)
        XCTAssertEqual(try String(contentsOfFile: folder.file("ahead.txt"), encoding: .utf8), "written ahead")
    }

    /// A held body that cannot be written stays held, so placement writes it again and says why
    /// (a full disk is the machine's fault); a file given to no write comes back as it was.
    func testAHeldBodyThatCannotBeWrittenIsLeftForPlacementToReport() throws {
        let folder = try makeTempDirectory()
        let writer = HeldBodyWriter()
        let refused = try heldFile("refused.txt", in: folder, held: "no room", readOnly: true)
        let other = try heldFile("other.txt", in: folder, held: "not asked")
        defer { refused.close(); other.close() }
        writer.write(refused, token: "t1")
        let handed = afterWrites(writer, [("t1", refused), ("t2", other)])
        XCTAssertEqual(handed.map(\.held), [Array("no room".utf8), Array("not asked".utf8)])
        XCTAssertNotNil(VerifiedFile.makeDurable([handed[0]])[0], "placement reports the write it could not make")
    }

    /// A file closed through the writer is closed only after its write: the bytes reach the file,
    /// never a descriptor number reused meanwhile.
    func testAFileClosedThroughTheWriterIsClosedAfterItsWrite() throws {
        let folder = try makeTempDirectory()
        let writer = HeldBodyWriter()
        let file = try heldFile("closed.txt", in: folder, held: "then closed")
        writer.write(file, token: "t1")
        writer.close(file, token: "t1")
        _ = afterWrites(writer, [])
        XCTAssertEqual(fcntl(file.descriptor, F_GETFD), -1, "closed")
        XCTAssertEqual(try String(contentsOfFile: file.temp.path, encoding: .utf8), "then closed")
        let others = try [heldFile("a.txt", in: folder, held: "a"), heldFile("b.txt", in: folder, held: "b")]
        for (index, file) in others.enumerated() { writer.write(file, token: "o\(index)") }
        writer.closeAll(others)
        XCTAssertEqual(others.map { fcntl($0.descriptor, F_GETFD) }, [-1, -1], "closed on return")
        XCTAssertEqual(try others.map { try String(contentsOfFile: $0.temp.path, encoding: .utf8) }, ["a", "b"])
    }

    /// A download that ends before its first byte (a 404) leaves its unnamed file, empty, for
    /// the next download into the same folder, which places its own bytes in it; a file with
    /// bytes in it, or one made for another folder, is not handed out. Each unnamed file made
    /// and freed cost ext4 a search past recently freed inodes (see `UnnamedFilePool`).
    func testAnEmptyUnnamedFileIsTheNextDownloadsFileInItsFolder() throws {
        let folder = try makeTempDirectory()
        let missing = try unnamedAttempt("missing.txt", in: folder)
        let kept = UnnamedFilePool.count
        XCTAssertEqual(missing.head(ResponseHead(status: 404, headers: [:], url: nil)), .reject("HTTP 404 Not Found"))
        guard case .failed = missing.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("a 404 verified") }
        XCTAssertEqual(UnnamedFilePool.count, kept + 1, "the 404's empty file is kept")

        let elsewhere = try makeTempDirectory()
        let other = try unnamedAttempt("other.txt", in: elsewhere)
        XCTAssertEqual(UnnamedFilePool.count, kept + 1, "not handed out for another folder")
        other.closeUnsent()
        XCTAssertEqual(UnnamedFilePool.count, kept + 2)
        XCTAssertNotNil(UnnamedFilePool.take(folder: elsewhere.path).map { close($0) })

        let next = try unnamedAttempt("next.txt", in: folder)
        XCTAssertEqual(UnnamedFilePool.count, kept, "the next download into the folder took it")
        _ = next.head(ResponseHead(status: 200, headers: ["Content-Length": "4"], url: nil))
        try feed(next, "next")
        guard case .verified(let file) = next.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("not verified") }
        XCTAssertEqual(try placedText(file, in: folder, named: "next.txt"), "next")

        let cut = try unnamedAttempt("cut.bin", in: folder)
        _ = cut.head(ResponseHead(status: 200, headers: ["Content-Length": String(DownloadAttempt.heldLimit + 10)], url: nil))
        try feed(cut, "written")
        guard case .failed = cut.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("a short body verified") }
        XCTAssertEqual(UnnamedFilePool.count, kept, "a file with bytes in it is closed, not kept")
        XCTAssertEqual(tempNames(in: folder), [])
    }

    /// Both ways of naming an unnamed file work: AT_EMPTY_PATH (with CAP_DAC_READ_SEARCH, as
    /// root) and /proc/self/fd (without it), and neither replaces a file.
    func testAnUnnamedFileIsNamedEitherWayAndNeverOverAFile() throws {
        let folder = try makeTempDirectory()
        for (name, link) in [("default", haul_link_open_file), ("proc", haul_link_open_file_by_proc)] {
            let fd = haul_open_unnamed(folder.path, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0, "O_TMPFILE in \(folder.path)")
            defer { close(fd) }
            XCTAssertEqual(write(fd, name, name.utf8.count), name.utf8.count)
            XCTAssertEqual(link(fd, folder.file(name)), 0, "\(name): \(String(cString: strerror(errno)))")
            XCTAssertEqual(try String(contentsOfFile: folder.file(name), encoding: .utf8), name)
            XCTAssertTrue(FileManager.default.createFile(atPath: folder.file(name + ".taken"), contents: Data("theirs".utf8)))
            XCTAssertEqual(link(fd, folder.file(name + ".taken")), -1, name)
            XCTAssertEqual(errno, EEXIST, name)
            XCTAssertEqual(try String(contentsOfFile: folder.file(name + ".taken"), encoding: .utf8), "theirs")
        }
    }

    func testAnUnnamedDownloadKeepsAFileThatAppearedAndReplacesOnlyWhenAsked() throws {
        let folder = try makeTempDirectory()
        for (mode, expected) in [(Placement.Mode.keepExisting, "the user's"), (.replace, "new")] {
            try Data("the user's".utf8).write(to: URL(fileURLWithPath: folder.file("taken.txt")))
            let attempt = try unnamedAttempt("taken.txt", in: folder)
            _ = attempt.head(ResponseHead(status: 200, headers: ["Content-Length": "3"], url: nil))
            try feed(attempt, "new")
            guard case .verified(let file) = attempt.verify(FetchResult(head: nil, failure: nil)) else { return XCTFail("not verified") }
            XCTAssertThrowsError(try file.place(mode), "placed before its bytes were written")
            XCTAssertEqual(VerifiedFile.makeDurable([file]).map { $0?.message }, [nil])
            let moved = try file.place(mode)
            file.close()
            XCTAssertEqual(moved, mode == .keepExisting ? .destinationTaken(size: 10) : .moved(to: nil), "\(mode)")
            XCTAssertEqual(try String(contentsOfFile: folder.file("taken.txt"), encoding: .utf8), expected, "\(mode)")
            XCTAssertEqual(tempNames(in: folder), [], "\(mode)")
        }
    }

    func testALargeOrResumableUnnamedDownloadGetsItsTempFileName() throws {
        let folder = try makeTempDirectory()
        let large = try unnamedAttempt("large.bin", in: folder)
        _ = large.head(ResponseHead(status: 200, headers: ["Content-Length": String(DownloadAttempt.resumableSize)], url: nil))
        XCTAssertEqual(tempNames(in: folder), [large.temp.path.split(separator: "/").last.map(String.init)!],
                       "a large body is kept under its name from its head on")
        _ = large.verify(FetchResult(head: nil, failure: .cancelled))

        let cut = try unnamedAttempt("cut.bin", in: try makeTempDirectory())
        _ = cut.head(ResponseHead(status: 200, headers: ["Content-Length": "100", "ETag": "\"v1\""], url: nil))
        try feed(cut, "the first part")
        _ = cut.verify(FetchResult(head: nil, failure: .transport("connection reset")))
        XCTAssertEqual(try String(contentsOfFile: cut.temp.path, encoding: .utf8), "the first part",
                       "bytes a later attempt can resume keep the temp file's name")
    }

    /// Two attempts of one job (the first's lease was lost): the first keeps the temp file's
    /// name; the second, unnamed, cannot take it, so it must not report a validator for bytes
    /// it could not keep — recorded, a later resume would splice the first's bytes with it.
    func testAnUnnamedAttemptThatCannotTakeTheNameReportsNothingResumable() throws {
        let folder = try makeTempDirectory()
        let first = try unnamedAttempt("shared.bin", in: folder)
        let second = try DownloadAttempt(temp: TempFile(destination: folder.file("shared.bin"), jobID: 7, queue: 0), expectedChecksum: nil,
                                         storedValidator: nil, storedTotal: nil, unnamed: true)
        for (attempt, etag) in [(first, "\"v1\""), (second, "\"v2\"")] {
            _ = attempt.head(ResponseHead(status: 200, headers: ["Content-Length": "100", "ETag": etag], url: nil))
            try feed(attempt, "bytes of \(etag)")
        }
        _ = first.verify(FetchResult(head: nil, failure: .transport("connection reset")))
        XCTAssertEqual(first.snapshot.validator, .etag("\"v1\""), "the first keeps the name, and says so")
        _ = second.verify(FetchResult(head: nil, failure: .transport("connection reset")))
        XCTAssertNil(second.snapshot.validator, "the second's bytes are gone: nothing to resume")
        XCTAssertEqual(try String(contentsOfFile: first.temp.path, encoding: .utf8), "bytes of \"v1\"")
    }

    /// A small body still arriving when progress is recorded (a slow server) gets its name
    /// then, so what is recorded can be resumed after a kill -9.
    func testAnUnnamedDownloadStillRunningWhenProgressIsRecordedGetsItsName() throws {
        let folder = try makeTempDirectory()
        let attempt = try unnamedAttempt("slow.bin", in: folder)
        _ = attempt.head(ResponseHead(status: 200, headers: ["Content-Length": "50000", "ETag": "\"s\""], url: nil))
        try feed(attempt, "the first bytes")
        XCTAssertNil(attempt.snapshot.validator, "unnamed: nothing resumable yet")
        XCTAssertEqual(attempt.snapshotForProgress().validator, .etag("\"s\""))
        XCTAssertEqual(try String(contentsOfFile: attempt.temp.path, encoding: .utf8), "the first bytes")
        try feed(attempt, ", then the rest")
        XCTAssertEqual(try String(contentsOfFile: attempt.temp.path, encoding: .utf8), "the first bytes, then the rest",
                       "the bytes after the name follow those written when it was given")
        _ = attempt.verify(FetchResult(head: nil, failure: .cancelled))
    }
}

/// What a `HeldBodyWriter` handed on, read on the test's thread.
private final class HandedFiles: Sendable {
    let files = Mutex<[VerifiedFile]>([])
}
