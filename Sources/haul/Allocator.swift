import CJemalloc

/// The memory allocator of the haul executable: jemalloc (Debian's `libjemalloc-dev`), linked by
/// importing `CJemalloc`. It comes before the C library in the executable's list of libraries,
/// so the dynamic linker binds every `malloc` and `free` of the process to it: haul's Swift
/// code, libcurl, SQLite and libpq alike. haul calls nothing of it but its control interface: to
/// say which allocator serves the process (`Allocator.version`, printed by `haul --version`), and
/// to give freed memory back during a large import (`Allocator.releaseFreedMemory`).
///
/// Why: a download passes through four or five threads (libcurl's loop thread, the helpers that
/// prepare, write and place files, the store's), and the C library's allocator took 6.7 % of
/// haul's CPU samples on workload A (perf, 10,000 × 10 KB), most of them on the loop thread,
/// haul's critical path. Alternated with it (5 rounds, the previous run's files evicted from the
/// page cache so that every run has the same kind of memory), jemalloc ran A in 0.72 s instead
/// of 0.77 s, with about 5 % less CPU; mimalloc did as well. callgrind counts about the same
/// instructions with either: the gain is in what they cost (cache misses, locks, page faults),
/// not in their number. See Benchmarks/RESULTS.md. Its settings (`malloc_conf`, read before
/// `main`) are in Sources/CFileSync/CFileSync.c, haul's one C file: each thread keeps freed
/// blocks of up to 128 KiB. (In a C target of its own, holding nothing else, the executable's
/// debugging information could no longer be read by valgrind 3.19.)
///
/// Guarantees: `version` is "jemalloc/VERSION" only when the process's `malloc` is jemalloc's (a
/// megabyte taken by `malloc` shows in jemalloc's count of this thread's allocations), else
/// "malloc/other" (jemalloc linked after the C library, or another allocator preloaded);
/// `releaseFreedMemory` frees nothing in use, it only returns unused pages to the system.
enum Allocator {
    static let version: String = {
        var text: UnsafePointer<CChar>? = nil
        var size = MemoryLayout<UnsafePointer<CChar>?>.size
        guard mallctl("version", &text, &size, nil, 0) == 0, let text, cjemalloc_serves_malloc() == 1 else { return "malloc/other" }
        // "5.3.0-0-g54eaed1d…": the release, without git's description.
        return "jemalloc/" + (String(cString: text).split(separator: "-").first.map(String.init) ?? "")
    }()

    /// Gives the memory freed so far back to the system at once (jemalloc keeps freed pages up
    /// to ten seconds, for reuse): for `add`'s import, whose batches of parsed lines are large
    /// (`URLListImporter.releaseFreedMemory`). Measured on workload D (1,000,000 URLs): peak RSS
    /// 147 MB without it, 133 MB with it (glibc's allocator: 134 MB).
    static let releaseFreedMemory: @Sendable () -> Void = {
        // "arena.<MALLCTL_ARENAS_ALL>.purge" (MALLCTL_ARENAS_ALL is 4096 in jemalloc.h): every
        // arena's unused dirty pages.
        _ = mallctl("arena.4096.purge", nil, nil, nil, 0)
    }
}
