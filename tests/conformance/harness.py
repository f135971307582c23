"""harness.py - runs op_db against aicraft in worker processes, and reads and writes
expected.txt. The engine behind test_op_db.py and run.py (README.md in this folder).

Crashes and hangs cannot stop a run: the OpInfos are handed out, one at a time, to worker
processes (worker.py, which imports torch, op_db and aicraft; this module imports none of
them); a worker that dies or runs past the per-OpInfo time limit is replaced, and its
OpInfo is recorded as crashed or timed out.
"""
import json
import os
import selectors
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPECTED = os.path.join(HERE, "expected.txt")
WORKER = os.path.join(HERE, "worker.py")

STATUSES = ("pass", "partial", "xfail", "missing", "wrong", "out")
OP_TIMEOUT = float(os.environ.get("AC_CONFORMANCE_OP_TIMEOUT", "60"))


class _Proc:
    def __init__(self, env):
        err = None if os.environ.get("AC_CONFORMANCE_VERBOSE") else subprocess.DEVNULL
        self.p = subprocess.Popen([sys.executable, WORKER],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                  cwd=ROOT, env=env, text=True, bufsize=1)
        self.current, self.since = None, None

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def kill(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def _worker_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def list_ops():
    """{"torch": version, "ops": [[name, variant], ...]} of op_db, from a worker process
    (the parent never imports torch)."""
    w = _Proc(_worker_env())
    try:
        return _ask_list(w)
    finally:
        w.kill()


def _ask_list(w):
    w.send("list")
    line = w.p.stdout.readline()
    if not line:
        raise RuntimeError("conformance worker failed to start (AC_CONFORMANCE_VERBOSE=1 shows why)")
    return json.loads(line)


def run_all(ops=None, jobs=None, indices=None, timeout=OP_TIMEOUT, progress=None):
    """Run op_db's OpInfos (all, or those indices) over `jobs` worker processes.

    ops: list_ops()["ops"] when known (else the first worker is asked). Returns
    (list_ops()'s dict, results in op_db order), one result dict per OpInfo: name,
    variant, status, reason, passed, samples, seconds.
    """
    jobs = jobs or int(os.environ.get("AC_CONFORMANCE_JOBS", "0")) or min(2, os.cpu_count() or 1)
    env = _worker_env()
    results = {}
    sel = selectors.DefaultSelector()
    procs = [_Proc(env) for _ in range(jobs)]  # their imports run side by side
    workers = []
    try:
        info = _ask_list(procs[0])
    except BaseException:
        for w in procs:
            w.kill()
        raise
    ops = ops or [tuple(o) for o in info["ops"]]
    todo = list(range(len(ops)) if indices is None else indices)[::-1]

    def start(w=None):
        w = w or _Proc(env)
        sel.register(w.p.stdout, selectors.EVENT_READ, w)
        workers.append(w)
        feed(w)

    def feed(w):
        if todo:
            w.current, w.since = todo.pop(), time.monotonic()
            w.send(str(w.current))
        else:
            w.current = None

    def replace(w, reason):
        name, variant = ops[w.current]
        results[w.current] = {"index": w.current, "name": name, "variant": variant, "status": "xfail",
                              "reason": reason, "passed": 0, "samples": 0, "seconds": 0.0}
        if progress:
            progress(results[w.current])
        sel.unregister(w.p.stdout)
        w.kill()
        workers.remove(w)
        if todo:
            start()

    try:
        for w in procs:
            start(w)
        while any(w.current is not None for w in workers):
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                line = w.p.stdout.readline()
                if not line:
                    replace(w, "crashed (exit %s)" % w.p.wait())
                    continue
                res = json.loads(line)
                results[res["index"]] = res
                if progress:
                    progress(res)
                feed(w)
            now = time.monotonic()
            for w in list(workers):
                if w.current is not None and now - w.since > timeout:
                    replace(w, "timed out (> %gs)" % timeout)
    finally:
        for w in procs + workers:
            w.kill()
    return info, [results[i] for i in sorted(results)]


SESSION = {}


def session_results():
    """{(name, variant): result} for the whole op_db, run once per process (pytest session)."""
    if "results" not in SESSION:
        info, results = run_all()
        SESSION.update(torch=info["torch"], list=results,
                       results={(r["name"], r["variant"]): r for r in results})
    return SESSION["results"]


# ---------------------------------------------------------------------------------------
# expected.txt and the summary

HEADER = """\
# OpInfos of op_db that aicraft does not pass (tests/conformance/README.md).
# Regenerate: python tests/conformance/run.py --write
# name<TAB>variant (- for none)<TAB>status<TAB>samples passed/compared<TAB>reason
"""


def write_expected(results, path=EXPECTED):
    with open(path, "w") as f:
        f.write(HEADER)
        for r in results:
            if r["status"] in ("pass", "out"):
                continue
            f.write("%s\t%s\t%s\t%d/%d\t%s\n" % (r["name"], r["variant"] or "-", r["status"],
                                                  r["passed"], r["samples"], r["reason"].replace("\t", " ")))


def read_expected(path=EXPECTED):
    """{(name, variant): (status, passed, compared, reason)}"""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, variant, status, counts, reason = line.rstrip("\n").split("\t", 4)
            passed, compared = (int(v) for v in counts.split("/"))
            out[(name, "" if variant == "-" else variant)] = (status, passed, compared, reason)
    return out


def summary_line(results, torch_version):
    c = {s: 0 for s in STATUSES}
    for r in results:
        c[r["status"]] += 1
    return ("conformance (op_db, torch %s): %d pass / %d partial / %d xfail / %d missing of %d, "
            "%d wrong, %d out of scope" % (torch_version, c["pass"], c["partial"], c["xfail"],
                                          c["missing"], len(results), c["wrong"], c["out"]))
