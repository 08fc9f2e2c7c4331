#!/usr/bin/env python3
"""Sum meson testlog.json files into one plain line: N passed, N failed, N skipped.

Exits 1 if any test failed, timed out or errored, or if a log is missing
(a build that failed before testing counts as a failure)."""
import json
import sys

passed = failed = skipped = 0
missing = 0
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                result = json.loads(line).get("result", "")
                if result in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif result == "SKIP":
                    skipped += 1
                else:
                    failed += 1
                    print(f"failed: {json.loads(line).get('name')} ({result}) in {path}",
                          file=sys.stderr)
    except FileNotFoundError:
        print(f"missing test log: {path}", file=sys.stderr)
        missing += 1
if missing:
    failed += missing
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
