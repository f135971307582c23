/*
 * cuda.c - the public ac_cuda_* calls, and runtime.h's functions for a build
 * without CUDA.
 *
 * With CUDA (AC_HAVE_CUDA, set by the build when nvcc is found) the runtime is
 * kernels/cuda/runtime.cu; without, every runtime function below reports that
 * this build has no CUDA, so the rest of libac calls the same functions either
 * way and the CPU-only build links no CUDA at all.
 *
 * Not here: device memory (device_arena.c), kernels (kernels/cuda/).
 */
#include "internal.h"
#include "kernels/cuda/runtime.h"

int ac_cuda_is_built(void)
{
#ifdef AC_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int ac_cuda_is_available(void)
{
    int n = cuda_device_count();
    if (n < 0) ac_clear_error();   /* "no" is this call's answer, not an error */
    return n > 0;
}

int ac_cuda_device_count(void) { return cuda_device_count(); }

int ac_cuda_is_initialized(void) { return cuda_initialized(); }

int ac_cuda_synchronize(int device)
{
    if (device < -1)
        return error_set(AC_ERR_ARG, "cuda_synchronize: device %d is not an index (or -1 for all)", device);
    return cuda_synchronize(device);
}

static int g_allow_tf32;

int ac_cuda_set_allow_tf32(int allow)
{
    if (allow != 0 && allow != 1)
        return error_set(AC_ERR_ARG, "cuda_set_allow_tf32: allow is %d, not 0 or 1", allow);
    __atomic_store_n(&g_allow_tf32, allow, __ATOMIC_RELAXED);
    return AC_OK;
}

int ac_cuda_allow_tf32(void) { return __atomic_load_n(&g_allow_tf32, __ATOMIC_RELAXED); }

#ifndef AC_HAVE_CUDA

int cuda_check_device(const char *op, int device)
{
    return error_set(AC_ERR_DEVICE, "%s: cuda:%d is not available: this build of libac has no CUDA "
                     "(built without nvcc, or with AC_CUDA=0)", op, device);
}
int cuda_device_count(void) { return cuda_check_device("cuda", 0); }
int cuda_initialized(void) { return 0; }
void *cuda_malloc(int device, size_t bytes)
{
    (void)bytes;
    cuda_check_device("alloc", device);
    return NULL;
}
void cuda_free(int device, void *p)
{
    (void)device;
    (void)p;
}
int cuda_copy_to_device(int device, void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return cuda_check_device("to", device);
}
int cuda_copy_to_host(int device, void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return cuda_check_device("to", device);
}
int cuda_copy_on_device(int device, void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return cuda_check_device("copy", device);
}
int cuda_memset_zero(int device, void *p, size_t bytes)
{
    (void)p, (void)bytes;
    return cuda_check_device("zeros", device);
}
int cuda_synchronize(int device) { return cuda_check_device("synchronize", device < 0 ? 0 : device); }
void *cuda_stream_of(const char *op, int device)
{
    cuda_check_device(op, device);
    return NULL;
}
void *cuda_current_stream(void) { return cuda_stream_of("cuda", 0); }
int cuda_check_launch(const char *op) { return cuda_check_device(op, 0); }
void *cuda_scratch(size_t bytes)
{
    (void)bytes;
    cuda_check_device("cuda", 0);
    return NULL;
}
int64_t cuda_malloc_count(void) { return 0; }

#endif /* AC_HAVE_CUDA */
