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

#include <stddef.h>
#include <stdint.h>

/* x rows are padded to a multiple of this many bytes (zeros past k). */
#define QGEMM_K_ALIGN 64
/* w may be read this many bytes past the end of its last row (the block that
   holds it has them, zeroed). */
#define QGEMM_SLACK 64

/*
 * w packed for batches: the columns in panels of QGEMM_PANEL_COLS, each panel
 * k rounded up to 4 bytes deep, 4 bytes of each column after the other: byte
 * (d * QGEMM_PANEL_COLS + c) * 4 + b of panel g is w[g * QGEMM_PANEL_COLS + c]
 * [4d + b], zero past n and k. A vector over a panel's 4-byte groups holds one
 * output column per 32-bit lane, so a tile sums down k with no sums across
 * lanes. sums[j] is the sum of w's row j (zero past n), for x_plus_128.
 */
#define QGEMM_PANEL_COLS 16

typedef struct {
    int64_t n, k, depth;   /* depth: k rounded up to 4 */
    int8_t *w;             /* ceil(n / QGEMM_PANEL_COLS) panels of depth * QGEMM_PANEL_COLS bytes */
    int32_t *sums;         /* ceil(n / QGEMM_PANEL_COLS) * QGEMM_PANEL_COLS */
} QPanels;

/* Bytes of the panels of an (n, k) weight (both arrays, 64-byte aligned pieces). */
size_t qgemm_panels_bytes(int64_t n, int64_t k);
/* Pack w (n, k rows) into mem (qgemm_panels_bytes(n, k), 64-byte aligned). */
void qgemm_pack_panels(const int8_t *w, int64_t n, int64_t k, void *mem, QPanels *panels);

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
    /* The same w packed, starting at column 0 of the job (whose first column is
       then a multiple of QGEMM_PANEL_COLS), or NULL. */
    const int8_t *panels;
    const int32_t *sums;     /* the panels' row sums from the job's column 0 */
    int64_t depth;           /* the panels' */
} QDotJob;

typedef void (*QDotFn)(const QDotJob *job);

typedef struct {
    const char *name;   /* "avx512-vnni", "avx2" or "generic" */
    int x_plus_128;     /* x is stored offset by 128 (unsigned) */
    QDotFn dot;
    QDotFn dot_panels;  /* the product from job->panels; NULL: dot (the portable set) */
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
