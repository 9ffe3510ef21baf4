"""Google's own libraries against Kakin's Play simulator.

google-api-python-client (the bundled androidpublisher v3 discovery document, static discovery) with google-auth
service-account credentials read from the simulator's key file, through the simulator's OAuth token endpoint:
reads a subscription (subscriptionsv2) and a one-time purchase (productsv2), acknowledges both, consumes the
one-time purchase, lists voided purchases; then google.oauth2.id_token.verify_token checks a push token the
simulator signed against its JWKS.

Usage: google_interop.py REQUEST.json ANSWER.json
"""
import json
import sys
import urllib.request

import google.auth.transport.requests
from google.oauth2 import id_token, service_account
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError


def main(request_path, answer_path):
    with open(request_path) as f:
        req = json.load(f)
    with urllib.request.urlopen(req["serviceAccountURL"], timeout=60) as r:
        info = json.load(r)
    credentials = service_account.Credentials.from_service_account_info(
        info, scopes=["https://www.googleapis.com/auth/androidpublisher"])
    service = build("androidpublisher", "v3", credentials=credentials, static_discovery=True,
                    client_options={"api_endpoint": req["apiEndpoint"]})
    purchases = service.purchases()
    package = req["packageName"]
    answer = {"tokenURI": info["token_uri"]}

    answer["subscription"] = purchases.subscriptionsv2().get(packageName=package, token=req["subscriptionToken"]).execute()
    purchases.subscriptions().acknowledge(packageName=package, subscriptionId=req["subscriptionId"],
                                          token=req["subscriptionToken"], body={}).execute()
    answer["subscriptionAfterAcknowledge"] = purchases.subscriptionsv2().get(
        packageName=package, token=req["subscriptionToken"]).execute()

    answer["product"] = purchases.productsv2().getproductpurchasev2(packageName=package, token=req["productToken"]).execute()
    purchases.products().acknowledge(packageName=package, productId=req["productId"], token=req["productToken"], body={}).execute()
    purchases.products().consume(packageName=package, productId=req["productId"], token=req["productToken"]).execute()
    answer["productAfterConsume"] = purchases.products().get(packageName=package, productId=req["productId"],
                                                             token=req["productToken"]).execute()

    answer["order"] = service.orders().get(packageName=package, orderId=req["refundedOrderId"]).execute()

    answer["voided"] = purchases.voidedpurchases().list(packageName=package, type=1, includeQuantityBasedPartialRefund=True).execute()

    try:
        purchases.subscriptionsv2().get(packageName=package, token="not-a-token").execute()
        answer["unknownToken"] = None
    except HttpError as error:
        answer["unknownToken"] = {"status": error.resp.status, "reason": error.error_details[0]["reason"] if error.error_details else None}

    claims = id_token.verify_token(req["pushToken"], google.auth.transport.requests.Request(),
                                   audience=req["audience"], certs_url=req["certsURL"])
    answer["pushClaims"] = claims
    try:
        id_token.verify_token(req["pushToken"], google.auth.transport.requests.Request(),
                              audience="https://elsewhere.example/push", certs_url=req["certsURL"])
        answer["wrongAudienceAccepted"] = True
    except Exception:
        answer["wrongAudienceAccepted"] = False

    with open(answer_path, "w") as f:
        json.dump(answer, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
