#!/usr/bin/env python3
"""The skip summary CI prints after ctest: every skipped test with its reason, and a failure
when a test that must run here skipped.

Usage: skip_summary.py CTEST_JUNIT.xml [LABEL]   (ctest --output-junit writes the file)

A test skips by exiting 77 after printing "SKIP: <reason>" on stderr (tests/harness.c,
tests/cli_*.sh). A skip is allowed only when one of its reasons matches a pattern of
tests/skip_allowed.txt (today: CUDA, which has no GPU here); any other skip -- lavapipe (Vulkan,
forced on with BACKPLANE_VULKAN=1), PoCL (OpenCL, BACKPLANE_OPENCL=1), python3 or the gguf
package missing -- means something scripts/install-deps.sh puts on every CI machine did not
work, and a green run would hide the regression. BP_SKIP_ALLOWED=<regex> adds a pattern for a
machine that lacks something on purpose; say why where it is set.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET


def allowed_patterns(root):
    pats = []
    with open(os.path.join(root, "tests", "skip_allowed.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                pats.append(re.compile(line))
    extra = os.environ.get("BP_SKIP_ALLOWED")
    if extra:
        pats.append(re.compile(extra))
    return pats


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    label = sys.argv[2] if len(sys.argv) > 2 else "ctest"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pats = allowed_patterns(root)
    tree = ET.parse(sys.argv[1])
    skipped, bad, total = [], [], 0
    for tc in tree.getroot().iter("testcase"):
        total += 1
        if tc.find("skipped") is None and tc.get("status") != "notrun":
            continue
        out = tc.findtext("system-out") or ""
        reasons = [l[len("SKIP: "):].strip() for l in out.splitlines() if l.startswith("SKIP: ")]
        if not reasons:
            reasons = ["(no 'SKIP:' line: a skip must say why)"]
        skipped.append((tc.get("name"), reasons))
        for r in reasons:
            if not any(p.search(r) for p in pats):
                bad.append((tc.get("name"), r))
    names = ", ".join(n for n, _ in skipped) or "none"
    print(f"{label}: {len(skipped)} of {total} tests skipped: {names}")
    for n, rs in skipped:
        for r in rs:
            print(f"  skipped {n}: {r}")
    for n, r in bad:
        print(f"FAIL: {n} must run here but skipped: {r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
