"""Kakin's Stripe-Signature code against Stripe's own Python library (stripe, pinned in scripts/setup).

Usage: stripe_interop.py REQUEST.json ANSWER.json
REQUEST: {"secret", "events": [{"name", "payload", "header"}], "tampered": [{"name", "payload", "header"}],
          "toSign": [{"name", "payload", "timestamp"}]}
ANSWER:  {"accepted": {name: {"id", "type", "objectType"}}, "refused": {name: "<error>"},
          "tamperedRefused": {name: true|false}, "signed": {name: "<Stripe-Signature header>"}, "version"}
Kakin signs "events" at the current time; stripe.Webhook.construct_event must accept them (default tolerance)
and refuse every "tampered" one. Stripe's WebhookSignature.generate_signature_header signs "toSign" for Kakin
to verify in turn.
"""
import json
import sys

import stripe


def main(request_path, answer_path):
    with open(request_path) as f:
        request = json.load(f)
    secret = request["secret"]
    answer = {"accepted": {}, "refused": {}, "tamperedRefused": {}, "signed": {}, "version": stripe.VERSION}
    for case in request["events"]:
        try:
            event = stripe.Webhook.construct_event(case["payload"], case["header"], secret)
            answer["accepted"][case["name"]] = {
                "id": event["id"], "type": event["type"], "objectType": event["data"]["object"]["object"],
            }
        except Exception as e:  # SignatureVerificationError or a payload Stripe cannot read
            answer["refused"][case["name"]] = f"{type(e).__name__}: {e}"
    for case in request["tampered"]:
        try:
            stripe.Webhook.construct_event(case["payload"], case["header"], secret)
            answer["tamperedRefused"][case["name"]] = False
        except stripe.SignatureVerificationError:
            answer["tamperedRefused"][case["name"]] = True
    for case in request["toSign"]:
        answer["signed"][case["name"]] = stripe.WebhookSignature.generate_signature_header(
            case["payload"], secret, timestamp=case["timestamp"])
    with open(answer_path, "w") as f:
        json.dump(answer, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
