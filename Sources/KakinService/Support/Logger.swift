import Foundation
import KakinCore
import KakinSystem
import Synchronization

/// Structured logs: one JSON object per line on standard error, with dotted metadata keys.
/// Never logs tokens, keys or whole JWS.
public final class Logger: Sendable {
    public enum Level: String, Sendable, Comparable {
        case debug, info, warning, error
        var rank: Int { [.debug: 0, .info: 1, .warning: 2, .error: 3][self]! }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    let minimum: Level
    let lock = Mutex(())

    public init(minimum: Level = .info) { self.minimum = minimum }

    public func log(_ level: Level, _ message: String, _ metadata: [String: JSONValue] = [:]) {
        guard level >= minimum else { return }
        var o = metadata
        o["ts"] = .string(Timestamp.rfc3339(SystemClock().nowMs()))
        o["level"] = .string(level.rawValue)
        o["msg"] = .string(message)
        var line = JSONValue.object(o).serialized()
        line.append(0x0A)
        lock.withLock { _ in
            line.withUnsafeBufferPointer { p in _ = write(STDERR_FILENO, p.baseAddress, p.count) }
        }
    }

    public func info(_ m: String, _ md: [String: JSONValue] = [:]) { log(.info, m, md) }
    public func warning(_ m: String, _ md: [String: JSONValue] = [:]) { log(.warning, m, md) }
    public func error(_ m: String, _ md: [String: JSONValue] = [:]) { log(.error, m, md) }
}
