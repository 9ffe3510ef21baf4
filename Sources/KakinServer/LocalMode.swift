import AppStoreSecurity
import KakinCore

/// Local mode (interim until the simulator is wired): SQLite, the demo catalog, a local signing CA trusted.
final class LocalMode: Sendable {
    let configuration: Configuration
    let ca: SigningCertificateAuthority
    let logger: Logger

    static func configuration() -> Configuration {
        var c = Configuration()
        c.apps = [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId, environments: [.sandbox], catalog: .demo)]
        return c
    }

    init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.ca = try SigningCertificateAuthority(nowMs: SystemClock().nowMs())
    }

    func runtimeOptions() -> KakinRuntime.Options {
        KakinRuntime.Options(configuration: configuration, defaultRootsDER: [ca.rootDER], logger: logger)
    }

    func attach(to runtime: KakinRuntime) async throws {}
    func stop() async {}
    func banner(port: Int) -> String { "Kakin (local mode) on http://127.0.0.1:\(port)" }
}

enum SimulatorCommandEntry {
    static func run(arguments: [String]) async -> Int32 {
        Console.err("kakin simulator: not built yet")
        return 1
    }
}
