import CLibPQ

/// What one statement of a pipeline returned: its rows, and how many rows it inserted, updated,
/// deleted or selected (`PQcmdTuples`).
///
/// Guarantees: plain values, copied out of libpq's result before `pipeline` returns.
public struct PostgresResult: Sendable {
    public let rows: PostgresRows
    public let affected: Int
}

/// Statements sent together: libpq's pipeline mode, one round trip to the server for all.
extension PostgresConnection {
    /// Sends `statements` at once (with the pending BEGIN of a transaction before them, and
    /// COMMIT after them when `commit`), then reads their results in order: one round trip to
    /// the server instead of one per statement. The server runs them one after another as if
    /// sent one by one; each sees what the earlier ones wrote.
    ///
    /// When one fails, the server skips the rest: the first error is thrown (the transaction,
    /// if any, is then aborted, and `transaction` rolls it back). Outside a transaction the
    /// statements are one implicit transaction: all of them take effect, or none. Statements
    /// not yet prepared on this connection are prepared first, one round trip each, once per
    /// connection.
    /// - Returns: one result per statement, in order.
    public func pipeline(_ statements: [(sql: String, parameters: [PostgresValue])], commit: Bool = false) throws -> [PostgresResult] {
        // Nothing to send: no round trip (a transaction that sent nothing has nothing to commit).
        if statements.isEmpty && (!commit || pendingBegin != nil) {
            if commit && transactionDepth > 0 {
                pendingBegin = nil
                committedEarly = true
            }
            return []
        }
        var texts: [[String?]] = []
        var names: [String] = []
        for statement in statements {
            let values = statement.parameters.map(\.text)
            if values.contains(where: { $0?.utf8.contains(0) == true }) { throw nulError(sql: statement.sql) }
            texts.append(values)
            names.append(try statementName(for: statement.sql))
        }
        // What goes, in order: BEGIN or COMMIT as their text, statements as their index.
        var commands: [(sql: String, index: Int?)] = []
        let begin = pendingBegin
        pendingBegin = nil
        guard PQenterPipelineMode(handle) == 1 else { throw error(nil, sql: statements.first?.sql ?? "", secrets: []) }
        var sendError: PostgresError?
        func send(_ sent: Int32, _ sql: String) {
            if sent != 1 && sendError == nil { sendError = error(nil, sql: sql, secrets: []) }
        }
        if let begin {
            send(PQsendQueryParams(handle, begin, 0, nil, nil, nil, nil, 0), begin)
            commands.append((begin, nil))
        }
        for index in statements.indices where sendError == nil {
            send(Self.withParameters(texts[index]) { count, pointers in
                PQsendQueryPrepared(handle, names[index], count, pointers, nil, nil, 0)
            }, statements[index].sql)
            commands.append((statements[index].sql, index))
        }
        if commit && sendError == nil {
            send(PQsendQueryParams(handle, "COMMIT", 0, nil, nil, nil, nil, 0), "COMMIT")
            commands.append(("COMMIT", nil))
        }
        if PQpipelineSync(handle) != 1 && sendError == nil { sendError = error(nil, sql: "COMMIT", secrets: []) }
        var results: [PostgresResult] = []
        results.reserveCapacity(statements.count)
        var firstError = sendError
        for command in commands {
            // Each command's result, then NULL; a broken connection gives NULL at once.
            guard let result = PQgetResult(handle) else {
                if firstError == nil { firstError = error(nil, sql: command.sql, secrets: []) }
                break
            }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                if command.index != nil {
                    results.append(PostgresResult(rows: Self.rows(of: result),
                                                  affected: Int(String(cString: PQcmdTuples(result))) ?? 0))
                }
            case PGRES_PIPELINE_ABORTED:
                break  // an earlier statement failed: the server skipped this one
            default:
                if firstError == nil {
                    firstError = error(result, sql: command.sql,
                                       secrets: command.index.map { Self.secrets(in: statements[$0].parameters) } ?? [])
                    // The server no longer has the statement (DEALLOCATE, DISCARD ALL): prepared again next time.
                    if firstError?.sqlState == "26000", command.index != nil { prepared[command.sql] = nil }
                }
            }
            PQclear(result)
            while let extra = PQgetResult(handle) { PQclear(extra) }
        }
        // The sync point ends the pipeline.
        while let result = PQgetResult(handle) {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        PQexitPipelineMode(handle)
        if let firstError { throw firstError }
        if commit && transactionDepth > 0 { committedEarly = true }
        return results
    }
}
