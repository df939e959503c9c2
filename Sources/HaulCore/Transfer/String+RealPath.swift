import Foundation

extension String {
    /// This path with every symbolic link resolved (realpath(3)), or nil when it does not exist.
    public var realPath: String? {
        guard let resolved = realpath(self, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
