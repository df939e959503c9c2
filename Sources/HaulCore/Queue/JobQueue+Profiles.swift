extension JobQueue {
    /// The id of the stored profile equal to `profile`, storing it first when it is new.
    /// A profile that may hold secrets makes the database (and its journal files) readable and
    /// writable by its owner only.
    public func storeProfile(_ profile: RequestProfile) throws -> Int {
        if profile.mayHoldSecrets { try database.restrictToOwner() }
        return try database.transaction(.write) {
            try database.run("""
                INSERT INTO request_profiles (headers, user_agent, netrc) VALUES (?, ?, ?)
                ON CONFLICT (headers, user_agent, netrc) DO NOTHING
                """, profile.storedHeaders, profile.userAgent, profile.storedNetrc)
            // NULLs are distinct to UNIQUE, so look the row up with IS.
            return try database.scalarInt("""
                SELECT id FROM request_profiles WHERE headers = ? AND user_agent IS ? AND netrc IS ? ORDER BY id LIMIT 1
                """, [profile.storedHeaders, profile.userAgent, profile.storedNetrc])
        }
    }

    /// The stored profile `id`, or nil.
    public func profile(id: Int) throws -> RequestProfile? {
        try database.firstRow("SELECT headers, user_agent, netrc FROM request_profiles WHERE id = ?", [id]) {
            RequestProfile(storedHeaders: $0.string(0), userAgent: $0.optionalString(1), storedNetrc: $0.optionalString(2))
        }
    }
}
