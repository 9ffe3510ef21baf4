import Foundation
import KakinAppCommand
import KakinServer

// `kakin`: see `kakin --help`. This file only hands over the arguments: `kakin app` to KakinAppCommand (the
// KakinKit command-line app), everything else to KakinServer.
let arguments = Array(CommandLine.arguments.dropFirst())
let status = arguments.first == "app" ? await AppCommand.run(Array(arguments.dropFirst())) : await KakinCommand.run(arguments)
exit(status)
