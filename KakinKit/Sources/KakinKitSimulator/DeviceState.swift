import Foundation
import KakinKit

/// What a simulated device remembers between launches, in `<directory>/device.json`: the unfinished
/// transactions (kept until finished, as StoreKit keeps them), how far it has read the App Store's updates,
/// and which Apple account is signed in. Written whole with an atomic rename after every change, so a
/// process killed at any instant leaves the previous or the next state, never half of one.
struct DeviceState: Codable, Equatable {
    var version = 1
    /// The simulated Apple account: the simulator keys accounts by `appAccountToken` (lowercase).
    var account: String?
    /// The simulator's modification sequence read up to; nil on a device that never read it.
    var cursor: Int64?
    /// Oldest first.
    var unfinished: [StoreTransaction] = []
    /// Transactions this device received from its own purchases (id → `signedDate` ms), so the same signed
    /// copy is not delivered again when the updates reach it; dropped once the updates pass it.
    var delivered: [String: Int64] = [:]
    /// How far the device has read the App Store's Finish Transaction calls (`accounts/{token}/finished`);
    /// nil on a device that never read them (state files from before it count from 0).
    var finishedCursor: Int64?

    static let unfinishedMax = 1_000
    static let deliveredMax = 1_000

    /// Adds or replaces (a newer signed copy of the same transaction).
    mutating func enqueue(_ t: StoreTransaction) {
        if let i = unfinished.firstIndex(where: { $0.id == t.id }) {
            unfinished[i] = t
        } else {
            unfinished.append(t)
        }
    }
}

/// `device.json` in the state directory.
struct DeviceStateFile: Sendable {
    let url: URL

    init(directory: URL) {
        url = directory.appendingPathComponent("device.json")
    }

    static let bytesMax = 16 << 20

    func load() throws(KakinKitError) -> DeviceState {
        guard FileManager.default.fileExists(atPath: url.path) else { return DeviceState() }
        do {
            let data = try Data(contentsOf: url)
            guard data.count <= Self.bytesMax else { throw KakinKitError(.deviceStateUnreadable) }
            return try JSONDecoder().decode(DeviceState.self, from: data)
        } catch {
            throw KakinKitError(.deviceStateUnreadable, message: ClientError.deviceStateUnreadable.message + " (\(url.path))")
        }
    }

    func save(_ state: DeviceState) throws(KakinKitError) {
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            try encoder.encode(state).write(to: url, options: .atomic)
        } catch {
            throw KakinKitError(.deviceStateUnreadable, message: ClientError.deviceStateUnreadable.message + " (\(url.path))")
        }
    }
}
