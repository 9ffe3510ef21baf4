import Foundation

/// Scratch folders of one fuzzing process, in memory (`/dev/shm`) and removed at exit.
enum FuzzFiles {
    nonisolated(unsafe) static var made: [String] = []

    static func directory(_ name: String) -> String {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let path = "\(root)/kakin-fuzz-\(name)-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        if made.isEmpty { atexit { for p in FuzzFiles.made { try? FileManager.default.removeItem(atPath: p) } } }
        made.append(path)
        return path
    }
}
