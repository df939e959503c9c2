/// What to do when a job's destination already holds a file that haul did not place there.
///
/// Guarantees: `skip`, the default, never changes or removes that file: the job ends done,
/// keeping it (and fails, leaving it alone, when it does not match the checksum given);
/// `replace` downloads over it atomically; `rename` places the new file beside it as
/// `NAME.1.EXT`, `NAME.2.EXT`…
public enum ExistingFilePolicy: String, Sendable, CaseIterable {
    case skip, replace, rename
}

/// What identifies a file haul placed, as it was when placed: a file still matching it is
/// haul's own (a later fetch may replace it); any other file at the destination is the user's.
///
/// Guarantees: two identities are equal only when size, modification and change times (to the
/// nanosecond) and inode all are, so a file rewritten or replaced since no longer matches — even
/// one copied in with the same size and modification time onto a reused inode, as the change
/// time cannot be set by hand.
public struct FileIdentity: Sendable, Equatable {
    public var size: Int64
    /// Nanoseconds since the epoch.
    public var modified: Int64
    /// The inode's change time, in nanoseconds since the epoch.
    public var changed: Int64
    public var inode: UInt64

    public init(size: Int64, modified: Int64, changed: Int64, inode: UInt64) {
        self.size = size
        self.modified = modified
        self.changed = changed
        self.inode = inode
    }
}

extension FileIdentity {
    /// As a store keeps it: four integer columns (the inode's bits as a signed 64-bit integer).
    public var stored: (size: Int, modified: Int, inode: Int, changed: Int) {
        (Int(size), Int(modified), Int(Int64(bitPattern: inode)), Int(changed))
    }

    /// From a store's four columns; nil when any is missing (nothing was recorded).
    public init?(storedSize size: Int?, modified: Int?, inode: Int?, changed: Int?) {
        guard let size, let modified, let inode, let changed else { return nil }
        self.init(size: Int64(size), modified: Int64(modified), changed: Int64(changed), inode: UInt64(bitPattern: Int64(inode)))
    }
}

/// Where haul placed a job's file, what it was then, and what the server said of it.
///
/// Guarantees: `path` is nil when the file went to the job's destination itself; the other
/// fields are nil when the response did not say (or, for `sha256`, it was not computed).
public struct PlacedFile: Sendable, Equatable {
    public var path: String?
    public var identity: FileIdentity
    public var metadata: ResponseMetadata

    public init(path: String?, identity: FileIdentity, metadata: ResponseMetadata = ResponseMetadata()) {
        self.path = path
        self.identity = identity
        self.metadata = metadata
    }
}

/// What a response said of the file it carried, kept with the job once the file is placed.
///
/// Guarantees: values are the server's, unchanged; `finalURL` is the URL that answered after
/// redirects, credentials included (redact it before showing it).
public struct ResponseMetadata: Sendable, Equatable {
    public var etag: String?
    public var lastModified: String?
    public var contentType: String?
    public var finalURL: String?
    /// The placed file's own sha256, as lower-case hex, when computed.
    public var sha256: String?

    public init(etag: String? = nil, lastModified: String? = nil, contentType: String? = nil, finalURL: String? = nil,
                sha256: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.finalURL = finalURL
        self.sha256 = sha256
    }
}
