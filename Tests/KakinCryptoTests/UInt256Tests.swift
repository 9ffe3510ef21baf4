@testable import KakinCrypto
import Testing

/// The ES256 check's s⁻¹ mod n (`UInt256.inverse`) is the inverse: a·a⁻¹ ≡ 1, by a multiplication written apart from it.
@Suite struct UInt256Tests {
    /// P-256's group order n and field prime p.
    static let order = UInt256(0xF3B9_CAC2_FC63_2551, 0xBCE6_FAAD_A717_9E84, 0xFFFF_FFFF_FFFF_FFFF, 0xFFFF_FFFF_0000_0000)
    static let fieldPrime = UInt256(0xFFFF_FFFF_FFFF_FFFF, 0x0000_0000_FFFF_FFFF, 0, 0xFFFF_FFFF_0000_0001)

    /// a + b mod p for a, b in [0, p).
    static func add(_ a: UInt256, _ b: UInt256, _ p: UInt256) -> UInt256 {
        var sum = a
        if sum.add(b) || !(sum < p) { _ = sum.subtract(p) }
        return sum
    }

    /// a·b mod p, double and add over b's bits from the top.
    static func multiply(_ a: UInt256, _ b: UInt256, _ p: UInt256) -> UInt256 {
        var product = UInt256(0)
        for limb in [b.l3, b.l2, b.l1, b.l0] {
            for bit in (0..<64).reversed() {
                product = add(product, product, p)
                if limb >> UInt64(bit) & 1 == 1 { product = add(product, a, p) }
            }
        }
        return product
    }

    static func below(_ p: UInt256, _ value: UInt256) -> UInt256 {
        var value = value
        while !(value < p) { _ = value.subtract(p) }
        return value
    }

    @Test func theInverseTimesTheNumberIsOneModuloP256sOrderAndPrime() {
        var generator = SystemRandomNumberGenerator()
        for p in [Self.order, Self.fieldPrime] {
            var minusOne = p, minusTwo = p
            _ = minusOne.subtract(UInt256(1))
            _ = minusTwo.subtract(UInt256(2))
            let edges = [UInt256(1), UInt256(2), UInt256(3), minusOne, minusTwo, UInt256(0, 0, 0, 1 << 63), UInt256(0, 1)]
            let random = (0..<500).map { _ in
                Self.below(p, UInt256(generator.next(), generator.next(), generator.next(), generator.next()))
            }
            for a in edges + random where !a.isZero {
                let inverse = UInt256.inverse(a, modulo: p)
                #expect(inverse < p, "reduced: \(a.bigEndianBytes)")
                #expect(Self.multiply(a, inverse, p).isOne, "a·a⁻¹ ≡ 1: \(a.bigEndianBytes)")
            }
        }
    }

    @Test func bigEndianBytesRoundTrip() {
        let bytes = (0..<32).map { UInt8($0 * 7 + 1) }
        let value = bytes.withUnsafeBytes { UInt256(bigEndian: $0) }
        #expect(value.bigEndianBytes == bytes)
        #expect(value.l3 >> 56 == 1 && value.l0 & 0xFF == UInt64(31 * 7 + 1))
    }
}
