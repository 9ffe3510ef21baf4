"""Checks App Store Server API bearer tokens with PyJWT, as a server other than Kakin's own verifier would.

Usage: pyjwt_check.py REQUEST.json ANSWER.json
REQUEST: {"publicKeyPEM", "issuerId", "tokens": [...]}; ANSWER: {"tokens": [{"valid", "header"?, "claims"?, "error"?}]}.
The signature (ES256), the audience and the issuer are checked; the times are left to the caller, whose clock
signed them (the test's clock is not this machine's).
"""
import json
import sys

import jwt


def check(token, request):
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(
            token,
            request["publicKeyPEM"],
            algorithms=["ES256"],
            audience="appstoreconnect-v1",
            issuer=request["issuerId"],
            options={"require": ["iss", "aud", "iat", "exp"], "verify_exp": False, "verify_iat": False},
        )
        return {"valid": True, "header": header, "claims": claims}
    except jwt.PyJWTError as error:
        return {"valid": False, "error": f"{type(error).__name__}: {error}"}


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    with open(sys.argv[2], "w") as f:
        json.dump({"tokens": [check(t, request) for t in request["tokens"]]}, f)


if __name__ == "__main__":
    main()
