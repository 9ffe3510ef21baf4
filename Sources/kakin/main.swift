import Foundation
import KakinServer

// `kakin`: see `kakin --help`. Everything lives in KakinServer; this file only hands over the arguments.
let status = await KakinCommand.run(Array(CommandLine.arguments.dropFirst()))
exit(status)
