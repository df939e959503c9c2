import Foundation
import PackagePlugin

/// Compiles the SQL files of the package's top-level `Migrations/` folder into the target,
/// so the built binary carries its schema and works when copied anywhere.
///
/// Applied to `HaulCore` it embeds `Migrations/*.sql` (SQLite) as `Migration.embedded`; applied
/// to `HaulPostgres` it embeds `Migrations/postgres/*.sql` as `Migration.postgresEmbedded`.
@main
struct EmbedMigrationsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let postgres = target.name == "HaulPostgres"
        var folder = context.package.directoryURL.appending(path: "Migrations")
        if postgres { folder = folder.appending(path: "postgres") }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path())
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { folder.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        // HaulCore's invocation is unchanged (no options), so its generated file is too.
        let options = postgres ? ["--property", "postgresEmbedded", "--import", "HaulCore", "--folder", "Migrations/postgres/"] : []
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) migrations" + (postgres ? " (PostgreSQL)" : ""),
                executable: try context.tool(named: "MigrationEmbedder").url,
                arguments: options + [output.path()] + inputs.map { $0.path() },
                inputFiles: inputs + [folder],
                outputFiles: [output]
            )
        ]
    }
}
