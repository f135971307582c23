/*
 * qgemm.h - the contract between the int8 driver (ops/qlinear.c) and its
 * kernels: exact int32 dot products of quantized rows, out = x w^T.
 *
 * Each instruction set supplies one routine over a whole block; the driver
 * cuts the block per thread and turns the sums into floats. Integer sums are
 * exact, so every set gives the same results.
 */
#ifndef AC_QGEMM_H
#define AC_QGEMM_H

#include <stdint.h>

/* x rows are padded to a multiple of this many bytes (zeros past k). */
#define QGEMM_K_ALIGN 64
/* w may be read this many bytes past the end of its last row (the block that
   holds it has them, zeroed). */
#define QGEMM_SLACK 64

/*
 * out[i*ld_out + j] = sum_{p < k} x(i, p) * w[j*k + p] for i < m, j < n.
 * x(i, p) is int8 in [-127, 127], stored at x[i*ld_x + p] as its two's
 * complement, or as x + 128 when the set's x_plus_128 is set; ld_x is a
 * multiple of QGEMM_K_ALIGN and bytes p in [k, ld_x) are zero. w is int8,
 * any value, rows contiguous (k bytes each).
 */
typedef struct {
    int64_t m, n, k;
    const uint8_t *x;
    int64_t ld_x;
    const int8_t *w;
    int32_t *out;
    int64_t ld_out;
} QDotJob;

typedef void (*QDotFn)(const QDotJob *job);

typedef struct {
    const char *name;   /* "avx512-vnni", "avx2" or "generic" */
    int x_plus_128;     /* x is stored offset by 128 (unsigned) */
    QDotFn dot;
} QGemmKernels;

extern const QGemmKernels qgemm_generic_kernels;
#if defined(__x86_64__) || defined(__i386__)
extern const QGemmKernels qgemm_avx2_kernels;
extern const QGemmKernels qgemm_avx512_vnni_kernels;
#endif

/* The set in use: AC_SIMD=avx512 (or the CPU's best) gives avx512-vnni where the
   CPU has AVX-512 VNNI and BW, else avx2; avx2 gives avx2; generic generic. */
const QGemmKernels *qgemm_kernels(void);
/* Make later calls use the named set, or for NULL the one AC_SIMD or the CPU
   picks. Returns 1, or 0 (changing nothing) when this CPU cannot run it. For tests. */
int qgemm_use_kernels(const char *name);

#endif /* AC_QGEMM_H */
