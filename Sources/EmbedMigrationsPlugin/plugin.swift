import Foundation
import PackagePlugin

/// Compiles the SQL files of the package's top-level `Migrations/` folder into the target,
/// so the built binary carries its schema and works when copied anywhere.
@main
struct EmbedMigrationsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let folder = context.package.directoryURL.appending(path: "Migrations")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path())
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { folder.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) migrations",
                executable: try context.tool(named: "MigrationEmbedder").url,
                arguments: [output.path()] + inputs.map { $0.path() },
                inputFiles: inputs + [folder],
                outputFiles: [output]
            )
        ]
    }
}
