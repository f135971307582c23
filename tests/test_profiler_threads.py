"""The profiler from Python, hostile cases: a thread that starts it and exits
without stopping it does not lock it for the process; AC_PROFILE naming a path
that cannot be written says so on stderr at exit; a trace whose range names are
not UTF-8 (a C caller's) is still valid JSON."""
import json
import os
import subprocess
import sys
import threading

import aicraft as ac
from aicraft._ffi import lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_thread_that_exits_profiling_does_not_lock_the_profiler():
    for _ in range(5):
        def worker():
            ac.profiler.profile().start()
            ac.ones(3) + 1                     # and never stopped

        t = threading.Thread(target=worker)
        t.start()
        t.join()
    with ac.profiler.profile() as prof:
        ac.ones(3) * 2
    assert any(e.name.startswith("mul") for e in prof.events())


def run(code, **env):
    env = dict(os.environ, PYTHONPATH=ROOT, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_ac_profile_to_a_path_that_cannot_be_written_says_so():
    done = run("import aicraft as ac; ac.ones(3) + 1", AC_PROFILE="/nonexistent/dir/x.json")
    assert done.returncode == 0
    assert "AC_PROFILE=/nonexistent/dir/x.json" in done.stderr and "cannot be written" in done.stderr


def test_ac_profile_that_works_prints_nothing(tmp_path):
    path = tmp_path / "trace.json"
    done = run("import aicraft as ac; ac.ones(3) + 1", AC_PROFILE=str(path))
    assert done.returncode == 0 and done.stderr == ""
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    assert any(e["name"].startswith("add") for e in events)


def test_ac_profile_trace_with_range_names_that_are_not_utf8_is_valid_json(tmp_path):
    path = tmp_path / "trace.json"
    code = (r"import aicraft as ac; from aicraft._ffi import lib" "\n"
            r"for name in (b'caf\xe9', b'\xc0\xaf', b'\xed\xa0\x80', b'ok \xe2\x82\xac', b'cut \xe2\x82'):" "\n"
            r"    assert lib.ac_profiler_push(name) == 1; ac.ones(2) + 1; assert lib.ac_profiler_pop() == 0")
    done = run(code, AC_PROFILE=str(path))
    assert done.returncode == 0, done.stderr
    events = json.loads(path.read_bytes().decode("utf-8"))["traceEvents"]   # strict UTF-8, strict JSON
    names = {e["name"] for e in events}
    assert "caf\ufffd" in names and "ok \u20ac" in names


def test_python_export_of_non_utf8_range_names_is_valid_json(tmp_path):
    with ac.profiler.profile() as prof:
        assert lib.ac_profiler_push(b"bad \xff name") == 1
        ac.ones(2) + 1
        assert lib.ac_profiler_pop() == 0
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    json.loads((tmp_path / "t.json").read_bytes().decode("utf-8"))
