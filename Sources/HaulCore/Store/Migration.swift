/// One numbered schema change from the top-level `Migrations/` folder.
///
/// The version is the number the file name starts with (`0002_counters.sql` is version 2).
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Builds a migration from its file name and UTF-8 content, as the build step embeds them.
    init(fileName: String, utf8: [UInt8]) {
        let digits = fileName.prefix { $0.isASCII && $0.isNumber }
        self.init(version: Int(digits) ?? 0, name: fileName, sql: String(decoding: utf8, as: UTF8.self))
    }
}
