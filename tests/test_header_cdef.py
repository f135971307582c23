"""The public header is the one source of truth for the CFFI binding: every ac_
function declared in ac.h is in the cdef block build_ffi.py reads and in the
compiled aicraft._libac, with the same signature; struct layouts and constants
agree; the built module is not stale. Also: `import aicraft` stays fast."""
import os
import re
import subprocess
import sys

import pytest
from cffi import FFI

import aicraft
from aicraft._ffi import ffi, lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "libac", "include", "ac.h")
sys.path.insert(0, ROOT)
import build_ffi  # noqa: E402

BEGIN, END = "/* AC_CDEF_BEGIN */", "/* AC_CDEF_END */"
# A declaration: a return type, then ac_name( at the start of a line (not a typedef).
DECLARATION = re.compile(r"^(?!typedef)[A-Za-z_][\w \t\*]*?\b(ac_\w+)\s*\(", re.MULTILINE)


def header_text():
    with open(HEADER, encoding="utf-8") as f:
        return f.read()


def cdef_block(text):
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "exactly one pair of AC_CDEF markers"
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)]


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)


def declared_functions(text):
    return set(DECLARATION.findall(strip_comments(text)))


def plain(cname):
    """A C type name without `struct ` (cffi names a typedef'd struct either way)."""
    return re.sub(r"\bstruct ", "", cname)


@pytest.fixture(scope="module")
def fresh():
    """The header's cdef block parsed anew, bound to the compiled module's symbols (ABI mode)."""
    fresh_ffi = FFI()
    fresh_ffi.cdef(cdef_block(header_text()))
    return fresh_ffi, fresh_ffi.dlopen(aicraft._libac.__file__)


def test_build_ffi_reads_the_header_block_verbatim():
    block = cdef_block(header_text())
    assert build_ffi.header_cdef() == block
    assert os.path.samefile(build_ffi.HEADER, HEADER)


def test_every_function_in_the_header_is_inside_the_cdef_block():
    text = header_text()
    everywhere = declared_functions(text)
    in_block = declared_functions(cdef_block(text))
    assert len(in_block) > 50
    assert everywhere == in_block, "declared outside the AC_CDEF block: %s" % sorted(everywhere - in_block)


def test_every_header_function_is_in_the_compiled_module():
    missing = [name for name in sorted(declared_functions(header_text())) if not hasattr(lib, name)]
    assert not missing, "in ac.h but not in aicraft._libac (rebuild?): %s" % missing


def test_the_compiled_module_has_no_functions_the_header_lost():
    declared = declared_functions(header_text())
    compiled = {name for name in dir(lib) if name.startswith("ac_") and callable(getattr(lib, name))}
    stale = sorted(compiled - declared)
    assert not stale, "in aicraft._libac but no longer in ac.h (rebuild?): %s" % stale


def test_signatures_match_the_header(fresh):
    fresh_ffi, fresh_lib = fresh
    for name in sorted(declared_functions(header_text())):
        built = plain(ffi.typeof(ffi.addressof(lib, name)).cname)
        parsed = plain(fresh_ffi.typeof(getattr(fresh_lib, name)).cname)
        assert built == parsed, "%s: built as %s, header says %s" % (name, built, parsed)


def test_struct_layouts_match_the_header(fresh):
    fresh_ffi, _ = fresh
    block = strip_comments(cdef_block(header_text()))
    structs = set(re.findall(r"typedef\s+struct\s*(?:\w+\s*)?\{[^}]*\}\s*(\w+)\s*;", block))
    structs |= {"struct " + name for name in re.findall(r"^struct\s+(\w+)\s*\{", block, re.MULTILINE)}
    assert {"AcCheckpoint", "AcMemStats", "AcSlice", "struct AcTensor", "struct AcGradNode"} <= structs
    for struct in sorted(structs):
        assert ffi.sizeof(struct) == fresh_ffi.sizeof(struct), struct
        for field, _ in fresh_ffi.typeof(struct).fields:
            assert ffi.offsetof(struct, field) == fresh_ffi.offsetof(struct, field), (struct, field)


def test_constants_match_the_header(fresh):
    _, fresh_lib = fresh
    block = strip_comments(cdef_block(header_text()))
    names = set(re.findall(r"\b(AC_[A-Z0-9_]+)\s*=", block))
    names |= set(re.findall(r"#define\s+(AC_[A-Z0-9_]+)", block))
    assert {"AC_OK", "AC_ERR_SHAPE", "AC_MAX_DIMS", "AC_REDUCTION_MEAN"} <= names
    for name in sorted(names):
        assert getattr(lib, name) == getattr(fresh_lib, name), name


def test_import_adds_under_100_ms():
    """Best of 5 fresh interpreters. numpy, an allowed dependency, is imported
    first and timed apart: its own import time is the machine's. Bytecode
    caching is allowed, as in any installed environment."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(aicraft.__file__)),
                                         env.get("PYTHONPATH", "")])
    code = ("import time, numpy\n"
            "t = time.perf_counter()\n"
            "import aicraft\n"
            "print(time.perf_counter() - t)\n")
    times = []
    for _ in range(6):        # the first run may write bytecode caches
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True)
        times.append(float(out.stdout.strip()))
    best = min(times[1:])
    assert best < 0.100, "import aicraft took %.1f ms at best" % (best * 1000)
