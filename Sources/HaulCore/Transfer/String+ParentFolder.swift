extension String {
    /// The folder part of a path: everything before its last `/` ("/" for a file at the root,
    /// "" for a bare name). Like `NSString.deletingLastPathComponent` for the normalised paths
    /// haul stores, without Foundation's cost, which showed in profiles of many small files.
    public var parentFolder: String {
        let bytes = utf8
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        if slash == bytes.startIndex { return "/" }
        return String(self[..<slash])
    }
}
