"""Signs offers with Apple's App Store Server Library (Python, app-store-server-library==3.1.2) and checks
Kakin's, with the same In-App Purchase key: the legacy promotional offer signature
(PromotionalOfferSignatureCreator), the promotional offer V2 JWS (PromotionalOfferV2SignatureCreator) and
the introductory offer eligibility JWS (IntroductoryOfferEligibilitySignatureCreator).
Driven by OfferSignatureInteropTests.swift: reads a JSON request, writes a JSON answer.

Usage: apple_offer_signatures.py REQUEST.json ANSWER.json
"""
import base64
import json
import sys
import uuid

import jwt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from appstoreserverlibrary.jws_signature_creator import (
    IntroductoryOfferEligibilitySignatureCreator,
    PromotionalOfferV2SignatureCreator,
)
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator


def legacy_message(key, case):
    token = case["appAccountToken"] or ""
    return "\u2063".join([
        key["bundleId"], key["keyId"], case["productId"], case["offerId"], token.lower(), case["nonce"].lower(),
        str(case["timestampMs"]),
    ]).encode("utf-8")


def legacy(key, public_key, case):
    creator = PromotionalOfferSignatureCreator(key["keyPEM"].encode(), key["keyId"], key["bundleId"])
    python_signature = creator.create_signature(
        case["productId"], case["offerId"], case["appAccountToken"] or "", uuid.UUID(case["nonce"]), case["timestampMs"]
    )
    try:
        public_key.verify(base64.b64decode(case["kakinSignature"], validate=True), legacy_message(key, case), ec.ECDSA(hashes.SHA256()))
        kakin_valid = True
    except InvalidSignature:
        kakin_valid = False
    return {"pythonSignature": python_signature, "kakinSignatureValid": kakin_valid}


def decode(token, public_key, audience):
    """Verifies a JWS the way a receiver using PyJWT would, and returns what it says (or why it failed)."""
    try:
        claims = jwt.decode(token, public_key, algorithms=["ES256"], audience=audience)
    except jwt.PyJWTError as e:
        return {"valid": False, "error": type(e).__name__}
    return {"valid": True, "header": jwt.get_unverified_header(token), "claims": claims}


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    key = request["key"]
    key_pem = key["keyPEM"].encode()
    public_key = serialization.load_pem_private_key(key_pem, password=None).public_key()

    v2 = request["promotionalOfferV2"]
    python_v2 = PromotionalOfferV2SignatureCreator(key_pem, key["keyId"], key["issuerId"], key["bundleId"]).create_signature(
        v2["productId"], v2["offerId"], v2.get("transactionId")
    )
    intro = request["introductoryOfferEligibility"]
    python_intro = IntroductoryOfferEligibilitySignatureCreator(key_pem, key["keyId"], key["issuerId"], key["bundleId"]).create_signature(
        intro["productId"], intro["allowIntroductoryOffer"], intro["transactionId"]
    )
    tampered = request["tamperedKakinJWS"]
    answer = {
        "legacy": [legacy(key, public_key, case) for case in request["legacy"]],
        "promotionalOfferV2": {
            "pythonJWS": python_v2,
            "python": decode(python_v2, public_key, "promotional-offer"),
            "kakin": decode(v2["kakinJWS"], public_key, "promotional-offer"),
        },
        "introductoryOfferEligibility": {
            "pythonJWS": python_intro,
            "python": decode(python_intro, public_key, "introductory-offer-eligibility"),
            "kakin": decode(intro["kakinJWS"], public_key, "introductory-offer-eligibility"),
        },
        "tamperedKakinJWS": decode(tampered, public_key, "promotional-offer"),
    }
    with open(sys.argv[2], "w") as f:
        json.dump(answer, f)


if __name__ == "__main__":
    main()
