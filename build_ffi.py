"""build_ffi.py - builds the compiled module aicraft._libac with CFFI in API mode.

The cdef is the block of libac/include/ac.h between the AC_CDEF markers, read at
build time, so the header stays the one source of truth (tests/test_header_cdef.py
checks that the built module matches it).

The CUDA backend is built when nvcc is found (NVCC, else PATH) unless AC_CUDA=0,
as the Makefile does: setup.py compiles cuda_sources() with nvcc_command() and
links their objects with cudart, statically.
"""
import glob
import os
import shutil
import subprocess

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
extern "Python" int _py_function_backward(void *user, const AcTensor *grad_out, AcTensor **grad_in, int n_inputs);
extern "Python" void _py_function_release(void *ctx);
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


def nvcc():
    """The nvcc to build the CUDA backend with, or None to build without it."""
    if os.environ.get("AC_CUDA", "") == "0":
        return None
    found = os.environ.get("NVCC") or shutil.which("nvcc")
    return found


NVCC = nvcc()
# Same flags as the Makefile's NVCCFLAGS: sm_90 code and PTX for later GPUs.
NVCC_FLAGS = ["-O3", "-std=c++20", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
              "-Werror", "all-warnings", "-Xcompiler", "-fPIC,-fno-exceptions,-fno-threadsafe-statics,-Wall,-Wextra,-Wno-missing-field-initializers",
              "-I" + os.path.join("libac", "include"), "-I" + os.path.join("libac", "src")]


def cuda_home():
    """nvcc's install (its TOP), even when NVCC is a wrapper script."""
    out = subprocess.run([NVCC, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
                         capture_output=True, text=True).stderr
    top = [line[len("#$ TOP="):] for line in out.splitlines() if line.startswith("#$ TOP=")]
    if not top:
        raise RuntimeError("build_ffi: cannot find where %s is installed (AC_CUDA=0 builds without CUDA)" % NVCC)
    return os.path.realpath(top[0])


CUDA_LIB_DIR = os.path.join(cuda_home(), "lib64") if NVCC else None


def cuda_sources():
    """The .cu files, relative to the project root; none when CUDA is not built."""
    found = glob.glob(os.path.join(ROOT, "libac", "src", "kernels", "cuda", "*.cu")) if NVCC else []
    return sorted(os.path.relpath(path, ROOT) for path in found)


def nvcc_command(source, obj):
    return [NVCC] + NVCC_FLAGS + ["-c", source, "-o", obj]


def cuda_flag_file():
    """build/cuda.flag holding whether CUDA is built (shared with the Makefile): the
    extension depends on it, so switching AC_CUDA rebuilds it."""
    path = os.path.join(ROOT, "build", "cuda.flag")
    flag = "1\n" if NVCC else "0\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path) or open(path).read() != flag:
        with open(path, "w") as f:
            f.write(flag)
    return os.path.relpath(path, ROOT)


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
    # No -ffast-math: NaN and inf must keep IEEE semantics. Nothing interposes
    # libac's functions inside the module, so calls between them bind locally
    # (no PLT hop, inlined within a file): 0.07 us of a compiled FDUAI step.
    extra_compile_args=["-std=c99", "-O3", "-fno-math-errno", "-Wall", "-fno-semantic-interposition"],
    define_macros=[("AC_HAVE_CUDA", "1")] if NVCC else [],
    library_dirs=[CUDA_LIB_DIR] if NVCC else [],
    libraries=["m", "pthread"] + (["cudart_static", "dl", "rt"] if NVCC else []),
    depends=[cuda_flag_file()] + cuda_sources() + [
        os.path.relpath(h, ROOT) for h in glob.glob(os.path.join(ROOT, "libac", "src", "kernels", "cuda", "*.h"))],
)
