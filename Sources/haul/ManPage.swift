import HaulCore

/// `haul help --man`: the manual page (roff), made from the same command descriptions as
/// `--help`. `haul.1` at the top of the repository is its output, kept equal by a test.
enum ManPage {
    static func text(topHelp: String) -> String {
        var page = [
            ".TH HAUL 1 \"\" \"haul \(HaulVersion.string)\" \"User Commands\"",
            ".SH NAME",
            "haul \\- a resumable bulk HTTP downloader with a crash\\-proof SQLite job queue",
            ".SH SYNOPSIS",
            ".B haul",
            "\\fIcommand\\fR [\\fIoptions\\fR]",
            ".br",
            ".B haul",
            "help \\-\\-man | \\-\\-version | \\-\\-help",
            ".SH DESCRIPTION",
            escape("""
                Every URL is a job in a SQLite queue (./haul.db, or --db PATH, or $HAUL_DB) or a PostgreSQL queue \
                that workers on many machines share (--db postgres://USER@HOST:PORT/DB), so a batch survives \
                crashes, kill -9 and restarts, and haul status tells from another terminal how it stands. Files are \
                written to a hidden temp file beside the destination and moved into place only once their status, \
                length and checksum (md5, sha1, sha256 or sha512, when given) checked out.
                """),
            ".PP",
            escape("""
                Options take their value as the next argument or after '=' (--jobs 4, --jobs=4); short ones \
                also attached (-j4, -ojobs.jsonl) and after flags bundled with them (-qkj4).
                """),
            ".SH COMMANDS",
        ]
        for command in Commands.all {
            let spec = command.spec
            page.append(".SS \"\(escape(spec.usage))\"")
            page.append(escape(spec.abstract))
            if !spec.discussion.isEmpty {
                page.append(".PP")
                page.append(".nf")
                page += spec.discussion.split(separator: "\n", omittingEmptySubsequences: false).map { escape(String($0)) }
                page.append(".fi")
            }
            for option in spec.allOptions {
                page.append(".TP")
                let names = option.names.map { "\\fB\(escape($0))\\fR" }.joined(separator: ", ")
                page.append(names + (option.value.map { option.optionalValue ? " [\\fI\(escape($0))\\fR]" : " \\fI\(escape($0))\\fR" } ?? ""))
                page.append(escape(option.help))
            }
        }
        page += [
            ".SH EXIT STATUS",
            ".TP", "0", "success",
            ".TP", "1", escape("a failure: some input rejected, some job failed, a database or file error, standard output that could not be written"),
            ".TP", "64", "a usage error",
            ".TP", "130, 143", escape("haul run interrupted by SIGINT, SIGTERM"),
            ".SH ENVIRONMENT",
            ".TP", ".B HAUL_DB", "the queue database when --db is not given",
            ".TP", ".B HAUL_TRANSPORT", escape("curl (the default) or urlsession"),
            ".TP", ".B HAUL_WORKER", escape("this worker's name when run or get has no --worker (default: the machine's host name)"),
            ".TP", ".B HAUL_BUSY_TIMEOUT", escape("seconds to wait for another process's lock on the database (default 10)"),
            ".TP", ".B http_proxy, https_proxy, all_proxy, no_proxy", escape("proxies, as curl reads them"),
            ".TP", ".B CURL_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR", escape("CA certificates to trust, as curl reads them"),
            ".TP", ".B NO_COLOR", "no colour, whatever the output",
            ".SH SEE ALSO",
            escape("curl(1), wget(1), aria2c(1)"),
        ]
        return page.joined(separator: "\n")
    }

    /// Text safe in a roff line: backslashes and hyphens escaped, no line starting a request.
    static func escape(_ text: String) -> String {
        var out = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }
}
