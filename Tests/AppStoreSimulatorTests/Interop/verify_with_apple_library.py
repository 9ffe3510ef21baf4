"""Verifies the App Store simulator's signed data with Apple's own library (app-store-server-library).

Usage: verify_with_apple_library.py DIR
DIR holds root.der and cases.json: {"environment": "Sandbox"|"Production", "bundleId", "appAppleId",
"transactions": [jws], "renewals": [jws], "notifications": [jws]}. Every JWS must verify with the
simulator's root only, enable_online_checks=False (so validity is checked at signedDate), strict X.509
checks on (the library's default). Nested transactions and renewal info of notifications are verified
too. Prints one line per failure and exits 1 if any.
"""
import json
import os
import sys

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException


def main(directory):
    with open(os.path.join(directory, "root.der"), "rb") as f:
        root = f.read()
    with open(os.path.join(directory, "cases.json")) as f:
        cases = json.load(f)
    environment = Environment(cases["environment"])
    verifier = SignedDataVerifier([root], False, environment, cases["bundleId"], cases["appAppleId"])
    failures = []
    counts = {"transactions": 0, "renewals": 0, "notifications": 0}

    def check(kind, jws, verify):
        try:
            decoded = verify(jws)
            counts[kind] += 1
            return decoded
        except VerificationException as e:
            failures.append(f"{kind}: {e.status.name}")
        except Exception as e:  # decoding errors (a field of the wrong type) are failures too
            failures.append(f"{kind}: {type(e).__name__}: {e}")
        return None

    for jws in cases["transactions"]:
        t = check("transactions", jws, verifier.verify_and_decode_signed_transaction)
        if t is not None and (t.rawType is None or t.rawEnvironment != cases["environment"]):
            failures.append(f"transactions: unexpected type/environment {t.rawType} {t.rawEnvironment}")
    for jws in cases["renewals"]:
        check("renewals", jws, verifier.verify_and_decode_renewal_info)
    for jws in cases["notifications"]:
        n = check("notifications", jws, verifier.verify_and_decode_notification)
        if n is None:
            continue
        if n.rawNotificationType is None or n.notificationUUID is None or n.version != "2.0":
            failures.append(f"notifications: missing type, UUID or version in {n.rawNotificationType}")
        if n.rawNotificationType == "EXTERNAL_PURCHASE_TOKEN":
            t = n.externalPurchaseToken
            if t is None or not t.externalPurchaseId or t.bundleId != cases["bundleId"] or t.appAppleId != cases["appAppleId"]:
                failures.append("notifications: EXTERNAL_PURCHASE_TOKEN without its token's id, bundle ID or app Apple ID")
            elif t.externalPurchaseId.startswith("SANDBOX") != (cases["environment"] == "Sandbox"):
                failures.append("notifications: external purchase token of the wrong environment")
        if n.data is not None:
            if n.data.signedTransactionInfo:
                check("transactions", n.data.signedTransactionInfo, verifier.verify_and_decode_signed_transaction)
            if n.data.signedRenewalInfo:
                check("renewals", n.data.signedRenewalInfo, verifier.verify_and_decode_renewal_info)

    for line in failures:
        print("FAIL " + line)
    print(f"verified {counts['transactions']} transactions, {counts['renewals']} renewal infos, "
          f"{counts['notifications']} notifications ({cases['environment']})")
    if min(counts.values()) == 0:
        print("FAIL nothing of some kind was verified")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
