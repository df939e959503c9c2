/// Every `haul` command, in the order `--help` lists them.
enum Commands {
    static var all: [any Command.Type] { [AddCommand.self, RunCommand.self, GetCommand.self, StatusCommand.self, ListCommand.self, ExportCommand.self,
                                          ShowCommand.self, RetryCommand.self, CancelCommand.self, VerifyCommand.self, RefreshCommand.self,
                                          CompletionsCommand.self] }
}
