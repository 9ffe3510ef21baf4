#!/usr/bin/env python3
"""Summarises `perf script` output (call graphs of one `kakin serve` process) for scripts/profile.

Reads the text of `perf script` on stdin and prints, as shares of all the server's samples:
- where the CPU goes, by part of the request's path (each sample counted once, in the first category
  whose marker appears in its stack, in the order below);
- the functions with the largest inclusive share (Swift names demangled);
- the functions with the largest self share (the leaf of the sample: malloc, memcpy, hashing…);
- with --focus PREFIX (repeatable): what the samples whose stack passes through a function starting with
  PREFIX spend below it, inclusive, e.g. --focus "Ingest.Plan.run" for the SQL of a purchase's write.
Usage: perf script -i perf.data | scripts/profile-report.py [--top N] [--focus PREFIX]…
"""
import collections
import re
import subprocess
import sys

WRITE_BODY = "closure #1 in closure #1 in SQLiteDatabase.write"

# (category, markers): a sample belongs to the first category one of whose markers is a prefix of a frame of its
# stack; a marker that is a tuple matches when each of its prefixes does.
CATEGORIES = [
    ("database: checkpoint thread (WAL copied into the database file, its fsync)", ["SQLiteCheckpointer.run"]),
    ("database writer: COMMIT, WAL frames and fsync", ["sqlite3WalFrames"]),
    ("database writer: COMMIT, the rest (page cache, WAL index, locks)", ["sqlite3BtreeCommitPhaseOne", "sqlite3BtreeCommitPhaseTwo"]),
    ("database writer: checkpoint on the writer thread", ["sqlite3WalCheckpoint", "sqlite3WalDefaultHook"]),
    ("database writer: write bodies, SQLite running the statements",
     [(WRITE_BODY, "sqlite3_step"), (WRITE_BODY, "sqlite3_prepare"), (WRITE_BODY, "sqlite3_reset")]),
    ("database writer: write bodies, the rest (plans, binding, rows, JSON of stored fields)", [WRITE_BODY]),
    ("database writer: resuming callers", ["CheckedContinuation.resume", "UnsafeContinuation.resume"]),
    ("database writer: transaction control, queue", ["SQLiteWriter.run"]),
    ("database readers", ["SQLiteReader.run"]),
    ("ECDSA verification (OpenSSL)", ["P256PublicKey.isValidES256Signature", "P256PublicKey.isValidDERSignature"]),
    ("JWS verification besides ECDSA (chain, base64, payload JSON)", ["SignedDataVerifier.", "static StoredJWS.payload"]),
    ("logging", ["Logger.log", "Logger.info", "Logger.error", "Logger.warning", "Logger.debug"]),
    ("metrics", ["Metrics."]),
    ("decoding payloads (TransactionPayload, RenewalInfoPayload)", ["TransactionPayload.init", "RenewalInfoPayload.init"]),
    ("status engine", ["static StatusEngine.evaluate"]),
    ("JSON parsing (request bodies, JWS payloads)", ["static JSONParser.parse"]),
    ("JSON output", ["JSONValue.serialized", "CustomerStatus.json", "JSONValue.jsonString"]),
    ("handler tasks: everything else (routing, validation, awaiting)", ["swift_job_run", "swift::runJobInEstablishedExecutorContext"]),
    ("HTTP edge: libmicrohttpd, kernel TCP, suspend/resume", ["?libmicrohttpd", "MHD_", "ServerRuntime.handleAccess"]),
    ("HTTP client: libcurl, kernel TCP (webhooks out)", ["CurlEngine.run"]),
]

# Costs every part pays, shown beside the parts (a sample may count in several).
CROSS_CUTTING = [
    ("memory: malloc, free (SQLite's and Swift's)", ["__GI___libc_malloc", "__GI___libc_free", "_int_free", "malloc_consolidate",
                                                     "__libc_calloc", "__GI___libc_realloc", "_int_malloc"]),
    ("Swift reference counting (swift_retain, swift_release)", ["swift_retain", "swift_release", "swift_bridgeObjectRetain",
                                                                "swift_bridgeObjectRelease"]),
    ("file I/O system calls (pread, pwrite, fdatasync)", ["__libc_pread64", "__libc_pwrite64", "__GI_fdatasync", "fdatasync", "__GI___fsync"]),
    ("thread wake-ups and waits (futex)", ["do_futex", "__futex_abstimed_wait_common", "__GI___lll_lock_wake", "futex_wake"]),
    ("SQLite statements, anywhere (sqlite3_step)", ["sqlite3_step"]),
    ("SHA-256 (JWS signing input, hashing)", ["SHA256", "static SHA256Hash.digest"]),
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


def options(flag):
    return [sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == flag]


def inclusive_shares(stacks, skipped):
    inclusive = collections.Counter()
    for stack in stacks:
        for frame in set(stack):
            if not skipped.match(frame):
                inclusive[frame] += 1
    return inclusive


def main():
    top = int(options("--top")[-1]) if "--top" in sys.argv else 25
    stacks = list(read_stacks(sys.stdin))
    if not stacks:
        sys.exit("profile-report: no samples with call graphs")
    names = demangled({frame for stack in stacks for frame in stack})
    stacks = [[names.get(frame, frame) for frame in stack] for stack in stacks]
    total = len(stacks)

    def has(stack, marker):
        if isinstance(marker, tuple):
            return all(has(stack, m) for m in marker)
        return any(frame.startswith(marker) for frame in stack)

    categories = collections.Counter()
    for stack in stacks:
        for category, markers in CATEGORIES:
            if any(has(stack, marker) for marker in markers):
                categories[category] += 1
                break
        else:
            categories["other (kernel work outside these, unwinding failures)"] += 1
    print(f"{total} samples of the server's threads\n\nWhere the CPU goes (each sample once):")
    for category, count in categories.most_common():
        print(f"  {100 * count / total:5.1f}%  {category}")

    print("\nAcross those parts (inclusive, overlapping):")
    for name, markers in CROSS_CUTTING:
        count = sum(1 for stack in stacks if any(frame.startswith(m) for frame in stack for m in markers))
        print(f"  {100 * count / total:5.1f}%  {name}")

    skipped = re.compile(r"^(clone3|start_thread|Thread\.main|NSThreadStart|closure #2 in WorkerThreads|partial apply|"
                         r"protocol witness|specialized |merged |Result<>|\?|0x|_dispatch_|swift_job_run|"
                         r"swift::runJobInEstablishedExecutorContext|entry_SYSCALL|do_syscall|__x64_sys)")
    print(f"\nLargest inclusive shares (a function and what it calls):")
    for frame, count in inclusive_shares(stacks, skipped).most_common(top):
        print(f"  {100 * count / total:5.1f}%  {frame[:140]}")

    leaves = collections.Counter(stack[-1] for stack in stacks if stack)
    print(f"\nLargest self shares (the function the sample was in):")
    for frame, count in leaves.most_common(min(top, 15)):
        print(f"  {100 * count / total:5.1f}%  {frame[:140]}")

    for focus in options("--focus"):
        below = []
        for stack in stacks:
            at = next((i for i, frame in enumerate(stack) if frame.startswith(focus)), None)
            if at is not None:
                below.append(stack[at + 1:])
        print(f"\nUnder {focus} ({100 * len(below) / total:.1f}% of all samples), inclusive shares of all samples:")
        for frame, count in inclusive_shares(below, skipped).most_common(top):
            print(f"  {100 * count / total:5.1f}%  {frame[:140]}")


if __name__ == "__main__":
    main()
