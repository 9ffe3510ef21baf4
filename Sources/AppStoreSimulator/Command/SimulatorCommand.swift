import Dispatch
import Foundation
import HTTPServer
import KakinCore
import KakinSystem
import Synchronization

/// `kakin simulator serve`: the App Store simulator on its own HTTP port, its notifications POSTed to
/// `--notify`. The CLI passes the words after `kakin simulator`. Exit codes: 0 after a clean shutdown
/// (SIGINT/SIGTERM), 1 when it cannot start, 2 for bad flags.
public enum SimulatorCommand {
    public static let usage = """
        usage: kakin simulator serve --port N --notify URL [--catalog FILE] [--bundle-id ID] [options]

        Runs a fake App Store: the App Store Server API at Apple's paths (/inApps/…), the control API under
        /simulator/v1/…, and Notifications V2 POSTed to URL with Apple's retry schedule in simulated time.

          --port N             port to listen on (required)
          --notify URL         where notifications are POSTed (required; e.g. http://127.0.0.1:8080/v1/notifications/appstore)
          --catalog FILE       an Xcode .storekit file, or JSON with the contract's products list; default: the demo catalog
          --bundle-id ID       the app's bundle id (default: the JSON catalog's bundleId, else dev.kakin.demo)
          --host H             address to listen on (default 127.0.0.1; the control API has no authentication)
          --app-apple-id N     the app's Apple ID (default 6000000001)
          --environment E      Sandbox (default) or Production
          --grace-days N       billing grace period in days, 1-28 (default: off, or 16 when a .storekit file enables it)
          --state FILE         load the state from FILE if it exists, save it there on shutdown
          --seed N             seed of generated ids (default: random)
          --start TIME         simulated start time, RFC 3339 (default: now)
          --time-rate R        simulated seconds per real second (default 0: time moves only when told)
          --notify-timeout S   seconds one delivery attempt may take (default 5)
          --realtime-url URL   the app's Get Retention Message endpoint, asked when a subscriber cancels (https, or http on loopback)
        """

    struct Options {
        var port: Int?
        var notify: URL?
        var catalogPath: String?
        var bundleId: String?
        var host = "127.0.0.1"
        var appAppleId: Int64?
        var environment: AppStoreEnvironment = .sandbox
        var graceDays: Int?
        var statePath: String?
        var seed: UInt64?
        var startMs: Int64?
        var timeRate: Double = 0
        var notifyTimeout: Double = 5
        var realtimeURL: String?
    }

    struct UsageError: Error {
        var message: String
    }

    public static func run(arguments: [String]) async -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") || arguments.isEmpty {
            print(usage)
            return arguments.isEmpty ? 2 : 0
        }
        let options: Options
        do {
            options = try parse(arguments)
        } catch {
            FileHandle.standardError.write(Data("kakin simulator: \(error.message)\n".utf8))
            return 2
        }
        do {
            return try await serve(options)
        } catch {
            FileHandle.standardError.write(Data("kakin simulator: \(error.message)\n".utf8))
            return error.exitCode
        }
    }

    static func parse(_ arguments: [String]) throws(UsageError) -> Options {
        guard arguments.first == "serve" else { throw UsageError(message: "unknown command \(arguments.first ?? ""); try: kakin simulator serve --help") }
        var o = Options()
        var i = 1
        func value(_ flag: String) throws(UsageError) -> String {
            guard i + 1 < arguments.count else { throw UsageError(message: "\(flag) needs a value") }
            i += 1
            return arguments[i]
        }
        while i < arguments.count {
            let flag = arguments[i]
            switch flag {
            case "--port":
                guard let p = Int(try value(flag)), (1...65_535).contains(p) else { throw UsageError(message: "--port must be 1 to 65535") }
                o.port = p
            case "--notify":
                let v = try value(flag)
                guard let url = URL(string: v), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                    throw UsageError(message: "--notify must be an http(s) URL")
                }
                o.notify = url
            case "--catalog": o.catalogPath = try value(flag)
            case "--bundle-id":
                let v = try value(flag)
                guard !v.isEmpty, v.count <= 255 else { throw UsageError(message: "--bundle-id must be 1 to 255 characters") }
                o.bundleId = v
            case "--host": o.host = try value(flag)
            case "--app-apple-id":
                guard let v = Int64(try value(flag)), v > 0 else { throw UsageError(message: "--app-apple-id must be a positive number") }
                o.appAppleId = v
            case "--environment":
                let v = try value(flag)
                guard v == "Sandbox" || v == "Production" else { throw UsageError(message: "--environment must be Sandbox or Production") }
                o.environment = AppStoreEnvironment(rawValue: v)
            case "--grace-days":
                guard let v = Int(try value(flag)), (1...28).contains(v) else { throw UsageError(message: "--grace-days must be 1 to 28") }
                o.graceDays = v
            case "--state": o.statePath = try value(flag)
            case "--seed":
                guard let v = UInt64(try value(flag)) else { throw UsageError(message: "--seed must be a non-negative 64-bit number") }
                o.seed = v
            case "--start":
                guard let v = Timestamp.parseRFC3339(try value(flag)) else { throw UsageError(message: "--start must be an RFC 3339 UTC time") }
                o.startMs = v
            case "--time-rate":
                guard let v = Double(try value(flag)), v >= 0, v <= SimulatedClock.timeRateMax else {
                    throw UsageError(message: "--time-rate must be 0 to \(Int(SimulatedClock.timeRateMax))")
                }
                o.timeRate = v
            case "--notify-timeout":
                guard let v = Double(try value(flag)), v > 0, v <= 60 else { throw UsageError(message: "--notify-timeout must be over 0 and at most 60 seconds") }
                o.notifyTimeout = v
            case "--realtime-url":
                let v = try value(flag)
                guard SimulatorState.isAcceptableRealtimeURL(v) else {
                    throw UsageError(message: "--realtime-url must be an https URL of at most 256 characters (http only on 127.0.0.1, localhost or [::1])")
                }
                o.realtimeURL = v
            default:
                throw UsageError(message: "unknown flag \(flag); see kakin simulator serve --help")
            }
            i += 1
        }
        guard o.port != nil else { throw UsageError(message: "--port is required") }
        guard o.notify != nil else { throw UsageError(message: "--notify is required") }
        return o
    }

    struct StartError: Error {
        var message: String
        var exitCode: Int32
    }

    /// Reads `--catalog`: a `.storekit` file (by extension or content) or the contract's products JSON.
    static func configuration(_ o: Options) throws(StartError) -> SimulatorConfiguration {
        var catalog = Catalog.demo
        var bundleId = o.bundleId
        var storefront = "USA"
        var grace = o.graceDays
        if let path = o.catalogPath {
            guard let data = FileManager.default.contents(atPath: path), data.count <= StoreKitConfiguration.fileBytesMax else {
                throw StartError(message: "cannot read --catalog \(path)", exitCode: 2)
            }
            let bytes = Array(data)
            do {
                let json = try JSONParser.parse(bytes)
                if path.hasSuffix(".storekit") || StoreKitConfiguration.looksLikeStoreKit(json) {
                    let file = try StoreKitConfiguration(json: json)
                    catalog = file.catalog
                    storefront = file.storefront
                    if grace == nil, file.billingGracePeriodEnabled { grace = 16 }
                } else {
                    catalog = try Catalog(contractJSON: json)
                    if bundleId == nil { bundleId = json["bundleId"]?.stringValue }
                }
            } catch let error as ConfigurationError {
                throw StartError(message: "--catalog \(path): \(error.description)", exitCode: 2)
            } catch {
                throw StartError(message: "--catalog \(path) is not valid JSON (\(error))", exitCode: 2)
            }
        } else if bundleId == nil {
            bundleId = Catalog.demoBundleId
        }
        var seed = o.seed ?? 0
        if o.seed == nil {
            var rng = SystemRandomNumberGenerator()
            seed = rng.next()
        }
        let config = SimulatorConfiguration(catalog: catalog, bundleId: bundleId ?? Catalog.demoBundleId, appAppleId: o.appAppleId ?? Catalog.demoAppAppleId,
                                            environment: o.environment, storefront: storefront, gracePeriodDays: grace, seed: seed)
        do {
            try config.validate()
        } catch {
            throw StartError(message: "invalid simulator settings: \(error.description)", exitCode: 2)
        }
        return config
    }

    static func serve(_ o: Options) async throws(StartError) -> Int32 {
        let sink = HTTPNotificationSink(url: o.notify!, timeoutSeconds: o.notifyTimeout)
        let simulator: AppStoreSimulator
        do {
            if let path = o.statePath, let data = FileManager.default.contents(atPath: path) {
                simulator = try AppStoreSimulator(stateFile: Array(data), sink: sink, timeRate: o.timeRate)
            } else {
                let clock = SimulatedClock(startMs: o.startMs ?? SystemClock().nowMs(), timeRate: o.timeRate)
                simulator = try AppStoreSimulator(configuration: try configuration(o), clock: clock, sink: sink)
            }
        } catch let error as StartError {
            throw error
        } catch {
            throw StartError(message: "cannot start: \(error)", exitCode: 1)
        }
        if let url = o.realtimeURL {
            do { try simulator.configureRealtimeURL(url) } catch { throw StartError(message: error.message, exitCode: 2) }
        }
        var http = HTTPServerConfiguration(host: o.host, port: o.port!)
        http.bodyBytesMax = 64 << 20
        let server = HTTPServer(configuration: http, handler: { request in await simulator.handle(request) },
                                rejectionResponder: { rejection, requestId in rejectionResponse(rejection, requestId) })
        do {
            try server.start()
        } catch {
            throw StartError(message: "cannot listen on \(o.host):\(o.port!): \(error)", exitCode: 1)
        }
        let base = "http://\(o.host):\(server.port)"
        let config = simulator.configuration
        // Written straight to the file descriptor: stdout is block-buffered when piped to a log.
        FileHandle.standardOutput.write(Data("""
            App Store simulator for \(config.bundleId) (\(config.environment.rawValue)) at \(base), notifying \(o.notify!.absoluteString)
              curl -s \(base)/simulator/v1/products
              curl -s -X POST \(base)/simulator/v1/purchases -d '{"productId":"\(config.catalog.sortedProducts.first?.productId ?? "…")"}'
              curl -s -X POST \(base)/simulator/v1/clock -d '{"advanceSeconds":2678400}'

            """.utf8))
        let ticker = Task { await simulator.runTicker() }
        await waitForTermination()
        ticker.cancel()
        await server.shutdown(gracePeriodSeconds: 5)
        if let path = o.statePath {
            let tmp = path + ".tmp"
            guard FileManager.default.createFile(atPath: tmp, contents: Data(simulator.snapshot())),
                  (try? FileManager.default.replaceItemAt(URL(fileURLWithPath: path), withItemAt: URL(fileURLWithPath: tmp))) != nil
                    || rename(tmp, path) == 0 else {
                throw StartError(message: "could not save the state to \(path)", exitCode: 1)
            }
            FileHandle.standardOutput.write(Data("state saved to \(path)\n".utf8))
        }
        return 0
    }

    static func rejectionResponse(_ rejection: HTTPServerRejection, _ requestId: String) -> HTTPResponse {
        let kind: ErrorKind
        switch rejection {
        case .bodyTooLarge: kind = .bodyTooLarge
        case .requestTimeout: kind = .requestTimeout
        case .serviceUnavailable, .overloaded: kind = .serviceUnavailable
        case .badRequest: kind = .invalidField
        case .headersTooLarge: kind = .headersTooLarge
        case .uriTooLong: kind = .uriTooLong
        }
        return .json(KakinError(kind).body(requestId: requestId).serialized(), status: rejection.suggestedStatus)
    }

    /// Returns on SIGINT or SIGTERM.
    static func waitForTermination() async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        // Either the signal or the waiter comes first; whichever is second resumes the waiter.
        let waiter = Mutex<(signalled: Bool, continuation: CheckedContinuation<Void, Never>?)>((false, nil))
        let queue = DispatchQueue(label: "kakin.simulator.signals")
        let sources = [SIGINT, SIGTERM].map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                let continuation = waiter.withLock { w -> CheckedContinuation<Void, Never>? in
                    w.signalled = true
                    defer { w.continuation = nil }
                    return w.continuation
                }
                continuation?.resume()
            }
            source.resume()
            return source
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let already = waiter.withLock { w -> Bool in
                if !w.signalled { w.continuation = continuation }
                return w.signalled
            }
            if already { continuation.resume() }
        }
        sources.forEach { $0.cancel() }
    }
}
