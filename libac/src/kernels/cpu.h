/*
 * cpu.h - which SIMD instruction set the kernels use, decided in one place.
 *
 * The names are those AC_SIMD takes: "avx512" (AVX-512F), "avx2" (AVX2 and
 * FMA) and "generic" (portable C). Each kernel family (gemm, vecmath) keeps
 * its own table of functions per set and asks here which sets may run.
 */
#ifndef AC_CPU_H
#define AC_CPU_H

/* True when this CPU (and its OS) can run the named instruction set. */
int cpu_can_run(const char *simd);
/* AC_SIMD's set when this CPU can run it, else the best set it can run. */
const char *cpu_simd_default(void);
/* Whether that set is AVX-512: looked up once, as neither AC_SIMD nor the CPU
   changes while the process runs. */
int cpu_uses_avx512(void);

/* A function compiled for AVX-512, AVX2 and plain x86-64, the CPU picking at load
   time (GCC's target_clones): for loops the compiler vectorizes. Elementwise math
   without contraction gives the same bits on each. Not under ThreadSanitizer: the
   loader runs the clones' resolvers, which TSan instruments, before its runtime is
   up. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES
#endif

#endif /* AC_CPU_H */
