"""Baseline of kakin-bench's verify figure: how many signed transactions per second Apple's App Store
Server Library (Python, app-store-server-library) verifies, on the same JWS that `kakin verify` gets.

Usage: verify_bench.py JWS_FILE ROOT_DER BUNDLE_ID COUNT
Verifies the first COUNT lines of JWS_FILE with SignedDataVerifier (the given root, online checks off,
Sandbox), as an app backend would, and prints {"verified": N, "seconds": S, "cpuSeconds": C}
(wall-clock and CPU time of the loop only, not Python's start-up or imports). Any failure raises.
"""
import json
import sys
import time

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier


def main():
    jws_file, root_file, bundle_id, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(jws_file) as f:
        sample = [line.strip() for _, line in zip(range(count), f)]
    with open(root_file, "rb") as f:
        root = f.read()
    verifier = SignedDataVerifier([root], enable_online_checks=False, environment=Environment.SANDBOX, bundle_id=bundle_id)
    start, cpu_start = time.perf_counter(), time.process_time()
    for jws in sample:
        verifier.verify_and_decode_signed_transaction(jws)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    print(json.dumps({"verified": len(sample), "seconds": seconds, "cpuSeconds": cpu_seconds}))


if __name__ == "__main__":
    main()
