"""Asks Apple's App Store Server Library (Python, app-store-server-library==3.1.2) which transaction IDs
app receipts hold. Driven by ReceiptInteropTests.swift: reads a JSON request, writes a JSON answer.

Request:  {"receipts": [{"name": ..., "base64": ...}]}
Answer:   {"receipts": {name: {"transactionId": <ReceiptUtility's answer or null>,
                               "inApp": [[transaction_id or null, original_transaction_id or null], ...]}
                        or {"error": "..."}}}

`transactionId` is exactly what ReceiptUtility.extract_transaction_id_from_app_receipt returns. `inApp`
walks every in-app purchase with the library's own decoder and the same path through the PKCS#7
structure, so that all IDs can be compared, not only the first.

Usage: receipt_interop.py REQUEST.json ANSWER.json
"""
import json
import sys
from base64 import b64decode

from appstoreserverlibrary.receipt_utility import (
    IN_APP_ARRAY,
    ORIGINAL_TRANSACTION_IDENTIFIER,
    TRANSACTION_IDENTIFIER,
    ReceiptUtility,
)


def all_in_app(utility, app_receipt):
    val = utility._decode_octet_string(b64decode(app_receipt, validate=True))
    value = utility._decode_octet_string(val[1][0][2][1][0])
    entries = []
    for attribute in value:
        if attribute[0] == IN_APP_ARRAY:
            ids = {TRANSACTION_IDENTIFIER: None, ORIGINAL_TRANSACTION_IDENTIFIER: None}
            for field in utility._decode_octet_string(attribute[2]):
                if field[0] in ids:
                    ids[field[0]] = utility._decode_octet_string(field[2])
            entries.append([ids[TRANSACTION_IDENTIFIER], ids[ORIGINAL_TRANSACTION_IDENTIFIER]])
    return entries


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    utility = ReceiptUtility()
    answers = {}
    for receipt in request["receipts"]:
        try:
            answers[receipt["name"]] = {
                "transactionId": utility.extract_transaction_id_from_app_receipt(receipt["base64"]),
                "inApp": all_in_app(utility, receipt["base64"]),
            }
        except Exception as error:  # the library raises ValueError for anything it cannot read
            answers[receipt["name"]] = {"error": repr(error)}
    with open(sys.argv[2], "w") as f:
        json.dump({"receipts": answers}, f)


if __name__ == "__main__":
    main()
