import AppStoreSecurity
import Foundation
import KakinCore
import KakinVerifyCommand
import Testing

/// `kakin verify`, run in-process on temporary files standing in for stdin, stdout and stderr.
@Suite struct VerifyCommandTests {
    struct Outcome {
        var status: Int32
        var output: String
        var errors: String
        var outputLines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
    }

    static func run(_ arguments: [String], stdin: [UInt8] = []) throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-verify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let inPath = directory.appendingPathComponent("in").path
        let outPath = directory.appendingPathComponent("out").path
        let errPath = directory.appendingPathComponent("err").path
        try Data(stdin).write(to: URL(fileURLWithPath: inPath))
        let input = open(inPath, O_RDONLY)
        let output = open(outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let errors = open(errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let status = VerifyCommand.run(arguments: arguments, input: input, output: output, errorOutput: errors)
        close(input)
        close(output)
        close(errors)
        return Outcome(
            status: status,
            output: String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self),
            errors: String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self))
    }

    /// The test CA's root in a file, as `--root` takes it.
    static func rootFile(_ ca: SigningCertificateAuthority, pem: Bool = false) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-root-\(UUID().uuidString).der").path
        let bytes =
            pem
            ? Array("-----BEGIN CERTIFICATE-----\n\(Base64.encode(ca.rootDER))\n-----END CERTIFICATE-----\n".utf8) : ca.rootDER
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func validJWSPrintsItsPayloadAndExits0() throws {
        let ca = try sharedCatalogue.get().ca
        let root = try Self.rootFile(ca)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let jws = try ca.signer().sign(transactionPayload(signedDate: Self.nowMs))
        let outcome = try Self.run(["--root", root, "--bundle-id", "com.example", jws])
        #expect(outcome.status == 0)
        #expect(outcome.errors.isEmpty)
        let printed = try JSONParser.parse(outcome.output)
        #expect(printed == transactionPayload(signedDate: Self.nowMs))
        #expect(outcome.output.contains("\n  \"bundleId\": \"com.example\""))  // pretty
    }

    @Test func rootMayBePEM() throws {
        let ca = try sharedCatalogue.get().ca
        let root = try Self.rootFile(ca, pem: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let outcome = try Self.run(["--root=\(root)", try ca.signer().sign(transactionPayload(signedDate: Self.nowMs))])
        #expect(outcome.status == 0)
    }

    @Test func invalidJWSPrintsItsCodeOnStderrAndExits1() throws {
        let ca = try sharedCatalogue.get().ca
        let root = try Self.rootFile(ca)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let jws = try ca.signer().sign(transactionPayload(bundleId: "com.other", signedDate: Self.nowMs))
        let outcome = try Self.run(["--root", root, "--bundle-id", "com.example", jws])
        #expect(outcome.status == 1)
        #expect(outcome.output.isEmpty)
        #expect(outcome.errors.hasPrefix("wrong_bundle_id"))
        #expect(!outcome.errors.contains(jws))

        let garbage = try Self.run(["--root", root, "not-a-jws"])
        #expect(garbage.status == 1)
        #expect(garbage.errors.hasPrefix("invalid_format"))
    }

    @Test func appleRootIsTheDefault() throws {
        let ca = try sharedCatalogue.get().ca
        let outcome = try Self.run([try ca.signer().sign(transactionPayload(signedDate: Self.nowMs))])
        #expect(outcome.status == 1)
        #expect(outcome.errors.hasPrefix("untrusted_certificate"))
    }

    @Test func environmentFlagNarrowsAndXcodeMustBeNamed() throws {
        let ca = try sharedCatalogue.get().ca
        let root = try Self.rootFile(ca)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sandbox = try ca.signer().sign(transactionPayload(environment: "Sandbox", signedDate: Self.nowMs))
        #expect(try Self.run(["--root", root, "--environment", "Production", sandbox]).status == 1)
        #expect(try Self.run(["--root", root, "--environment", "sandbox", sandbox]).status == 0)

        let xcode = try Fixtures.appleJWS("xcode/xcode-signed-transaction")
        let refused = try Self.run([xcode])
        #expect(refused.status == 1)
        #expect(refused.errors.hasPrefix("wrong_environment"))
        let accepted = try Self.run(["--environment", "Xcode", xcode])
        #expect(accepted.status == 0)
        #expect(accepted.errors.contains("not signed by Apple"))
    }

    @Test func usageErrorsExit2WithOneLine() throws {
        for arguments in [
            ["--frobnicate", "x"], ["--environment", "Staging", "x"], ["--bundle-id"], [], ["a", "b"],
            ["--root", "/nonexistent/root.der", "x"], ["-x", "y"],
        ] {
            let outcome = try Self.run(arguments)
            #expect(outcome.status == 2, "\(arguments)")
            #expect(outcome.errors.hasPrefix("kakin verify: "), "\(arguments)")
            #expect(outcome.errors.filter { $0 == "\n" }.count == 1, "\(arguments)")
            #expect(outcome.output.isEmpty)
        }
        let notACertificate = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-bad-\(UUID().uuidString)").path
        try Data("hello".utf8).write(to: URL(fileURLWithPath: notACertificate))
        defer { try? FileManager.default.removeItem(atPath: notACertificate) }
        #expect(try Self.run(["--root", notACertificate, "x"]).status == 2)
    }

    @Test func helpPrintsUsageAndExits0() throws {
        let outcome = try Self.run(["--help"])
        #expect(outcome.status == 0)
        #expect(outcome.output.contains("usage: kakin verify"))
    }

    /// Thousands of lines, valid and invalid mixed, come back one answer per line in input order.
    @Test func batchAnswersEveryLineInOrder() throws {
        let ca = try sharedCatalogue.get().ca
        let root = try Self.rootFile(ca)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let signer = ca.signer()
        let count = 3000
        var input: [UInt8] = []
        var expected: [String?] = []  // transactionId, or nil for an invalid line
        for i in 0..<count {
            let id = String(3_000_000_000_000 + i)
            switch i % 10 {
            case 3:
                input += Array("garbage-\(i)".utf8)
                expected.append(nil)
            case 5:
                input += []  // an empty line
                expected.append(nil)
            case 7:
                let jws = try signer.sign(transactionPayload(bundleId: "com.other", signedDate: Self.nowMs, transactionId: id))
                input += Array(jws.utf8)
                expected.append(nil)
            case 9:
                let jws = try signer.sign(transactionPayload(signedDate: Self.nowMs, transactionId: id))
                input += Array(jws.utf8) + [0x0D]  // CRLF
                expected.append(id)
            default:
                let jws = try signer.sign(transactionPayload(signedDate: Self.nowMs, transactionId: id))
                input += Array(jws.utf8)
                expected.append(id)
            }
            input.append(0x0A)
            if i == 1500 || i == 2500 {  // lines far over the limit (one spans several reads), answered unbuffered
                input += [UInt8](repeating: UInt8(ascii: "A"), count: i == 1500 ? 200_000 : 2_500_000) + [0x0A]
                expected.append(nil)
            }
        }
        let outcome = try Self.run(["--root", root, "--bundle-id", "com.example", "-"], stdin: input)
        #expect(outcome.status == 0)
        let lines = outcome.outputLines
        try #require(lines.count == expected.count)
        for (index, (line, id)) in zip(lines, expected).enumerated() {
            let answer = try JSONParser.parse(line)
            if let id {
                #expect(answer["valid"] == true, "line \(index)")
                #expect(answer["payload"]?["transactionId"] == .string(id), "line \(index)")
            } else {
                #expect(answer["valid"] == false, "line \(index)")
                #expect(answer["payload"] == nil)
            }
        }
        #expect(lines[3] == #"{"valid": false, "code": "invalid_format"}"#)
        #expect(lines[7] == #"{"valid": false, "code": "wrong_bundle_id"}"#)
        #expect(lines[1501] == #"{"valid": false, "code": "invalid_format"}"#)
        #expect(lines[2502] == #"{"valid": false, "code": "invalid_format"}"#)
    }

    @Test func batchCopiesThePayloadBytesAndKeepsOneLinePerAnswer() throws {
        let ca = try sharedCatalogue.get().ca
        let root = try Self.rootFile(ca)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let signer = ca.signer()
        let asSigned = #"{"signedDate": \#(Self.nowMs), "environment": "Sandbox", "bundleId": "com.example"}"#
        let withNewline = "{\"environment\": \"Sandbox\",\n\"signedDate\": \(Self.nowMs)}"
        let lines = [
            try signer.sign(payloadBytes: Array(asSigned.utf8), header: signer.header),
            try signer.sign(payloadBytes: Array(withNewline.utf8), header: signer.header),
        ]
        // No newline after the last line: it is answered too.
        let outcome = try Self.run(["--root", root, "-"], stdin: Array(lines.joined(separator: "\n").utf8))
        #expect(outcome.status == 0)
        #expect(outcome.outputLines.count == 2)
        #expect(outcome.outputLines.first == #"{"valid": true, "payload": \#(asSigned)}"#)
        #expect(outcome.outputLines.last == #"{"valid": true, "payload": {"environment":"Sandbox","signedDate":\#(Self.nowMs)}}"#)
    }

    @Test func emptyInputGivesNoOutput() throws {
        let outcome = try Self.run(["-"], stdin: [])
        #expect(outcome.status == 0)
        #expect(outcome.output.isEmpty)
    }

    /// `kakin verify` checks certificates at the payload's signedDate, so fixtures signed "now" need the
    /// test CA valid now: it is valid from a day before `Fixtures.now` for years.
    static let nowMs = Fixtures.now
}
