/// An unsigned 256-bit integer in four 64-bit limbs (`l0` least significant): the ES256 check's scalars modulo P-256's
/// group order, for the one operation OpenSSL's public API makes slow there, s⁻¹ mod n (`BN_mod_inverse`: ~25 µs of a
/// ~60 µs precomputed check on the bench machine; this: a few µs).
struct UInt256: Equatable {
    var l0: UInt64
    var l1: UInt64
    var l2: UInt64
    var l3: UInt64

    init(_ l0: UInt64, _ l1: UInt64 = 0, _ l2: UInt64 = 0, _ l3: UInt64 = 0) {
        (self.l0, self.l1, self.l2, self.l3) = (l0, l1, l2, l3)
    }

    /// From 32 big-endian bytes.
    init(bigEndian bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == 32, "32 bytes")
        func limb(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 << 8 | UInt64(bytes[at + $1]) } }
        self.init(limb(24), limb(16), limb(8), limb(0))
    }

    /// The 32 big-endian bytes.
    var bigEndianBytes: [UInt8] {
        [l3, l2, l1, l0].flatMap { limb in (0..<8).map { UInt8(truncatingIfNeeded: limb >> (56 - 8 * $0)) } }
    }

    var isZero: Bool { l0 | l1 | l2 | l3 == 0 }
    var isOne: Bool { l0 == 1 && l1 | l2 | l3 == 0 }
    var isEven: Bool { l0 & 1 == 0 }

    static func < (a: UInt256, b: UInt256) -> Bool {
        if a.l3 != b.l3 { return a.l3 < b.l3 }
        if a.l2 != b.l2 { return a.l2 < b.l2 }
        if a.l1 != b.l1 { return a.l1 < b.l1 }
        return a.l0 < b.l0
    }

    /// self += b modulo 2²⁵⁶; true when it carried out.
    @inline(__always) mutating func add(_ b: UInt256) -> Bool {
        var carry = false
        (l0, carry) = Self.adding(l0, b.l0, carry)
        (l1, carry) = Self.adding(l1, b.l1, carry)
        (l2, carry) = Self.adding(l2, b.l2, carry)
        (l3, carry) = Self.adding(l3, b.l3, carry)
        return carry
    }

    /// self −= b modulo 2²⁵⁶; true when it borrowed.
    @inline(__always) mutating func subtract(_ b: UInt256) -> Bool {
        var borrow = false
        (l0, borrow) = Self.subtracting(l0, b.l0, borrow)
        (l1, borrow) = Self.subtracting(l1, b.l1, borrow)
        (l2, borrow) = Self.subtracting(l2, b.l2, borrow)
        (l3, borrow) = Self.subtracting(l3, b.l3, borrow)
        return borrow
    }

    /// self >> k for 0 < k < 64.
    @inline(__always) mutating func shiftRight(_ k: Int) {
        l0 = l0 &>> k | l1 &<< (64 - k)
        l1 = l1 &>> k | l2 &<< (64 - k)
        l2 = l2 &>> k | l3 &<< (64 - k)
        l3 = l3 &>> k
    }

    @inline(__always) private static func adding(_ a: UInt64, _ b: UInt64, _ carry: Bool) -> (UInt64, Bool) {
        let (sum, first) = a.addingReportingOverflow(b)
        let (total, second) = sum.addingReportingOverflow(carry ? 1 : 0)
        return (total, first || second)
    }

    @inline(__always) private static func subtracting(_ a: UInt64, _ b: UInt64, _ borrow: Bool) -> (UInt64, Bool) {
        let (difference, first) = a.subtractingReportingOverflow(b)
        let (total, second) = difference.subtractingReportingOverflow(borrow ? 1 : 0)
        return (total, first || second)
    }

    /// a⁻¹ mod p for an odd prime p and 0 < a < p, by the binary extended Euclidean algorithm (Hankerson, Menezes,
    /// Vanstone, "Guide to Elliptic Curve Cryptography", Algorithm 2.22), x₁ and x₂ kept in [0, p), each run of trailing
    /// zeros divided out at once. Variable time: only public values (a signature's s) go through it.
    static func inverse(_ a: UInt256, modulo p: UInt256) -> UInt256 {
        precondition(!p.isEven && !a.isZero && a < p, "0 < a < p, p odd")
        // p⁻¹ mod 2⁶⁴ by Newton's iteration: p·p ≡ 1 (mod 8), and each step doubles the bits that are right.
        var pInverse = p.l0
        for _ in 0..<5 { pInverse = pInverse &* (2 &- p.l0 &* pInverse) }
        var u = a, v = p
        var x1 = UInt256(1), x2 = UInt256(0)
        /// x − y mod p for x, y in [0, p).
        func subtract(_ x: inout UInt256, _ y: UInt256) {
            if x.subtract(y) { _ = x.add(p) }
        }
        // gcd(u, v) = 1 throughout, so neither reaches 0 before one of them is 1.
        while !u.isOne && !v.isOne {
            while u.isEven {
                let k = min(u.l0.trailingZeroBitCount, 63)
                u.shiftRight(k)
                divide(&x1, byTwoToThe: k, p, pInverse)
            }
            while v.isEven {
                let k = min(v.l0.trailingZeroBitCount, 63)
                v.shiftRight(k)
                divide(&x2, byTwoToThe: k, p, pInverse)
            }
            if u < v {
                _ = v.subtract(u)
                subtract(&x2, x1)
            } else {
                _ = u.subtract(v)
                subtract(&x1, x2)
            }
        }
        return u.isOne ? x1 : x2
    }

    /// x / 2ᵏ mod p for x in [0, p), 0 < k < 64: x + m·p with m ≡ −x·p⁻¹ (mod 2ᵏ), m < 2ᵏ, is a multiple of 2ᵏ below
    /// 2ᵏ·p, so its k-bit shift is the answer, already below p.
    @inline(__always) private static func divide(_ x: inout UInt256, byTwoToThe k: Int, _ p: UInt256, _ pInverse: UInt64) {
        let m = (0 &- x.l0 &* pInverse) & (UInt64.max &>> (64 - k))
        var carry: UInt64 = 0
        /// limb + m·pLimb + carry < 2¹²⁸: its high half is the next carry.
        func multiplyAdd(_ limb: UInt64, _ pLimb: UInt64) -> UInt64 {
            let (high, low) = m.multipliedFullWidth(by: pLimb)
            let (sum, first) = low.addingReportingOverflow(limb)
            let (total, second) = sum.addingReportingOverflow(carry)
            carry = high &+ (first ? 1 : 0) &+ (second ? 1 : 0)
            return total
        }
        let a0 = multiplyAdd(x.l0, p.l0), a1 = multiplyAdd(x.l1, p.l1), a2 = multiplyAdd(x.l2, p.l2)
        let a3 = multiplyAdd(x.l3, p.l3)
        x = UInt256(a0 &>> k | a1 &<< (64 - k), a1 &>> k | a2 &<< (64 - k), a2 &>> k | a3 &<< (64 - k), a3 &>> k | carry &<< (64 - k))
    }
}
