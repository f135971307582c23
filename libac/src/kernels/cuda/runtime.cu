/*
 * runtime.cu - cudart behind runtime.h: initialisation on first use, one stream
 * per device, device memory and copies. Built only with CUDA (AC_HAVE_CUDA).
 *
 * Nothing here runs when libac is loaded: cuda_device_count() initialises cudart
 * the first time a caller asks for a device, so a process that imports aicraft
 * and then forks (gunicorn --preload) has no CUDA state to inherit. (Loading
 * registers the kernels' fat binary with cudart, which touches no driver.)
 *
 * Not here: device arenas and caches (device_arena.c), kernels (the other .cu files).
 */
#include "runtime.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int g_initialized;
static int g_device_count;             /* >= 1, or 0 when none is usable */
static char g_reason[200];             /* why none is: cudart's message */
static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t g_streams[CUDA_MAX_DEVICES];
static int64_t g_mallocs;

static int cuda_error(const char *op, cudaError_t e)
{
    return error_set(AC_ERR_DEVICE, "%s: CUDA error: %s (%s)", op, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static void init(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n == 0) e = cudaErrorNoDevice;
    g_device_count = e == cudaSuccess ? (n < CUDA_MAX_DEVICES ? n : CUDA_MAX_DEVICES) : 0;
    if (e != cudaSuccess)
        snprintf(g_reason, sizeof g_reason, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();   /* a failed probe must not stick to the thread's later calls */
    __atomic_store_n(&g_initialized, 1, __ATOMIC_RELEASE);
}

extern "C" int cuda_device_count(void) { return cuda_check_device("cuda", 0) ? AC_ERR_DEVICE : g_device_count; }

extern "C" int cuda_initialized(void) { return __atomic_load_n(&g_initialized, __ATOMIC_ACQUIRE); }

extern "C" int cuda_check_device(const char *op, int device)
{
    int n;
    pthread_once(&init_once, init);
    n = g_device_count;
    if (n == 0) return error_set(AC_ERR_DEVICE, "%s: cuda:%d is not available: %s", op, device, g_reason);
    if (device < 0 || device >= n)
        return error_set(AC_ERR_DEVICE, "%s: cuda:%d is not available: %d CUDA device%s", op, device, n,
                         n == 1 ? "" : "s");
    return AC_OK;
}

/* Make device current on the calling thread (cudart keeps it per thread). */
static int use_device(const char *op, int device)
{
    cudaError_t e;
    int rc = cuda_check_device(op, device);
    if (rc) return rc;
    e = cudaSetDevice(device);
    return e == cudaSuccess ? AC_OK : cuda_error(op, e);
}

extern "C" void *cuda_stream_of(const char *op, int device)
{
    cudaStream_t s;
    if (use_device(op, device)) return NULL;
    s = __atomic_load_n(&g_streams[device], __ATOMIC_ACQUIRE);
    if (s) return (void *)s;
    pthread_mutex_lock(&stream_lock);
    s = g_streams[device];
    if (!s) {
        cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            pthread_mutex_unlock(&stream_lock);
            cuda_error(op, e);
            return NULL;
        }
        __atomic_store_n(&g_streams[device], s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&stream_lock);
    return (void *)s;
}

extern "C" void *cuda_current_stream(void)
{
    int device = 0;
    cudaStream_t s;
    if (cudaGetDevice(&device) != cudaSuccess) device = 0;
    s = __atomic_load_n(&g_streams[device], __ATOMIC_ACQUIRE);
    return s ? (void *)s : cuda_stream_of("cuda", device);
}

extern "C" void *cuda_malloc(int device, size_t bytes)
{
    void *p = NULL;
    cudaError_t e;
    if (use_device("alloc", device)) return NULL;
    e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        error_set(AC_ERR_MEMORY, "alloc: out of memory allocating %zu bytes on cuda:%d (%s)", bytes, device,
                  cudaGetErrorString(e));
        return NULL;
    }
    __atomic_add_fetch(&g_mallocs, 1, __ATOMIC_RELAXED);
    return p;
}

/* cudaFree waits for the device, so every kernel that used p has finished. */
extern "C" void cuda_free(int device, void *p)
{
    if (p && cudaSetDevice(device) == cudaSuccess) cudaFree(p);
}

static int copy(const char *op, int device, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                int wait)
{
    cudaStream_t s;
    cudaError_t e;
    if (bytes == 0) return AC_OK;
    s = (cudaStream_t)cuda_stream_of(op, device);
    if (!s) return AC_ERR_DEVICE;
    /* From pageable host memory the copy returns once src is staged, so it may be reused. */
    e = cudaMemcpyAsync(dst, src, bytes, kind, s);
    if (e == cudaSuccess && wait) e = cudaStreamSynchronize(s);
    return e == cudaSuccess ? AC_OK : cuda_error(op, e);
}

extern "C" int cuda_copy_to_device(int device, void *dst, const void *src, size_t bytes)
{
    return copy("to", device, dst, src, bytes, cudaMemcpyHostToDevice, 0);
}

extern "C" int cuda_copy_to_host(int device, void *dst, const void *src, size_t bytes)
{
    return copy("to", device, dst, src, bytes, cudaMemcpyDeviceToHost, 1);
}

extern "C" int cuda_copy_on_device(int device, void *dst, const void *src, size_t bytes)
{
    return copy("copy", device, dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
}

extern "C" int cuda_memset_zero(int device, void *p, size_t bytes)
{
    cudaStream_t s;
    cudaError_t e;
    if (bytes == 0) return AC_OK;
    s = (cudaStream_t)cuda_stream_of("zeros", device);
    if (!s) return AC_ERR_DEVICE;
    e = cudaMemsetAsync(p, 0, bytes, s);
    return e == cudaSuccess ? AC_OK : cuda_error("zeros", e);
}

extern "C" int cuda_synchronize(int device)
{
    int n, d;
    if (cuda_check_device("synchronize", device < 0 ? 0 : device)) return AC_ERR_DEVICE;
    n = g_device_count;
    for (d = device < 0 ? 0 : device; d < (device < 0 ? n : device + 1); d++) {
        cudaStream_t s;
        cudaError_t e;
        if (cuda_check_device("synchronize", d)) return AC_ERR_DEVICE;
        s = __atomic_load_n(&g_streams[d], __ATOMIC_ACQUIRE);
        if (!s) continue;   /* nothing was ever issued there */
        e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) return cuda_error("synchronize", e);
    }
    return AC_OK;
}

extern "C" int cuda_check_launch(const char *op)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? AC_OK : cuda_error(op, e);
}

extern "C" int64_t cuda_malloc_count(void) { return __atomic_load_n(&g_mallocs, __ATOMIC_RELAXED); }

typedef struct {
    void *p[CUDA_MAX_DEVICES];
    size_t bytes[CUDA_MAX_DEVICES];
} Scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *arg)
{
    Scratch *s = (Scratch *)arg;
    for (int d = 0; d < CUDA_MAX_DEVICES; d++) cuda_free(d, s->p[d]);
    free(s);
}

static void scratch_key_create(void) { pthread_key_create(&scratch_key, scratch_free); }

extern "C" void *cuda_scratch(size_t bytes)
{
    Scratch *s;
    int device = 0;
    pthread_once(&scratch_once, scratch_key_create);
    s = (Scratch *)pthread_getspecific(scratch_key);
    if (!s) {
        s = (Scratch *)calloc(1, sizeof *s);
        if (!s) {
            error_set(AC_ERR_MEMORY, "cuda: out of memory");
            return NULL;
        }
        pthread_setspecific(scratch_key, s);
    }
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= CUDA_MAX_DEVICES) device = 0;
    if (s->bytes[device] < bytes) {
        size_t grown = bytes < 2 * s->bytes[device] ? 2 * s->bytes[device] : bytes;
        void *p = cuda_malloc(device, grown);
        if (!p) return NULL;
        cuda_free(device, s->p[device]);   /* waits for the kernels that used it */
        s->p[device] = p;
        s->bytes[device] = grown;
    }
    return s->p[device];
}
