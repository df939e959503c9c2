// Reads numbered SQL migration files and writes a Swift source file that carries them,
// so the `haul` binary needs no resource bundle at run time.
//
// Usage: MigrationEmbedder OUTPUT.swift FILE.sql...
import Foundation

let arguments = CommandLine.arguments.dropFirst()
guard let output = arguments.first else {
    FileHandle.standardError.write(Data("usage: MigrationEmbedder OUTPUT.swift FILE.sql...\n".utf8))
    exit(64)
}
let inputs = arguments.dropFirst().sorted { ($0 as NSString).lastPathComponent < ($1 as NSString).lastPathComponent }

var body = """
// Generated at build time by MigrationEmbedder from the top-level Migrations/ folder. Do not edit.

extension Migration {
    /// Every migration in Migrations/, in version order, as compiled into this binary.
    public static let embedded: [Migration] = [

"""
for path in inputs {
    let name = (path as NSString).lastPathComponent
    guard let data = FileManager.default.contents(atPath: path), let sql = String(data: data, encoding: .utf8) else {
        FileHandle.standardError.write(Data("MigrationEmbedder: cannot read \(path) as UTF-8\n".utf8))
        exit(1)
    }
    // Encode as a list of UTF-8 bytes so no character in the SQL can break the Swift literal.
    let bytes = Array(sql.utf8).map(String.init).joined(separator: ",")
    body += "        Migration(fileName: \"\(name)\", utf8: [\(bytes)]),\n"
}
body += "    ]\n}\n"
do {
    try body.write(toFile: output, atomically: true, encoding: .utf8)
} catch {
    FileHandle.standardError.write(Data("MigrationEmbedder: cannot write \(output): \(error)\n".utf8))
    exit(1)
}
