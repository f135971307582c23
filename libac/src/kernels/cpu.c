/*
 * cpu.c - CPU feature detection and the AC_SIMD override, shared by every
 * kernel family that picks an instruction set at run time.
 *
 * Not here: the kernels, or the choice each family caches (gemm.c, vecmath.c).
 */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

int cpu_can_run(const char *simd)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (strcmp(simd, "avx512") == 0)   /* gemm_avx512.c also uses 256-bit FMAs */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    if (strcmp(simd, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (strcmp(simd, "avx512-vnni") == 0)   /* the int8 kernels' set (qgemm.c), not an AC_SIMD name */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return strcmp(simd, "generic") == 0;
}

const char *cpu_simd_default(void)
{
    static const char *const best_first[] = {"avx512", "avx2", "generic"};
    const size_t sets = sizeof best_first / sizeof best_first[0];
    const char *forced = getenv("AC_SIMD");
    size_t i;
    for (i = 0; forced && i < sets; i++)
        if (strcmp(forced, best_first[i]) == 0 && cpu_can_run(best_first[i])) return best_first[i];
    for (i = 0; i + 1 < sets; i++)
        if (cpu_can_run(best_first[i])) return best_first[i];
    return "generic";
}

int cpu_uses_avx512(void)
{
    static int known = -1;
    int value = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (value < 0) {
        value = strcmp(cpu_simd_default(), "avx512") == 0;
        __atomic_store_n(&known, value, __ATOMIC_RELAXED);
    }
    return value;
}
