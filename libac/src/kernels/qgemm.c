/*
 * qgemm.c - which int8 kernel set runs: picked once from AC_SIMD and the CPU
 * (cpu.c), or by a test.
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
