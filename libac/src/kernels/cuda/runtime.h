/*
 * runtime.h - the CUDA runtime as libac's C files see it: device count, memory,
 * copies and the one stream per device, behind plain C functions.
 *
 * runtime.cu implements them with cudart in a build with CUDA (AC_HAVE_CUDA);
 * cuda.c implements them in a build without, each failing with "this build has
 * no CUDA". Every failure sets the calling thread's error (AC_ERR_DEVICE and
 * cudart's message) and returns NULL or a negative status; nothing aborts.
 * Kernels launch on their device's stream: one stream per device, so work runs in
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

/* AC_OK when cuda:device can be used; else AC_ERR_DEVICE naming op, the device
   and the reason ("op: cuda:0 is not available: CUDA driver version is ...").
   The first call initialises cudart; nothing else does. */
int cuda_check_device(const char *op, int device);
/* The number of usable devices (>= 1), or < 0 with the reason. */
int cuda_device_count(void);
/* 1 once cudart was initialised (whatever it found), else 0. */
int cuda_initialized(void);
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
/* Make device the calling thread's current one and return its cudaStream_t (as
   void *); NULL and the error, naming op, on failure. */
void *cuda_stream_of(const char *op, int device);
/* The stream of the calling thread's current device (the one the last
   cuda_stream_of made current): for kernels that are given no device. */
void *cuda_current_stream(void);
/* Device memory for a kernel's temporaries on the current device: one buffer per
   thread and device, grown as needed (counted in cuda_mallocs, so flat once
   warm); valid until the thread's next cuda_scratch. Reusing it at once is
   safe: the kernels that read it run before any issued later. */
void *cuda_scratch(size_t bytes);
/* After kernel launches: AC_OK, or the launch's error naming op. */
int cuda_check_launch(const char *op);
/* cudaMalloc calls made so far (AcMemStats.cuda_mallocs). */
int64_t cuda_malloc_count(void);

#ifdef __cplusplus
}
#endif

#endif /* AC_CUDA_RUNTIME_H */
