import AppStoreSimulator
import Foundation
import GooglePlaySecurity
import GooglePlaySimulator
import HTTPServer
import KakinCore
import KakinCrypto
import KakinService
import KakinSystem

/// Local mode's Play simulator: mounted under `/play-simulator/`, on the App Store simulator's clock (a clock move
/// stops at its renewals and expiries too), its RTDNs pushed in-process to Kakin's `/v1/notifications/googleplay`,
/// its state saved beside the database (`kakin.db.play-simulator.json`).
extension LocalMode {
    static let googlePlayPushPath = "/v1/notifications/googleplay"

    /// The Play simulator of a local run: loaded from its state file when there is one, else the demo Play app.
    static func makePlaySimulator(stateFile: String?, clock: any Clock, kakin: LateApp, logger: Logger) throws -> GooglePlaySimulator {
        let sink = InProcessPlayPushSink(path: googlePlayPushPath) { request in
            guard let app = kakin.app else { return HTTPResponse.text("starting", status: 503) }
            let response = await app.handle(request)
            // Read-your-writes, as for the App Store's notifications: the simulator's call answers once Kakin applied it.
            if response.status == 200 {
                await app.services.googlePlayNotifications.worker.completePass()
                await app.services.googlePlay.worker.completePass()
            }
            return response
        }
        let push = GooglePlaySimulator.PushSettings(sink: sink)
        if let stateFile, let bytes = FileManager.default.contents(atPath: stateFile) {
            logger.info("Play simulator state loaded", ["simulator.stateFile": .string(stateFile)])
            return try GooglePlaySimulator(stateFile: [UInt8](bytes), clock: clock, wall: SystemClock(), push: push)
        }
        return try GooglePlaySimulator(configuration: .demo(seed: UInt64.random(in: 1...UInt64(Int64.max))), clock: clock, wall: SystemClock(),
                                       push: push)
    }

    /// The demo Play app's settings, its Developer API at the simulator on `port` (the service account is the simulator's,
    /// its `token_uri` the simulator's token endpoint).
    func demoPlayApp(port: Int) throws -> GooglePlayAppSettings {
        let root = "http://127.0.0.1:\(port)\(GooglePlaySimulator.mount)/"
        let account = try GoogleServiceAccount(fileBytes: playSimulator.serviceAccountFile(tokenURI: root + "token"))
        let push = playSimulator.pushSettings
        return GooglePlayAppSettings(packageName: playSimulator.configuration.packageName, catalog: PlaySimulatorConfiguration.demoKakinCatalog,
                                     serviceAccount: account, apiRoot: root,
                                     rtdn: .init(audience: "http://127.0.0.1:\(port)\(Self.googlePlayPushPath)",
                                                 serviceAccountEmail: push.serviceAccountEmail, certsURL: root + "oauth2/v3/certs"))
    }

    /// Push tokens name this server's endpoint as their audience, as Pub/Sub's default does.
    func attachGooglePlay(port: Int) {
        var push = playSimulator.pushSettings
        push.audience = "http://127.0.0.1:\(port)\(Self.googlePlayPushPath)"
        playSimulator.setPush(push)
        simulator.addFollower(PlaySimulatorFollower(play: playSimulator))
    }

    func savePlaySimulator() {
        guard let playStateFile else { return }
        do {
            try Data(playSimulator.snapshot()).write(to: URL(fileURLWithPath: playStateFile), options: .atomic)
        } catch {
            logger.error("could not save the Play simulator state", ["simulator.stateFile": .string(playStateFile), "error": .string("\(error)")])
        }
    }
}

/// The Play simulator as a follower of the App Store simulator's clock.
struct PlaySimulatorFollower: SimulatedTimeFollower {
    let play: GooglePlaySimulator
    func nextEventMs() -> Int64? { play.nextEventMs() }
    func advance(toMs targetMs: Int64) async { await play.advance(toMs: targetMs) }
}
