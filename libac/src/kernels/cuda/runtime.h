/*
 * runtime.h - the CUDA runtime as libac's C files see it: device count, memory,
 * copies and the one stream per device, behind plain C functions.
 *
 * runtime.cu implements them with cudart in a build with CUDA (AC_HAVE_CUDA);
 * cuda.c implements them in a build without, each failing with "this build has
 * no CUDA". Every failure sets the calling thread's error (AC_ERR_DEVICE and
 * cudart's message) and returns NULL or a negative status; nothing aborts.
 * Kernels launch on cuda_stream(device): one stream per device, so work runs in
 * the order it was issued, and memory a scope freed can be reused by the next
 * kernel without a wait (it runs after the kernels that read the old tensor).
 */
#ifndef AC_CUDA_RUNTIME_H
#define AC_CUDA_RUNTIME_H

#include "ac.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_MAX_DEVICES 8

/* error.c's, declared here too for runtime.cu, which cannot include internal.h (C99, not C++). */
int error_set(int code, const char *fmt, ...);

/* The number of devices (>= 1), initialising cudart on the first call; < 0 when
   there is no usable device, with the reason. Only this initialises CUDA. */
int cuda_device_count(void);
/* 1 once cuda_device_count has run (whatever it found), else 0. */
int cuda_initialized(void);
/* AC_OK when device is an index below the device count (op names the caller). */
int cuda_check_device(const char *op, int device);
/* Device memory from cudaMalloc, counted in cuda_mallocs; NULL on failure. */
void *cuda_malloc(int device, size_t bytes);
void cuda_free(int device, void *p);
/* Copies on device's stream: host to device returns once src may be reused,
   device to host once dst holds the data (it waits for the stream). */
int cuda_copy_to_device(int device, void *dst, const void *src, size_t bytes);
int cuda_copy_to_host(int device, void *dst, const void *src, size_t bytes);
int cuda_copy_on_device(int device, void *dst, const void *src, size_t bytes);
int cuda_memset_zero(int device, void *p, size_t bytes);
/* Wait for device's stream; device < 0: every device initialised so far. */
int cuda_synchronize(int device);
/* The cudaStream_t of device, as void *; NULL (and the error) on failure. */
void *cuda_stream(int device);
/* After kernel launches: AC_OK, or the launch's error naming op. */
int cuda_check_launch(const char *op);
/* cudaMalloc calls made so far (AcMemStats.cuda_mallocs). */
int64_t cuda_malloc_count(void);

#ifdef __cplusplus
}
#endif

#endif /* AC_CUDA_RUNTIME_H */
