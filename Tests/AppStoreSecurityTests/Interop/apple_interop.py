"""Asks Apple's App Store Server Library (Python, app-store-server-library==3.1.2) the same questions
Kakin's tests ask Kakin. Driven by InteropTests.swift: reads a JSON request, writes a JSON answer.

Usage: apple_interop.py REQUEST.json ANSWER.json
"""
import base64
import json
import sys
import time
import uuid

import jwt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.exceptions import InvalidSignature

from appstoreserverlibrary.api_client import AppStoreServerAPIClient
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator
from appstoreserverlibrary.signed_data_verifier import (
    SignedDataVerifier,
    VerificationException,
    _ChainVerifier,
)


def verify_case(case):
    roots = [base64.b64decode(r) for r in case["roots"]]
    verifier = SignedDataVerifier(
        roots,
        enable_online_checks=False,
        environment=Environment(case["environment"]),
        bundle_id=case["bundleId"],
        app_apple_id=case.get("appAppleId"),
    )
    # Apple's own test CA lacks AKI/SKI, so Apple's tests turn X509_STRICT off for it; strict otherwise.
    verifier._chain_verifier = _ChainVerifier(roots, enable_strict_checks=case["strict"])
    method = {
        "transaction": verifier.verify_and_decode_signed_transaction,
        "renewalInfo": verifier.verify_and_decode_renewal_info,
        "notification": verifier.verify_and_decode_notification,
        "appTransaction": verifier.verify_and_decode_app_transaction,
    }[case["method"]]
    try:
        method(case["jws"])
    except VerificationException as e:
        return {"status": e.status.name}
    except Exception as e:  # a crash inside Apple's library is an answer too
        return {"status": "EXCEPTION", "detail": type(e).__name__}
    payload = jwt.decode(case["jws"], options={"verify_signature": False})
    return {"status": "OK", "payload": payload}


def offers(request):
    key_pem = request["keyPEM"].encode()
    fields = request["fields"]
    creator = PromotionalOfferSignatureCreator(key_pem, fields["keyIdentifier"], fields["bundleId"])
    token = fields["appAccountToken"] or ""
    python_signature = creator.create_signature(
        fields["productIdentifier"], fields["offerIdentifier"], token, uuid.UUID(fields["nonce"]), fields["timestampMs"]
    )
    message = "\u2063".join([
        fields["bundleId"], fields["keyIdentifier"], fields["productIdentifier"], fields["offerIdentifier"],
        token.lower(), fields["nonce"].lower(), str(fields["timestampMs"]),
    ]).encode("utf-8")
    public_key = serialization.load_pem_private_key(key_pem, password=None).public_key()
    try:
        public_key.verify(base64.b64decode(request["kakinSignature"], validate=True), message, ec.ECDSA(hashes.SHA256()))
        kakin_valid = True
    except InvalidSignature:
        kakin_valid = False
    return {"pythonSignature": python_signature, "kakinSignatureValid": kakin_valid}


def api_token(request):
    client = AppStoreServerAPIClient(
        request["keyPEM"].encode(), request["keyId"], request["issuerId"], request["bundleId"], Environment.SANDBOX
    )
    return {"token": client._generate_token(), "nowSeconds": int(time.time())}


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    answer = {
        "cases": {case["name"]: verify_case(case) for case in request["cases"]},
        "offers": offers(request["offers"]),
        "apiToken": api_token(request["apiToken"]),
    }
    with open(sys.argv[2], "w") as f:
        json.dump(answer, f)


if __name__ == "__main__":
    main()
