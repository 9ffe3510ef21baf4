#!/usr/bin/env python3
"""Summarises `perf script` output (call graphs of one `kakin serve` process) for scripts/profile.

Reads the text of `perf script` on stdin and prints, as shares of all the server's samples:
- where the CPU goes, by part of the request's path (each sample counted once, in the first category
  whose marker appears in its stack, in the order below);
- the functions with the largest inclusive share (Swift names demangled).
Usage: perf script -i perf.data | scripts/profile-report.py [--top N]
"""
import collections
import re
import subprocess
import sys

# (category, markers): a sample belongs to the first category one of whose markers is a prefix of a frame.
CATEGORIES = [
    ("database: checkpoint thread (WAL copied into the database file, its fsync)", ["SQLiteCheckpointer.run"]),
    ("database writer: WAL frames and fsync at COMMIT", ["sqlite3WalFrames"]),
    ("database writer: checkpoint on the writer thread", ["sqlite3WalCheckpoint", "sqlite3WalDefaultHook"]),
    ("database writer: write bodies (SQL statements, answers)", ["closure #1 in closure #1 in SQLiteDatabase.write"]),
    ("database writer: resuming callers", ["CheckedContinuation.resume", "UnsafeContinuation.resume"]),
    ("database writer: transaction control, queue", ["SQLiteWriter.run"]),
    ("database readers", ["SQLiteReader.run"]),
    ("ECDSA verification (OpenSSL)", ["P256PublicKey.isValidES256Signature", "P256PublicKey.isValidDERSignature"]),
    ("decoding stored JWS (status)", ["static StoredJWS.payload", "TransactionPayload.init", "RenewalInfoPayload.init"]),
    ("status engine", ["static StatusEngine.evaluate"]),
    ("JSON parsing (request bodies, JWS payloads)", ["static JSONParser.parse"]),
    ("JSON output", ["JSONValue.serialized", "CustomerStatus.json", "JSONValue.jsonString"]),
    ("handler tasks: everything else (routing, validation, awaiting)", ["swift_job_run", "swift::runJobInEstablishedExecutorContext"]),
    ("HTTP edge: libmicrohttpd, kernel TCP, suspend/resume", ["?libmicrohttpd", "MHD_", "ServerRuntime.handleAccess"]),
]


def read_stacks(lines):
    """Yields (frames root→leaf) per sample of `perf script` text."""
    frames = None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if frames:
                yield list(reversed(frames))
            frames = None
            continue
        if not line.startswith(("\t", " ")):
            frames = []
            continue
        if frames is None:
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        match = re.match(r"(.*?)(?:\+0x[0-9a-f]+)? \((.*)\)$", parts[1])
        if not match:
            continue
        name, dso = match.group(1), match.group(2).rsplit("/", 1)[-1]
        frames.append("?" + dso if name == "[unknown]" else name)
    if frames:
        yield list(reversed(frames))


def demangled(names):
    mangled = sorted(n for n in names if n.startswith("$s"))
    if not mangled:
        return {}
    output = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(mangled),
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return dict(zip(mangled, output))


def main():
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
    stacks = list(read_stacks(sys.stdin))
    if not stacks:
        sys.exit("profile-report: no samples with call graphs")
    names = demangled({frame for stack in stacks for frame in stack})
    stacks = [[names.get(frame, frame) for frame in stack] for stack in stacks]
    total = len(stacks)

    categories = collections.Counter()
    for stack in stacks:
        for category, markers in CATEGORIES:
            if any(frame.startswith(marker) for frame in stack for marker in markers):
                categories[category] += 1
                break
        else:
            categories["other (kernel work outside these, unwinding failures)"] += 1
    print(f"{total} samples of the server's threads\n\nWhere the CPU goes (each sample once):")
    for category, count in categories.most_common():
        print(f"  {100 * count / total:5.1f}%  {category}")

    inclusive = collections.Counter()
    skipped = re.compile(r"^(clone3|start_thread|Thread\.main|NSThreadStart|closure #2 in WorkerThreads|partial apply|"
                         r"protocol witness|specialized |merged |Result<>|\?|0x|_dispatch_|swift_job_run|"
                         r"swift::runJobInEstablishedExecutorContext|entry_SYSCALL|do_syscall|__x64_sys)")
    for stack in stacks:
        for frame in set(stack):
            if not skipped.match(frame):
                inclusive[frame] += 1
    print(f"\nLargest inclusive shares (a function and what it calls):")
    for frame, count in inclusive.most_common(top):
        print(f"  {100 * count / total:5.1f}%  {frame[:140]}")


if __name__ == "__main__":
    main()
