import AppStoreSecurity
import Dispatch
import KakinCore
import KakinSystem

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `kakin verify`: verifies App Store signed data and prints it (the contract's command line).
///
///     kakin verify [--root CERT.der]… [--bundle-id ID] [--environment E] JWS
///     kakin verify [--root CERT.der]… [--bundle-id ID] [--environment E] -
///
/// One JWS: its payload as pretty JSON on stdout and exit 0, or `code: reason` on stderr and exit 1.
/// `-`: one JWS per line of stdin, one JSON line per input line on stdout, in input order
/// (`{"valid": true, "payload": {…}}` / `{"valid": false, "code": "…"}`), exit 0 once all is read.
/// Usage errors: one line on stderr, exit 2.
public enum VerifyCommand {
    static let usage = """
        usage: kakin verify [--root CERT.der]... [--bundle-id ID] [--environment E] JWS
               kakin verify [--root CERT.der]... [--bundle-id ID] [--environment E] -

        Verifies App Store signed data (transaction, renewal info, notification, app transaction) by
        Apple's rules and prints its payload as JSON. Exit 0: valid; 1: invalid (code on stderr);
        2: usage error. With "-", reads one JWS per line from standard input and writes one JSON line
        per input line: {"valid": true, "payload": {...}} or {"valid": false, "code": "..."}.

          --root CERT       trust this root certificate (DER or PEM); repeatable.
                            Default: Apple Root CA - G3.
          --bundle-id ID    accept only this app's data (default: any app)
          --environment E   accept only Production, Sandbox, Xcode or LocalTesting
                            (default: Production and Sandbox; Xcode and LocalTesting data is not
                            signed by Apple and is refused unless named here)
        """

    /// Runs the command on the process's standard streams.
    /// - Parameter arguments: the arguments after `kakin verify`.
    public static func run(arguments: [String]) -> Int32 {
        run(arguments: arguments, input: 0, output: 1, errorOutput: 2)
    }

    /// Runs the command on the given file descriptors (tests use pipes and files).
    public static func run(arguments: [String], input: Int32, output: Int32, errorOutput: Int32) -> Int32 {
        let options: Options
        switch Options.parse(arguments) {
        case .help:
            FileDescriptorOutput.writeAll(output, Array((usage + "\n").utf8))
            return 0
        case .failure(let message):
            FileDescriptorOutput.writeAll(errorOutput, Array("kakin verify: \(message) (see kakin verify --help)\n".utf8))
            return 2
        case .success(let parsed):
            options = parsed
        }

        let verifier: SignedDataVerifier
        do {
            verifier = try options.makeVerifier()
        } catch {
            FileDescriptorOutput.writeAll(errorOutput, Array("kakin verify: \(error.message)\n".utf8))
            return 2
        }

        if options.jws == "-" {
            return BatchVerification(verifier: verifier, input: input, output: output, errorOutput: errorOutput).run()
        }
        do {
            let verified = try verifier.verify(trimmingASCIIWhitespace(options.jws))
            if !verified.isAppleSigned {
                let note =
                    "kakin verify: note: \(verified.environment?.rawValue ?? "local") data is not signed by Apple; its signature was not checked\n"
                FileDescriptorOutput.writeAll(errorOutput, Array(note.utf8))
            }
            FileDescriptorOutput.writeAll(output, verified.payload.serialized(pretty: true) + [0x0A])
            return 0
        } catch {
            FileDescriptorOutput.writeAll(errorOutput, Array("\(error.code.rawValue): \(error.reason)\n".utf8))
            return 1
        }
    }

    /// Parsed flags.
    struct Options {
        var rootFiles: [String] = []
        var bundleId: String?
        var environment: AppStoreEnvironment?
        var jws = ""

        enum Parsed {
            case success(Options)
            case help
            case failure(String)
        }

        struct SetupError: Error {
            var message: String
        }

        static func parse(_ arguments: [String]) -> Parsed {
            var options = Options()
            var positionals: [String] = []
            var index = 0
            while index < arguments.count {
                let argument = arguments[index]
                index += 1
                if argument == "--help" || argument == "-h" { return .help }
                if argument == "-" || !argument.hasPrefix("-") {
                    positionals.append(argument)
                    continue
                }
                var name = argument
                var value: String? = nil
                if let equals = argument.firstIndex(of: "=") {
                    name = String(argument[..<equals])
                    value = String(argument[argument.index(after: equals)...])
                }
                guard ["--root", "--bundle-id", "--environment"].contains(name) else {
                    return .failure("unknown option \(name)")
                }
                if value == nil {
                    guard index < arguments.count else { return .failure("\(name) needs a value") }
                    value = arguments[index]
                    index += 1
                }
                let given = value!
                switch name {
                case "--root":
                    guard !given.isEmpty else { return .failure("--root needs a file") }
                    options.rootFiles.append(given)
                case "--bundle-id":
                    guard !given.isEmpty, options.bundleId == nil else {
                        return .failure("--bundle-id takes one non-empty value")
                    }
                    options.bundleId = given
                default:
                    guard options.environment == nil,
                        let environment = AppStoreEnvironment.known.first(where: {
                            $0.rawValue.lowercased() == given.lowercased()
                        })
                    else {
                        return .failure("--environment must be one of Production, Sandbox, Xcode, LocalTesting")
                    }
                    options.environment = environment
                }
            }
            guard positionals.count == 1 else {
                return .failure(
                    positionals.isEmpty
                        ? "missing JWS (or - to read standard input)" : "expected one JWS, got \(positionals.count)")
            }
            options.jws = positionals[0]
            return .success(options)
        }

        func makeVerifier() throws(SetupError) -> SignedDataVerifier {
            var roots: [[UInt8]] = []
            for file in rootFiles {
                guard let bytes = VerifyCommand.readFile(file, bytesMax: 1 << 20) else {
                    throw SetupError(message: "cannot read --root \(file)")
                }
                roots.append(Self.derFromPEM(bytes) ?? bytes)
            }
            if roots.isEmpty {
                do {
                    roots = [try AppleRootCertificates.rootCAG3()]
                } catch {
                    throw SetupError(message: "\(error)")
                }
            }
            let app = AppIdentity(
                bundleId: bundleId, environments: environment.map { [$0] } ?? [.production, .sandbox])
            do {
                return try SignedDataVerifier(trustedRoots: roots, apps: [app], clock: { VerifyCommand.wallClockMs() })
            } catch {
                throw SetupError(message: "a --root file is not an X.509 certificate (\(error))")
            }
        }

        /// The DER inside a PEM certificate, or nil when the bytes are not PEM.
        static func derFromPEM(_ bytes: [UInt8]) -> [UInt8]? {
            let begin = Array("-----BEGIN CERTIFICATE-----".utf8)
            let end = Array("-----END CERTIFICATE-----".utf8)
            guard let start = firstIndex(of: begin, in: bytes, from: 0),
                let stop = firstIndex(of: end, in: bytes, from: start + begin.count)
            else { return nil }
            return Base64.decode(bytes[(start + begin.count)..<stop].filter { $0 > 0x20 })
        }

        private static func firstIndex(of needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
            guard haystack.count >= needle.count, from <= haystack.count - needle.count else { return nil }
            return (from...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
        }
    }
}

extension VerifyCommand {
    /// `kakin verify -`: lines in, JSON lines out, verified on every core, output in input order.
    struct BatchVerification {
        let verifier: SignedDataVerifier
        let input: Int32
        let output: Int32
        let errorOutput: Int32

        /// Bytes asked of each read(2).
        static let readBytes = 1 << 20
        /// Lines handed to one worker at a time.
        static let linesPerBlock = 64

        enum Line {
            case text(start: Int, end: Int)
            case tooLong
        }

        func run() -> Int32 {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.lineBytesMax + Self.readBytes, alignment: 64)
            defer { buffer.deallocate() }
            var filled = 0
            var skippingLongLine = false
            var lines: [Line] = []
            lines.reserveCapacity(4096)

            while true {
                let count = read(input, buffer.baseAddress! + filled, Self.readBytes)
                if count < 0 {
                    if errno == EINTR { continue }
                    FileDescriptorOutput.writeAll(errorOutput, Array("kakin verify: cannot read standard input (errno \(errno))\n".utf8))
                    return 1
                }
                let atEnd = count == 0
                filled += count

                // Complete lines of this chunk.
                lines.removeAll(keepingCapacity: true)
                var lineStart = 0
                var cursor = 0
                while cursor < filled, let found = memchr(buffer.baseAddress! + cursor, 0x0A, filled - cursor) {
                    let newline = UnsafeRawPointer(found) - UnsafeRawPointer(buffer.baseAddress!)
                    if skippingLongLine {
                        skippingLongLine = false
                        lines.append(.tooLong)
                    } else {
                        lines.append(newline - lineStart > Self.lineBytesMax ? .tooLong : .text(start: lineStart, end: newline))
                    }
                    lineStart = newline + 1
                    cursor = lineStart
                }
                let remainder = filled - lineStart
                if atEnd {
                    if skippingLongLine {
                        lines.append(.tooLong)
                    } else if remainder > 0 {
                        lines.append(remainder > Self.lineBytesMax ? .tooLong : .text(start: lineStart, end: filled))
                    }
                }

                guard FileDescriptorOutput.writeAll(output, answers(lines, in: UnsafeRawBufferPointer(buffer))) else {
                    FileDescriptorOutput.writeAll(
                        errorOutput, Array("kakin verify: cannot write standard output (errno \(errno))\n".utf8))
                    return 1
                }
                if atEnd { return 0 }

                // Keep the unfinished line; a line that outgrew the limit is dropped until its newline.
                if skippingLongLine || remainder > Self.lineBytesMax {
                    skippingLongLine = true
                    filled = 0
                } else {
                    if remainder > 0, lineStart > 0 {
                        (buffer.baseAddress! + 0).copyMemory(from: buffer.baseAddress! + lineStart, byteCount: remainder)
                    }
                    filled = remainder
                }
            }
        }

        /// The output lines for `lines`, verified in parallel blocks and concatenated in order.
        func answers(_ lines: [Line], in buffer: UnsafeRawBufferPointer) -> [UInt8] {
            guard !lines.isEmpty else { return [] }
            let blockCount = (lines.count + Self.linesPerBlock - 1) / Self.linesPerBlock
            if blockCount == 1 { return answerBlock(lines[...], in: buffer) }
            let blocks = UnsafeMutableBufferPointer<[UInt8]>.allocate(capacity: blockCount)
            blocks.initialize(repeating: [])
            defer { blocks.deinitialize().deallocate() }
            let shared = SharedBuffers(input: buffer, blocks: blocks)
            DispatchQueue.concurrentPerform(iterations: blockCount) { block in
                let first = block * Self.linesPerBlock
                let slice = lines[first..<min(first + Self.linesPerBlock, lines.count)]
                shared.blocks[block] = answerBlock(slice, in: shared.input)
            }
            var out: [UInt8] = []
            out.reserveCapacity(blocks.reduce(0) { $0 + $1.count })
            for block in blocks { out.append(contentsOf: block) }
            return out
        }

        /// The input chunk (read-only while workers run) and one output slot per block (each written by
        /// exactly one worker); `concurrentPerform` returns only when every worker is done.
        private struct SharedBuffers: @unchecked Sendable {
            let input: UnsafeRawBufferPointer
            let blocks: UnsafeMutableBufferPointer<[UInt8]>
        }

        private static let validPrefix = Array(#"{"valid": true, "payload": "#.utf8)
        private static let invalidPrefix = Array(#"{"valid": false, "code": ""#.utf8)

        func answerBlock(_ lines: ArraySlice<Line>, in buffer: UnsafeRawBufferPointer) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(lines.count * 1024)
            for line in lines {
                guard case .text(var start, var end) = line else {
                    Self.appendFailure(.invalidFormat, to: &out)
                    continue
                }
                while start < end, Self.isSpace(buffer[start]) { start += 1 }
                while end > start, Self.isSpace(buffer[end - 1]) { end -= 1 }
                do {
                    let verified = try verifier.verify(utf8: UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
                    out.append(contentsOf: Self.validPrefix)
                    // The signed bytes are JSON the parser accepted; they are copied as they are unless a line
                    // break inside would split the output line.
                    if verified.payloadBytes.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
                        out.append(contentsOf: verified.payload.serialized())
                    } else {
                        out.append(contentsOf: verified.payloadBytes)
                    }
                    out.append(contentsOf: [UInt8(ascii: "}"), 0x0A])
                } catch {
                    Self.appendFailure(error.code, to: &out)
                }
            }
            return out
        }

        private static func appendFailure(_ code: VerificationCode, to out: inout [UInt8]) {
            out.append(contentsOf: invalidPrefix)
            out.append(contentsOf: code.rawValue.utf8)
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: "}"), 0x0A])
        }

        private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
    }

    /// A small whole file, or nil.
    static func readFile(_ path: String, bytesMax: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > bytesMax { return nil }
        }
    }

    /// Now in ms since the epoch, for payloads that carry no signed date.
    static func wallClockMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    static func trimmingASCIIWhitespace(_ text: String) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(text[first...last])
    }
}
