import Foundation
import KakinAppCommand
import KakinServer
import KakinSimulation
import KakinVerifyCommand

// `kakin`: see `kakin --help`. This file only hands over the arguments: `kakin app` to KakinAppCommand (the
// KakinKit command-line app), `kakin verify` to KakinVerifyCommand, everything else to KakinServer.
let arguments = Array(CommandLine.arguments.dropFirst())
let rest = Array(arguments.dropFirst())
let status: Int32
switch arguments.first {
case "app": status = await AppCommand.run(rest)
case "verify": status = VerifyCommand.run(arguments: rest)
case "simulate": status = await SimulateCommand.run(rest)
default: status = await KakinCommand.run(arguments)
}
exit(status)
