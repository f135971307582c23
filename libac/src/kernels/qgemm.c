/*
 * qgemm.c - which int8 kernel set runs: picked once from AC_SIMD and the CPU
 * (cpu.c), or by a test; and the packing of weights into panels (qgemm.h).
 *
 * Not here: the kernels (qgemm_*.c) or quantization and threads (ops/qlinear.c).
 */
#include "cpu.h"
#include "qgemm.h"

#include <string.h>

/* The named set, or NULL when this CPU cannot run it (or there is none). */
static const QGemmKernels *kernels_named(const char *name)
{
    if (!cpu_can_run(name)) return NULL;
#if defined(__x86_64__) || defined(__i386__)
    if (strcmp(name, "avx512-vnni") == 0) return &qgemm_avx512_vnni_kernels;
    if (strcmp(name, "avx2") == 0) return &qgemm_avx2_kernels;
#endif
    return strcmp(name, "generic") == 0 ? &qgemm_generic_kernels : NULL;
}

/* The int8 set for an AC_SIMD set: AVX-512 without VNNI runs the AVX2 one. */
static const QGemmKernels *kernels_for_simd(const char *simd)
{
    const QGemmKernels *kern = NULL;
    if (strcmp(simd, "avx512") == 0) kern = kernels_named("avx512-vnni");
    if (!kern && strcmp(simd, "generic") != 0) kern = kernels_named("avx2");
    return kern ? kern : &qgemm_generic_kernels;
}

static const QGemmKernels *active_kernels;

static int64_t panel_count(int64_t n) { return (n + QGEMM_PANEL_COLS - 1) / QGEMM_PANEL_COLS; }
static size_t round_up64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t qgemm_panels_bytes(int64_t n, int64_t k)
{
    size_t cols = (size_t)(panel_count(n) * QGEMM_PANEL_COLS);
    return round_up64(cols * (size_t)((k + 3) & ~(int64_t)3)) + round_up64(cols * sizeof(int32_t));
}

void qgemm_pack_panels(const int8_t *w, int64_t n, int64_t k, void *mem, QPanels *panels)
{
    const int64_t depth = (k + 3) & ~(int64_t)3, cols = panel_count(n) * QGEMM_PANEL_COLS;
    int64_t j, d, b;
    panels->n = n;
    panels->k = k;
    panels->depth = depth;
    panels->w = mem;
    panels->sums = (int32_t *)(void *)((char *)mem + round_up64((size_t)(cols * depth)));
    for (j = 0; j < cols; j++) {
        /* column j's 4-byte groups, QGEMM_PANEL_COLS * 4 bytes apart in its panel */
        int8_t *dst = panels->w + (j / QGEMM_PANEL_COLS) * depth * QGEMM_PANEL_COLS +
                      (j % QGEMM_PANEL_COLS) * 4;
        const int8_t *row = w + j * k;
        int32_t sum = 0;
        for (d = 0; d < depth; d += 4, dst += QGEMM_PANEL_COLS * 4)
            for (b = 0; b < 4; b++) {
                int8_t v = j < n && d + b < k ? row[d + b] : 0;
                dst[b] = v;
                sum += v;
            }
        panels->sums[j] = sum;
    }
}

const QGemmKernels *qgemm_kernels(void)
{
    const QGemmKernels *kern = __atomic_load_n(&active_kernels, __ATOMIC_ACQUIRE);
    if (!kern) {
        kern = kernels_for_simd(cpu_simd_default());
        __atomic_store_n(&active_kernels, kern, __ATOMIC_RELEASE);
    }
    return kern;
}

int qgemm_use_kernels(const char *name)
{
    const QGemmKernels *kern = name ? kernels_named(name) : kernels_for_simd(cpu_simd_default());
    if (!kern) return 0;
    __atomic_store_n(&active_kernels, kern, __ATOMIC_RELEASE);
    return 1;
}
