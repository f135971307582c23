/*
 * gemm.h - the contract between the SGEMM driver (gemm.c) and its kernels.
 *
 * The driver cuts C into blocks, packs slices of op(A) and op(B) into
 * panels, and hands pairs of panels to a register-tiled micro-kernel. Each
 * instruction set (generic C, AVX2+FMA, AVX-512F) supplies a micro-kernel
 * and a packing routine; gemm.c picks one set at run time.
 */
#ifndef AC_GEMM_H
#define AC_GEMM_H

#include <stdint.h>

/*
 * Pack the rows x depth matrix X into panels of `width` rows: panel q holds
 * rows [q*width, q*width + width), stored depth-major (panel[p*width + r]),
 * and the rows past `rows` in the last panel are zero. X(r, p) is
 * x[r*ld + p] when depth_contiguous, else x[p*ld + r].
 * op(A) is packed as X = op(A) with width mr; op(B) as X = op(B)^T with width nr.
 */
typedef void (*GemmPackFn)(const float *x, int64_t ld, int depth_contiguous,
                           int rows, int depth, int width, float *dst);

/*
 * One register tile: C[0:m, 0:n] = alpha * A * B + beta * C, with A of mr x kc
 * and B a packed panel of kc x nr (m <= mr and n <= nr say how much of the
 * tile lies inside C). A(i, p) is a[i*a_row + p*a_depth]: a packed panel
 * (a_row 1, a_depth mr) or mr full rows of op(A) read in place (a_depth 1).
 * When b_source is set (only for a full panel, n == nr), the kernel packs
 * the panel as it goes: row p of B is read at b_source + p*ldb and also
 * stored to the panel at b. When beta == 0, C is only written, never read
 * (it may hold NaN).
 */
typedef struct {
    int kc, m, n;
    const float *a;
    int64_t a_row, a_depth;
    float *b;
    const float *b_source;
    int64_t ldb;
    float *c;
    int64_t ldc;
    float alpha, beta;
} GemmTile;

typedef void (*GemmKernelFn)(const GemmTile *tile);

typedef struct {
    const char *name;   /* "avx512", "avx2" or "generic", as AC_SIMD spells it */
    int mr, nr;         /* the register tile */
    GemmPackFn pack;
    GemmKernelFn kernel;
} GemmKernels;

extern const GemmKernels gemm_generic_kernels;
#if defined(__x86_64__) || defined(__i386__)
extern const GemmKernels gemm_avx2_kernels;
extern const GemmKernels gemm_avx512_kernels;
#endif

/*
 * Make every later gemm() use the named kernel set ("avx512", "avx2",
 * "generic"), or, for NULL, the one AC_SIMD or the CPU picks. Returns 1, or 0
 * (changing nothing) when this CPU cannot run the named set. For tests.
 */
int gemm_use_kernels(const char *name);
/* The name of the kernel set gemm() uses now. */
const char *gemm_kernels_name(void);

#endif /* AC_GEMM_H */
