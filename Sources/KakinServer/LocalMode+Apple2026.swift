import AppStoreSimulator
import HTTPServer
import KakinCore
import KakinService

extension LocalMode {
    /// Apple's 2026 additions in local mode: the simulator's cancel flow (`disableAutoRenew`) asks Kakin's Get
    /// Retention Message endpoint, handed over in-process (the realtime URL names this server, as an operator
    /// configures it at Apple with Configure Realtime URL).
    func attachApple2026(port: Int) throws {
        let bundleId = simulator.configuration.bundleId
        guard configuration.apple2026Settings(bundleId: bundleId).retentionMessaging != nil else { return }
        let box = kakin
        simulator.setRetentionMessageTransport(InProcessRetentionMessageTransport { request in
            guard let app = box.app else { return HTTPResponse.text("starting", status: 503) }
            return await app.handle(request)
        })
        do {
            try simulator.configureRealtimeURL("http://127.0.0.1:\(port)/v1/apple/retention-message/\(bundleId)")
        } catch {
            logger.warning("the simulator's realtime URL was not set", ["error.detail": .string(error.message)])
        }
    }
}

extension LocalMode {
    /// A call to the simulator mounted in-process. When the simulated clock moved (or its rate changed), the database
    /// records the clock rows are now stamped with (for `kakin export`), and — read-your-writes for `serverFinish` —
    /// the transactions whose server finish became due are finished before the call answers (the job's worker would
    /// otherwise find them at its next poll), so `kakin app unfinished` right after is current.
    func simulatorCall(_ request: HTTPRequest) async -> HTTPResponse {
        let response = await simulator.handle(request)
        if request.method == "POST", request.path.hasSuffix("/v1/clock"), (200...299).contains(response.status), let app = kakin.app {
            await recordStampClock()
            await app.services.appStoreJobs.processDueServerFinishes()
        }
        return response
    }
}
