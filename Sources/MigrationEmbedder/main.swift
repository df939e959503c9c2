// Reads numbered SQL migration files and writes a Swift source file that carries them,
// so the `haul` binary needs no resource bundle at run time.
//
// Usage: MigrationEmbedder [--property NAME --import MODULE --folder FOLDER] OUTPUT.swift FILE.sql...
//
// Without options it writes `Migration.embedded` for HaulCore itself (Migrations/, SQLite), built
// with HaulCore's internal `Migration(fileName:utf8:)`. With `--property` it writes
// `Migration.<NAME>` for another module, which imports `MODULE` (HaulCore) and uses the public
// `Migration(version:name:sql:)`; `--folder` only names the source folder in the comments.
import Foundation

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("MigrationEmbedder: \(message)\n".utf8))
    exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var property: String?
var importedModule: String?
var folder = "Migrations/"
while let option = arguments.first, option.hasPrefix("--") {
    guard arguments.count >= 2 else { fail("\(option) needs a value", status: 64) }
    let value = arguments[1]
    switch option {
    case "--property": property = value
    case "--import": importedModule = value
    case "--folder": folder = value
    default: fail("unknown option \(option)", status: 64)
    }
    arguments.removeFirst(2)
}
guard let output = arguments.first else {
    fail("usage: MigrationEmbedder [--property NAME --import MODULE --folder FOLDER] OUTPUT.swift FILE.sql...", status: 64)
}
let inputs = arguments.dropFirst().sorted { ($0 as NSString).lastPathComponent < ($1 as NSString).lastPathComponent }

var body: String
if let property {
    body = """
    // Generated at build time by MigrationEmbedder from the \(folder) folder. Do not edit.
    \(importedModule.map { "import \($0)\n" } ?? "")
    extension Migration {
        /// Every migration in \(folder), in version order, as compiled into this binary.
        public static let \(property): [Migration] = [

    """
} else {
    body = """
    // Generated at build time by MigrationEmbedder from the top-level Migrations/ folder. Do not edit.

    extension Migration {
        /// Every migration in Migrations/, in version order, as compiled into this binary.
        public static let embedded: [Migration] = [

    """
}
for path in inputs {
    let name = (path as NSString).lastPathComponent
    guard let data = FileManager.default.contents(atPath: path), let sql = String(data: data, encoding: .utf8) else {
        fail("cannot read \(path) as UTF-8")
    }
    // Encode as a list of UTF-8 bytes so no character in the SQL can break the Swift literal.
    let bytes = Array(sql.utf8).map(String.init).joined(separator: ",")
    if property != nil {
        guard let version = Int(name.prefix { $0.isASCII && $0.isNumber }) else {
            fail("\(path): the file name does not start with its version number")
        }
        let quotedName = name.unicodeScalars.map { $0.escaped(asASCII: true) }.joined()
        body += "        Migration(version: \(version), name: \"\(quotedName)\", sql: String(decoding: [\(bytes)] as [UInt8], as: UTF8.self)),\n"
    } else {
        body += "        Migration(fileName: \"\(name)\", utf8: [\(bytes)]),\n"
    }
}
body += "    ]\n}\n"
do {
    try body.write(toFile: output, atomically: true, encoding: .utf8)
} catch {
    fail("cannot write \(output): \(error)")
}
