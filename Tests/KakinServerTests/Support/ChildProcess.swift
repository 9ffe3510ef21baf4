import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, not Foundation's `Process`: on Linux, `Process.run()`
/// lists /proc/self/fd with an over-reading copy and crashes now and then in a process holding many
/// descriptors — the whole test run does (swift-corelibs-foundation#5472, fixed after Swift 6.3.1).
/// Descriptors from 3 up are closed in the child (`posix_spawn_file_actions_addclosefrom_np`), so it never
/// holds another test's sockets.
final class ChildProcess: Sendable {
    let pid: pid_t
    private let exitStatus = Mutex<Int32?>(nil)

    private init(pid: pid_t) { self.pid = pid }

    /// Starts `executable` with `arguments`, standard input from /dev/null, standard output and error to
    /// the files named (created or truncated; nil: /dev/null).
    /// `environment`: added to (or replacing) this process's variables.
    static func spawn(_ executable: String, _ arguments: [String], output: String? = nil, errors: String? = nil,
                      environment: [String: String] = [:]) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errors ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let closeFrom = Self.closeFrom { _ = closeFrom(&actions, 3) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var pid: pid_t = 0
        var rc: Int32
        if environment.isEmpty {
            rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        } else {
            var merged = ProcessInfo.processInfo.environment
            for (k, v) in environment { merged[k] = v }
            let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for entry in envp { free(entry) } }
            rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        }
        guard rc == 0 else { throw ProcessFailure(description: "posix_spawn \(executable): error \(rc)") }
        return ChildProcess(pid: pid)
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which the Glibc module does not export.
    private static let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Whether it still runs (reaps it when it has exited).
    var isRunning: Bool {
        exitStatus.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
            status = Self.decode(raw)
            return false
        }
    }

    /// Waits for it to exit (polling, so no thread blocks); its exit code, or 128 + the signal that ended it.
    func exit() async -> Int32 {
        while isRunning { try? await Task.sleep(for: .milliseconds(10)) }
        return exitStatus.withLock { $0 ?? -1 }
    }

    func signal(_ signal: Int32) {
        if isRunning { _ = Glibc.kill(pid, signal) }
    }

    private static func decode(_ raw: Int32) -> Int32 {
        raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
    }
}
