// libFuzzer entry points. Built only by `scripts/fuzz` (`KAKIN_FUZZ=1 swift build --sanitize=fuzzer`):
// libFuzzer supplies `main`, so this target has none and is left out of ordinary builds.
// One binary holds every target; `KAKIN_FUZZ_TARGET` picks the one a run feeds.
import Foundation

/// A fuzz target: takes any bytes, must never crash, hang or break its stated property.
protocol FuzzTarget {
    func run(_ input: [UInt8])
}

enum Targets {
    static let names = ["json", "jws", "jwt", "storekit", "config", "period", "http", "receipt", "import"]

    static func make(_ name: String) -> (any FuzzTarget)? {
        switch name {
        case "json": JSONTarget()
        case "jws": JWSTarget()
        case "jwt": JWTTarget()
        case "storekit": StoreKitTarget()
        case "config": ConfigTarget()
        case "period": PeriodTarget()
        case "http": HTTPTarget()
        case "receipt": ReceiptTarget()
        case "import": ImportTarget()
        default: nil
        }
    }
}

nonisolated(unsafe) var selectedTarget: (any FuzzTarget)?

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    let name = ProcessInfo.processInfo.environment["KAKIN_FUZZ_TARGET"] ?? ""
    guard let target = Targets.make(name) else {
        FileHandle.standardError.write(Data("KAKIN_FUZZ_TARGET must be one of \(Targets.names.joined(separator: ", ")) (got \"\(name)\")\n".utf8))
        exit(2)
    }
    selectedTarget = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    selectedTarget!.run(input)
    return 0
}

/// Stops the run with a finding that libFuzzer records as a crash (with the input saved).
func finding(_ message: String) -> Never {
    FileHandle.standardError.write(Data("FINDING: \(message)\n".utf8))
    abort()
}

/// Runs async work from libFuzzer's synchronous callback (its thread is not one of Swift's pool).
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.value = await body()
        done.signal()
    }
    done.wait()
    return box.value!
}

final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
