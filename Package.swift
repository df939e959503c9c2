// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "haul",
    products: [
        .executable(name: "haul", targets: ["haul"]),
        .library(name: "HaulCore", targets: ["HaulCore"]),
        .library(name: "HaulPostgres", targets: ["HaulPostgres"]),
        .executable(name: "haul-queue-bench", targets: ["haul-queue-bench"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            path: "Sources/CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            path: "Sources/CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The executable's memory allocator (see Sources/haul/Allocator.swift).
        .systemLibrary(
            name: "CJemalloc",
            path: "Sources/CJemalloc",
            pkgConfig: "jemalloc",
            providers: [.apt(["libjemalloc-dev"])]
        ),
        // Build-time tool: turns Migrations/*.sql into Swift source so the binary carries them.
        .executableTarget(name: "MigrationEmbedder", path: "Sources/MigrationEmbedder"),
        .plugin(
            name: "EmbedMigrationsPlugin",
            capability: .buildTool(),
            dependencies: ["MigrationEmbedder"],
            path: "Sources/EmbedMigrationsPlugin"
        ),
        // syncfs(2) and the other Linux calls Swift's Glibc module does not show; jemalloc's settings.
        .target(name: "CFileSync", path: "Sources/CFileSync"),
        .target(
            name: "HaulCore",
            dependencies: ["CSQLite", "CCurl", "CCrypto", "CFileSync"],
            path: "Sources/HaulCore",
            plugins: ["EmbedMigrationsPlugin"]
        ),
        // The PostgreSQL connection and migrations for the queue: kept out of HaulCore, which
        // does not link libpq. Its migrations come from Migrations/postgres/.
        .target(
            name: "HaulPostgres",
            dependencies: ["HaulCore", "CLibPQ"],
            path: "Sources/HaulPostgres",
            plugins: ["EmbedMigrationsPlugin"]
        ),
        .executableTarget(
            name: "haul",
            dependencies: ["HaulCore", "HaulPostgres", "CJemalloc"],
            path: "Sources/haul"
        ),
        // The queue benchmark (Benchmarks/run, workload Q): concurrent claimers through the
        // JobStore port against PostgreSQL or SQLite.
        .executableTarget(
            name: "haul-queue-bench",
            dependencies: ["HaulCore", "HaulPostgres"],
            path: "Benchmarks/QueueBench"
        ),
        // Test support: the loopback HTTP fault server and helpers shared by the test targets.
        .target(
            name: "HaulTestSupport",
            dependencies: ["HaulCore", "HaulPostgres", "CFileSync"],
            path: "Tests/HaulTestSupport"
        ),
        .testTarget(
            name: "HaulCoreTests",
            dependencies: ["HaulCore", "HaulPostgres", "HaulTestSupport"],
            path: "Tests/HaulCoreTests"
        ),
        .testTarget(
            name: "HaulEndToEndTests",
            dependencies: ["haul", "HaulCore", "HaulPostgres", "HaulTestSupport"],
            path: "Tests/HaulEndToEndTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
