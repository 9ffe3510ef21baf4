"""Verifies the App Store simulator's signed data with Apple's own library (app-store-server-library).

Usage: verify_with_apple_library.py DIR
DIR holds root.der and cases.json: {"environment": "Sandbox"|"Production", "bundleId", "appAppleId",
"transactions": [jws], "renewals": [jws], "notifications": [jws], "realtimeRequests": [jws]}. Every JWS must verify with the
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
    extras = {"commitment transactions": 0, "commitment renewals": 0, "RESCIND_CONSENT": 0, "realtime requests": 0}

    def check(kind, jws, verify):
        try:
            decoded = verify(jws)
            counts[kind] = counts.get(kind, 0) + 1
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
        if t is not None and t.rawBillingPlanType == "MONTHLY":
            c = t.commitmentInfo
            if c is None or not (1 <= (c.billingPeriodNumber or 0) <= 12) or c.totalBillingPeriods != 12 or c.commitmentExpiresDate is None:
                failures.append(f"transactions: commitmentInfo not read by Apple's library: {c}")
            else:
                extras["commitment transactions"] += 1
    for jws in cases["renewals"]:
        r = check("renewals", jws, verifier.verify_and_decode_renewal_info)
        if r is not None and r.commitmentInfo is not None:
            if r.rawRenewalBillingPlanType != "MONTHLY" or r.commitmentInfo.rawCommitmentAutoRenewStatus not in (0, 1):
                failures.append(f"renewals: commitment fields not read by Apple's library: {r.commitmentInfo}")
            else:
                extras["commitment renewals"] += 1
    for jws in cases.get("realtimeRequests", []):
        q = check("realtimeRequests", jws, verifier.verify_and_decode_realtime_request)
        if q is not None:
            if not q.originalTransactionId or not q.productId or not q.userLocale or q.requestIdentifier is None:
                failures.append(f"realtimeRequests: fields missing: {q}")
            else:
                extras["realtime requests"] += 1
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
        if n.rawNotificationType == "RESCIND_CONSENT":
            if n.appData is None or n.appData.bundleId != cases["bundleId"] or not n.appData.signedAppTransactionInfo:
                failures.append("notifications: RESCIND_CONSENT without its appData")
            else:
                check("appTransactions", n.appData.signedAppTransactionInfo, verifier.verify_and_decode_app_transaction)
                extras["RESCIND_CONSENT"] += 1
        if n.data is not None:
            if n.data.signedTransactionInfo:
                check("transactions", n.data.signedTransactionInfo, verifier.verify_and_decode_signed_transaction)
            if n.data.signedRenewalInfo:
                check("renewals", n.data.signedRenewalInfo, verifier.verify_and_decode_renewal_info)

    for line in failures:
        print("FAIL " + line)
    print(f"verified {counts['transactions']} transactions, {counts['renewals']} renewal infos, "
          f"{counts['notifications']} notifications ({cases['environment']}); "
          + ", ".join(f"{v} {k}" for k, v in extras.items()))
    if min(counts.values()) == 0:
        print("FAIL nothing of some kind was verified")
        return 1
    if cases.get("realtimeRequests") is not None and min(extras.values()) == 0:
        print(f"FAIL one of Apple's 2026 additions was not verified: {extras}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
