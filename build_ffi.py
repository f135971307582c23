"""build_ffi.py - builds the compiled module aicraft._libac with CFFI in API mode.

The cdef is the block of libac/include/ac.h between the AC_CDEF markers, read at
build time, so the header stays the one source of truth (tests/test_header_cdef.py
checks that the built module matches it).
"""
import glob
import os

from cffi import FFI

ROOT = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(ROOT, "libac", "include", "ac.h")
CDEF_BEGIN = "/* AC_CDEF_BEGIN */"
CDEF_END = "/* AC_CDEF_END */"

# The callbacks C calls into Python: ac.gradcheck's fn (see aicraft/gradcheck.py) and
# the post-accumulate-grad hooks (aicraft/autograd.py).
PYTHON_CALLBACKS = """
extern "Python" AcTensor *_py_gradcheck_fn(AcTensor *const *inputs, int n_inputs, void *user);
extern "Python" int _py_grad_hook(AcTensor *leaf, void *user);
"""


def header_cdef(path=HEADER):
    """The text between the AC_CDEF markers of the public header."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin = text.find(CDEF_BEGIN)
    end = text.find(CDEF_END)
    if begin < 0 or end < begin:
        raise RuntimeError("%s: AC_CDEF_BEGIN/AC_CDEF_END markers not found" % path)
    return text[begin + len(CDEF_BEGIN):end]


def c_sources():
    """libac's C files, relative to the project root so setuptools accepts them."""
    patterns = ("libac/src/*.c", "libac/src/*/*.c", "libac/src/*/*/*.c")
    found = []
    for pattern in patterns:
        found.extend(glob.glob(os.path.join(ROOT, pattern)))
    return sorted(os.path.relpath(path, ROOT) for path in found)


# The destructor of the capsules Tensor.__dlpack__ makes (aicraft/dlpack.py): one no
# consumer took over still has the protocol's name and gives its tensor back. It
# takes the PyObject * as void *, as cdefs cannot name Python's types.
CAPSULE_DESTRUCTOR_CDEF = """
void _py_dlpack_capsule_destructor(void *capsule);
"""
CAPSULE_DESTRUCTOR = """
static void _py_dlpack_capsule_destructor(void *capsule)
{
    PyObject *c = (PyObject *)capsule;
    if (PyCapsule_IsValid(c, "dltensor_versioned"))
        ac_dlpack_delete(PyCapsule_GetPointer(c, "dltensor_versioned"), 1);
    else if (PyCapsule_IsValid(c, "dltensor"))
        ac_dlpack_delete(PyCapsule_GetPointer(c, "dltensor"), 0);
}
"""

ffibuilder = FFI()
ffibuilder.cdef(header_cdef() + PYTHON_CALLBACKS + CAPSULE_DESTRUCTOR_CDEF)
ffibuilder.set_source(
    "aicraft._libac",
    # cffi releases the GIL around each call: two Python threads can be inside
    # libac at once, which its per-thread scopes and thread pool allow.
    '#include "ac.h"\n' + CAPSULE_DESTRUCTOR,
    sources=c_sources(),
    include_dirs=[os.path.join("libac", "include"), os.path.join("libac", "src")],
    # No -ffast-math: NaN and inf must keep IEEE semantics.
    extra_compile_args=["-std=c99", "-O3", "-fno-math-errno", "-Wall"],
    libraries=["m", "pthread"],
)
