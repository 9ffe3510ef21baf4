import KakinCore
import Testing

@Suite struct Base64Tests {
    /// The four-at-a-time decoder for contiguous bytes (stored JWS payloads) answers exactly what the general one does.
    @Test func contiguousDecodingAgreesWithTheGeneralDecoder() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_0064)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_".utf8)
        for round in 0..<20_000 {
            var text = (0..<Int.random(in: 0...40, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            if round % 3 == 0 { text += Array(repeating: UInt8(ascii: "="), count: Int.random(in: 1...3, using: &rng)) }
            if round % 7 == 0, !text.isEmpty { text[Int.random(in: 0..<text.count, using: &rng)] = [UInt8(ascii: "="), 0x20, 0xC3, 0x2E].randomElement(using: &rng)! }
            let general = Base64.decode(text[...])
            let contiguous = text.withUnsafeBufferPointer { Base64.decode($0) }
            guard general == contiguous else {
                Issue.record("\(String(decoding: text, as: UTF8.self)): \(String(describing: general)) vs \(String(describing: contiguous))")
                return
            }
        }
        #expect([UInt8]("QUJD".utf8).withUnsafeBufferPointer { Base64.decode($0) } == Array("ABC".utf8))
    }
}
