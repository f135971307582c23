"""run.py - run op_db against aicraft and print the table (README.md in this folder).

    python tests/conformance/run.py                 the table and the summary line
    python tests/conformance/run.py --write         ... and rewrite expected.txt
    python tests/conformance/run.py --reasons       the most common reasons among the failures
    python tests/conformance/run.py -k conv         only OpInfos whose name contains "conv"
    python tests/conformance/run.py --jobs 1        worker processes (default: 2)
"""
import argparse
import collections
import importlib.util
import os
import re
import sys
import time

_spec = importlib.util.spec_from_file_location(
    "aicraft_conformance_harness", os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py"))
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)


def reason_key(r):
    """What to group a failing OpInfo by: a missing aicraft submodule; "missing" for a
    plain missing function; else the error with shapes and numbers taken out."""
    text = r["reason"]
    if r["status"] == "missing":
        m = re.match(r"no (aicraft\.[a-z_]+)$", text)
        if m and m.group(1) not in ("aicraft.%s" % r["name"].split(".")[-1],):
            return "no module %s" % m.group(1)
        return "missing: no aicraft/Tensor function" if "." not in r["name"] else \
            "missing: no aicraft.%s.<op>" % r["name"].rsplit(".", 1)[0]
    text = re.sub(r"^(float32|int64|bool)\([^:]*\): ", "", text)
    text = re.sub(r"\(\d[^)]*\)|\[[^]]*\]|\d+(\.\d+)?(e-?\d+)?", "#", text)
    return text[:110]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite expected.txt")
    ap.add_argument("--reasons", action="store_true", help="the most common reasons, by OpInfo count")
    ap.add_argument("--top", type=int, default=30, help="how many reasons --reasons shows")
    ap.add_argument("-k", default=None, help="only OpInfos whose name contains this")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--all", action="store_true", help="list passing and out-of-scope OpInfos too")
    args = ap.parse_args(argv)
    if args.write and args.k:
        ap.error("--write needs the whole op_db (no -k)")

    t0 = time.time()
    if args.k:
        ops = [tuple(o) for o in harness.list_ops()["ops"]]
        idx = [i for i, (n, _) in enumerate(ops) if args.k in n]
    else:
        ops, idx = None, None
    info, results = harness.run_all(ops, jobs=args.jobs, indices=idx)
    elapsed = time.time() - t0

    for r in results:
        if args.all or r["status"] not in ("pass", "out"):
            label = r["name"] + ("." + r["variant"] if r["variant"] else "")
            notes = " ".join("[%d %s]" % (n, k) for k, n in sorted(r.get("notes", {}).items()))
            print("%-48s %-8s %5s  %s" % (label, r["status"], "%d/%d" % (r["passed"], r["samples"]),
                                          (notes + " " + r["reason"][:150]).strip()))
    if args.reasons:
        print("\nmost common reasons among partial/xfail/missing, by OpInfo count:")
        groups = collections.defaultdict(list)
        for r in results:
            if r["status"] in ("partial", "xfail", "missing"):
                groups[reason_key(r)].append(r["name"] + ("." + r["variant"] if r["variant"] else ""))
        ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        for key, names in ranked[:args.top]:
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            print("%4d  %s\n        %s" % (len(names), key, shown))
        print("\nmissing functions by OpInfo count (variants), outside missing modules:")
        miss = collections.Counter(r["name"] for r in results
                                   if r["status"] == "missing" and not reason_key(r).startswith("no module"))
        print("  " + ", ".join("%s %d" % kv for kv in miss.most_common(args.top)))
    slow = sorted(results, key=lambda r: -r.get("seconds", 0))[:5]
    print("\nslowest: " + ", ".join("%s %.1fs" % (r["name"], r.get("seconds", 0)) for r in slow))
    print("%s  (%.0f s)" % (harness.summary_line(results, info["torch"]), elapsed))
    if args.write:
        harness.write_expected(results)
        print("wrote", os.path.relpath(harness.EXPECTED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
