# The vector of P256FixedKeyTests.aSignatureWhoseRHasXAtLeastNIsValid: an ES256 signature whose R = u1·G + u2·Q has
# x >= n (so r = x - n), made by choosing R, r, s and solving for the key Q, then checked by pyca/cryptography and openssl:
#   cd "$(mktemp -d)" && python3 PATH/x_at_least_n.py && openssl dgst -sha256 -verify <(openssl pkey -pubin -inform DER -in pub.der) -signature sig.der msg
# (an honest signer meets such an R with probability ~2^-128: no signed test data reaches that branch of the check).
import hashlib
p = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffff
n = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551
b = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b
G = (0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296, 0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5)
def add(P, Q):
    if P is None: return Q
    if Q is None: return P
    if P[0] == Q[0] and (P[1] + Q[1]) % p == 0: return None
    if P == Q: l = (3 * P[0] * P[0] - 3) * pow(2 * P[1], -1, p) % p
    else: l = (Q[1] - P[1]) * pow(Q[0] - P[0], -1, p) % p
    x = (l * l - P[0] - Q[0]) % p
    return (x, (l * (P[0] - x) - P[1]) % p)
def mul(k, P):
    R = None
    while k:
        if k & 1: R = add(R, P)
        P = add(P, P); k >>= 1
    return R
message = b"kakin: R's x is at least n"
e = int.from_bytes(hashlib.sha256(message).digest(), "big")
x = n
while True:
    rhs = (x**3 - 3*x + b) % p
    y = pow(rhs, (p + 1) // 4, p)
    if y * y % p == rhs: break
    x += 1
R = (x, y)
r = x - n; s = 0x1234567
w = pow(s, -1, n); u1 = e * w % n; u2 = r * w % n
Q = mul(pow(u2, -1, n), add(R, mul(n - u1, G)))
assert add(mul(u1, G), mul(u2, Q)) == R and x >= n and r + n < p
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
pub = ec.EllipticCurvePublicNumbers(Q[0], Q[1], ec.SECP256R1()).public_key()
pub.verify(encode_dss_signature(r, s), message, ec.ECDSA(hashes.SHA256()))
spki = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
open("pub.der", "wb").write(spki); open("msg", "wb").write(message); open("sig.der", "wb").write(encode_dss_signature(r, s))
print("x - n =", hex(x - n)); print("spki", spki.hex()); print("sig", r.to_bytes(32, "big").hex() + s.to_bytes(32, "big").hex())
