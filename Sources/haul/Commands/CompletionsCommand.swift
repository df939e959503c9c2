/// `haul completions bash|zsh|fish`: a completion script made from the same command
/// descriptions as `--help`, so it never lists an option haul does not have.
enum CompletionsCommand: Command {
    static let spec = CommandSpec(
        name: "completions",
        abstract: "Print a shell completion script (bash, zsh or fish).",
        arguments: "bash|zsh|fish",
        options: [],
        discussion: """
            bash: haul completions bash > ~/.local/share/bash-completion/completions/haul
            zsh:  haul completions zsh > "${fpath[1]}/_haul"
            fish: haul completions fish > ~/.config/fish/completions/haul.fish
            """)

    /// Options whose value is a path: the shell completes file names there.
    static let pathValues: Set<String> = ["FILE", "DIR", "PATH"]

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        guard arguments.positionals.count == 1, let shell = arguments.positionals.first else {
            throw UsageError(message: "name one shell: bash, zsh or fish", spec: spec)
        }
        switch shell {
        case "bash": Console.out(bash())
        case "zsh": Console.out("#compdef haul\nautoload -U +X bashcompinit && bashcompinit\n" + bash())
        case "fish": Console.out(fish())
        default: throw UsageError(message: "no completions for '\(shell)': haul has them for bash, zsh and fish", spec: spec)
        }
        return 0
    }

    static func bash() -> String {
        let names = Commands.all.map { $0.spec.name }.joined(separator: " ")
        var cases = ""
        for command in Commands.all {
            let options = command.spec.allOptions.flatMap(\.names).joined(separator: " ")
            cases += "        \(command.spec.name)) options=\"\(options)\" ;;\n"
        }
        let pathOptions = Commands.all.flatMap { $0.spec.allOptions }
            .filter { $0.value.map(pathValues.contains) ?? false }.flatMap(\.names)
        return """
            # bash completion for haul (made by `haul completions bash`)
            _haul() {
                local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]} options=""
                if [ "$COMP_CWORD" -eq 1 ]; then
                    COMPREPLY=($(compgen -W "\(names) help --help --version" -- "$current"))
                    return
                fi
                case "$previous" in
                    \(Set(pathOptions).sorted().joined(separator: "|"))) COMPREPLY=($(compgen -f -- "$current")); return ;;
                esac
                case "${COMP_WORDS[1]}" in
            \(cases)    esac
                COMPREPLY=($(compgen -W "$options" -- "$current"))
            }
            complete -o default -F _haul haul
            """
    }

    static func fish() -> String {
        var lines = ["# fish completion for haul (made by `haul completions fish`)", "complete -c haul -f"]
        for command in Commands.all {
            lines.append("complete -c haul -n __fish_use_subcommand -a \(command.spec.name) -d \(quoted(command.spec.abstract))")
            for option in command.spec.allOptions {
                var line = "complete -c haul -n '__fish_seen_subcommand_from \(command.spec.name)'"
                for name in option.names {
                    line += name.hasPrefix("--") ? " -l \(name.dropFirst(2))" : " -s \(name.dropFirst())"
                }
                if let value = option.value { line += pathValues.contains(value) ? " -r -F" : " -r" }
                lines.append(line + " -d \(quoted(option.help))")
            }
        }
        return lines.joined(separator: "\n")
    }

    private static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }
}
