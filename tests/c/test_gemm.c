/*
 * test_gemm.c - ac_sgemm against a float64 reference, on every kernel set
 * this CPU can run (AVX-512, AVX2, generic), for all four transpose cases,
 * odd shapes, padded leading dimensions and alpha/beta variants; gemm_bias,
 * gemm_transposed_c and gemm_packed against plain gemm, bit for bit; and
 * ac_sgemm's argument checks.
 */
#define _POSIX_C_SOURCE 200809L

#include "ac.h"
#include "internal.h"
#include "kernels/gemm.h"
#include "test.h"

#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 88172645463325252ULL;

/* Uniform in [-1, 1), from a fixed xorshift sequence. */
static float next_value(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

static float *random_matrix(int64_t count)
{
    float *x = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
    int64_t i;
    for (i = 0; i < count; i++) x[i] = next_value();
    return x;
}

typedef struct {
    int trans_a, trans_b;
    int64_t m, n, k;
    int64_t pad;   /* added to every leading dimension */
    float alpha, beta;
} Case;

/*
 * Run one case and compare each element with a float64 reference; the error
 * may be 1e-4 of the sum of magnitudes that made the element, a bound that
 * grows with k as float32 rounding does.
 */
static int run_case(const Case *t)
{
    int64_t a_rows = t->trans_a ? t->k : t->m, a_cols = t->trans_a ? t->m : t->k;
    int64_t b_rows = t->trans_b ? t->n : t->k, b_cols = t->trans_b ? t->k : t->n;
    int64_t lda = (a_cols > 0 ? a_cols : 1) + t->pad, ldb = (b_cols > 0 ? b_cols : 1) + t->pad;
    int64_t ldc = (t->n > 0 ? t->n : 1) + t->pad;
    float *a = random_matrix(a_rows * lda), *b = random_matrix(b_rows * ldb);
    float *c = random_matrix(t->m * ldc), *c0 = malloc((size_t)(t->m * ldc + 1) * sizeof(float));
    int64_t i, j, p;
    int bad = 0;
    if (t->beta == 0.0f)
        for (i = 0; i < t->m * ldc; i++) c[i] = NAN;  /* must never be read */
    memcpy(c0, c, (size_t)(t->m * ldc) * sizeof(float));
    CHECK(ac_sgemm(t->trans_a, t->trans_b, t->m, t->n, t->k, t->alpha, a, lda, b, ldb,
                   t->beta, c, ldc) == AC_OK);
    for (i = 0; i < t->m; i++) {
        for (j = 0; j < ldc; j++) {
            double sum = 0.0, size = 0.0, want, got = c[i * ldc + j];
            if (j >= t->n) {  /* padding between rows stays as it was */
                if (memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)) != 0) bad++;
                continue;
            }
            for (p = 0; p < t->k; p++) {
                double x = t->trans_a ? a[p * lda + i] : a[i * lda + p];
                double y = t->trans_b ? b[j * ldb + p] : b[p * ldb + j];
                sum += x * y;
                size += fabs(x * y);
            }
            want = t->alpha * sum;
            size = fabs(t->alpha) * size;
            if (t->beta != 0.0f) {
                want += t->beta * (double)c0[i * ldc + j];
                size += fabs(t->beta * (double)c0[i * ldc + j]);
            }
            if (!(fabs(got - want) <= 1e-4 * size + 1e-30)) {
                if (bad < 3)
                    fprintf(stderr, "  %s %c%c m=%lld n=%lld k=%lld pad=%lld alpha=%g beta=%g: "
                            "C[%lld,%lld] = %.9g, expected %.9g\n", gemm_kernels_name(),
                            "NT"[t->trans_a], "NT"[t->trans_b], (long long)t->m,
                            (long long)t->n, (long long)t->k, (long long)t->pad, t->alpha,
                            t->beta, (long long)i, (long long)j, got, want);
                bad++;
            }
        }
    }
    CHECK(bad == 0);
    free(a);
    free(b);
    free(c);
    free(c0);
    return bad;
}

/* Sizes around the register tiles (4..32), the packing blocks (depth 512,
   columns 256, rows 3072 with AVX-512 here), the few-rows path (m <= 4: its
   column groups of 2, 4, 16 and 64, depth steps of 8 and 16, and a split
   over threads), the deepest transposed A read in place (64) and primes. */
static const int64_t shapes[][3] = {
    {1, 1, 1},     {1, 1, 700},   {2, 3, 1},     {3, 2, 5},     {5, 7, 11},
    {13, 17, 19},  {12, 32, 8},   {11, 31, 9},   {24, 64, 16},  {25, 65, 17},
    {37, 41, 43},  {97, 89, 83},  {64, 128, 50}, {1000, 3, 7},  {3, 1000, 7},
    {7, 3, 1000},  {130, 70, 700}, {61, 401, 37}, {101, 1, 101}, {1, 101, 101},
    {3100, 5, 3},  {4, 67, 33},   {1, 130, 784}, {2, 200, 17},  {4, 5, 1},
    {3, 4099, 300}, {100, 40, 64}, {100, 40, 65},
    /* a last panel of <= 8 of 32 columns, which AVX-512 splits as 24 + 16 */
    {50, 200, 70},  {13, 72, 9},
};

static void test_shapes_and_transposes(void)
{
    size_t s;
    int ta, tb;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (ta = 0; ta < 2; ta++) {
            for (tb = 0; tb < 2; tb++) {
                Case t = {0, 0, 0, 0, 0, 0, 1.0f, 0.0f};
                t.trans_a = ta;
                t.trans_b = tb;
                t.m = shapes[s][0];
                t.n = shapes[s][1];
                t.k = shapes[s][2];
                run_case(&t);
                t.pad = 5;
                t.alpha = -0.5f;
                t.beta = 0.75f;
                run_case(&t);
            }
        }
    }
}

static void test_alpha_beta(void)
{
    static const float pairs[][2] = {{1, 0}, {2.5f, 0}, {1, 1}, {-0.5f, 0.75f}, {0, 0}, {0, 2},
                                     {1, -1}};
    size_t i;
    int ta, tb;
    for (i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        for (ta = 0; ta < 2; ta++) {
            for (tb = 0; tb < 2; tb++) {
                Case t = {0, 0, 29, 45, 33, 3, 0.0f, 0.0f};
                t.trans_a = ta;
                t.trans_b = tb;
                t.alpha = pairs[i][0];
                t.beta = pairs[i][1];
                run_case(&t);
            }
        }
    }
}

/* Leading dimensions that are multiples of 512 floats take the packing paths
   (op(A) transposed at 512, untransposed at 1024). */
static void test_power_of_two_leading_dimensions(void)
{
    int ta, tb;
    for (ta = 0; ta < 2; ta++) {
        for (tb = 0; tb < 2; tb++) {
            Case t = {0, 0, 40, 50, 60, 0, 1.0f, 0.0f};
            t.trans_a = ta;
            t.trans_b = tb;
            t.pad = 512 - (ta ? t.m : t.k);  /* lda = 512 */
            run_case(&t);
            t.pad = 1024 - (ta ? t.m : t.k);  /* lda = 1024 */
            run_case(&t);
            t.pad = 1024 - 50;
            if (!ta && !tb) run_case(&t);   /* ldb = ldc = 1024 */
        }
    }
}

static void test_empty_sizes(void)
{
    static const int64_t empty[][3] = {{0, 0, 0}, {0, 5, 3}, {5, 0, 3}, {4, 5, 0}};
    size_t s;
    for (s = 0; s < sizeof empty / sizeof empty[0]; s++) {
        Case t = {0, 0, 0, 0, 0, 2, 1.0f, 0.0f};
        t.m = empty[s][0];
        t.n = empty[s][1];
        t.k = empty[s][2];
        run_case(&t);   /* k == 0 with beta == 0 clears NaN garbage */
        t.trans_a = t.trans_b = 1;
        t.beta = 0.5f;
        run_case(&t);
    }
    /* Nothing to touch: NULL is fine. */
    CHECK(ac_sgemm(0, 0, 0, 0, 0, 1.0f, NULL, 1, NULL, 1, 0.0f, NULL, 1) == AC_OK);
    CHECK(ac_sgemm(0, 0, 3, 4, 0, 1.0f, NULL, 1, NULL, 4, 0.0f, (float[12]){0}, 4) == AC_OK);
}

/*
 * The same bits on 1 and 2 threads (test_threads checks the default set for
 * more counts): rows split with op(B) kept or not, columns split, a few rows,
 * A-panels read in place (lda 512) and packed (lda 1024), the depth in slices.
 */
static void test_same_bits_on_two_threads(void)
{
    static const int64_t cases[][6] = {   /* trans_a, trans_b, m, n, k, lda */
        {0, 0, 300, 200, 700, 700}, {0, 0, 700, 600, 300, 300}, {0, 1, 64, 784, 128, 128},
        {1, 0, 784, 128, 64, 784},  {0, 0, 3, 4099, 300, 300}, {0, 0, 250, 90, 500, 512},
        {0, 0, 250, 90, 500, 1024}, {1, 1, 301, 299, 703, 512},
        {0, 0, 40, 1000, 300, 300},   /* columns split, with a split last panel */
    };
    size_t s;
    int threads = ac_get_num_threads();
    for (s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        int ta = (int)cases[s][0], tb = (int)cases[s][1];
        int64_t m = cases[s][2], n = cases[s][3], k = cases[s][4], lda = cases[s][5];
        float *a = random_matrix((ta ? k : m) * lda), *b = random_matrix(k * n);
        float *one = malloc((size_t)(m * n) * sizeof(float));
        float *two = malloc((size_t)(m * n) * sizeof(float));
        ac_set_num_threads(1);
        CHECK(ac_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, tb ? k : n, 0.0f, one, n) == AC_OK);
        ac_set_num_threads(2);
        CHECK(ac_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, tb ? k : n, 0.0f, two, n) == AC_OK);
        CHECK(memcmp(one, two, (size_t)(m * n) * sizeof(float)) == 0);
        free(a);
        free(b);
        free(one);
        free(two);
    }
    ac_set_num_threads(threads);
}

/* Shapes for the stores: few rows, short tiles at both edges, the depth in
   slices (also for full panels, whose column sums add up slice by slice),
   columns split over threads (with 2 threads), empty depth. */
static const int64_t store_shapes[][3] = {
    {1, 5, 7},   {3, 70, 20},  {4, 64, 300},  {13, 33, 9}, {29, 45, 33},
    {200, 300, 700}, {37, 1000, 64}, {50, 17, 1100}, {13, 70, 1000}, {6, 8, 0},
};

/*
 * gemm_bias gives the bits of the way Linear added its bias before: C filled
 * with the bias in every row, then gemm with beta = 1; on 1 and 2 threads.
 */
static void test_bias_in_the_store(void)
{
    size_t s;
    int tb, threads = ac_get_num_threads();
    for (s = 0; s < sizeof store_shapes / sizeof store_shapes[0]; s++) {
        for (tb = 0; tb < 2; tb++) {
            int64_t m = store_shapes[s][0], n = store_shapes[s][1], k = store_shapes[s][2];
            int64_t ldc = n + 3, i, count = m * ldc;
            float *a = random_matrix(m * k), *b = random_matrix(k * n), *bias = random_matrix(n);
            float *want = random_matrix(count), *got = malloc((size_t)count * sizeof(float));
            int t;
            memcpy(got, want, (size_t)count * sizeof(float));   /* the padding too */
            for (i = 0; i < m; i++) memcpy(want + i * ldc, bias, (size_t)n * sizeof(float));
            gemm(0, tb, m, n, k, -0.5f, a, k, b, tb ? k : n, 1.0f, want, ldc);
            for (t = 1; t <= 2; t++) {
                ac_set_num_threads(t);
                for (i = 0; i < m; i++) memset(got + i * ldc, 0xFF, (size_t)n * sizeof(float));
                gemm_bias(0, tb, m, n, k, -0.5f, a, k, b, tb ? k : n, bias, got, ldc);
                CHECK(memcmp(got, want, (size_t)count * sizeof(float)) == 0);
            }
            gemm_bias(0, tb, m, n, k, 0.0f, a, k, b, tb ? k : n, bias, got, ldc);  /* C = bias */
            CHECK(memcmp(got + (m - 1) * ldc, bias, (size_t)n * sizeof(float)) == 0);
            free(a);
            free(b);
            free(bias);
            free(want);
            free(got);
        }
    }
    ac_set_num_threads(threads);
}

/*
 * gemm_transposed_c stores the bits plain gemm computes, transposed, for
 * beta 0 (C never read: it holds NaN) and beta != 0, with op(A) transposed
 * or not, on 1 and 2 threads; the padding past m in each row of C^T stays.
 * Its column sums of B match float64 sums, with the same bits on 1 and 2
 * threads.
 */
static void test_transposed_store(void)
{
    static const float betas[] = {0.0f, 0.75f};
    size_t s, bi;
    int ta, threads = ac_get_num_threads();
    for (s = 0; s < sizeof store_shapes / sizeof store_shapes[0]; s++) {
        for (ta = 0; ta < 2; ta++) {
            for (bi = 0; bi < 2; bi++) {
                int64_t m = store_shapes[s][0], n = store_shapes[s][1], k = store_shapes[s][2];
                int64_t ldt = m + 2, i, j;
                float beta = betas[bi];
                float *a = random_matrix(m * k), *b = random_matrix(k * n);
                float *plain = random_matrix(m * n), *start = random_matrix(n * ldt);
                float *got = malloc((size_t)(n * ldt) * sizeof(float));
                float *sums = malloc((size_t)(2 * n + 1) * sizeof(float));
                int t, bad = 0;
                if (beta == 0.0f)
                    for (i = 0; i < n; i++)
                        for (j = 0; j < m; j++) start[i * ldt + j] = NAN;
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++) plain[i * n + j] = start[j * ldt + i];
                gemm(ta, 0, m, n, k, 1.5f, a, ta ? m : k, b, n, beta, plain, n);
                for (t = 1; t <= 2; t++) {
                    ac_set_num_threads(t);
                    memcpy(got, start, (size_t)(n * ldt) * sizeof(float));
                    gemm_transposed_c(ta, 0, m, n, k, 1.5f, a, ta ? m : k, b, n, beta, got, ldt,
                                      sums + (t - 1) * n);
                    for (j = 0; j < n; j++)
                        for (i = 0; i < ldt; i++) {
                            const float *w = i < m ? &plain[i * n + j] : &start[j * ldt + i];
                            bad += memcmp(&got[j * ldt + i], w, sizeof(float)) != 0;
                        }
                }
                for (j = 0; j < n; j++) {
                    double want = 0.0, size = 0.0;
                    for (i = 0; i < k; i++) {
                        want += b[i * n + j];
                        size += fabs(b[i * n + j]);
                    }
                    bad += !(fabs(sums[j] - want) <= 1e-5 * size);
                }
                CHECK(bad == 0);
                CHECK(memcmp(sums, sums + n, (size_t)n * sizeof(float)) == 0);
                free(a);
                free(b);
                free(plain);
                free(start);
                free(got);
                free(sums);
            }
        }
    }
    ac_set_num_threads(threads);
}

/*
 * gemm_packed from a gemm_pack_b copy gives gemm's bits, for op(B) transposed
 * or not, with alpha and beta, on 1 and 2 threads, for the shapes of an LSTM's steps
 * (20 x 800 x 200 forward, 20 x 200 x 800 backward), depths in slices,
 * columns in several blocks, a split last panel and an empty depth.
 */
static void test_packed_b(void)
{
    static const int64_t cases[][3] = {   /* m, n, k */
        {20, 800, 200}, {20, 200, 800}, {37, 520, 1000}, {13, 72, 9}, {3, 40, 33},
        {1, 7, 5},      {4, 5, 0},
    };
    size_t s;
    int tb, t, threads = ac_get_num_threads();
    ac_set_num_threads(1);
    for (s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        for (tb = 0; tb < 2; tb++) {
            int64_t m = cases[s][0], n = cases[s][1], k = cases[s][2], ldc = n + 3;
            float *a = random_matrix(m * k), *b = random_matrix(k * n), *start = random_matrix(m * ldc);
            float *want = malloc((size_t)(m * ldc) * sizeof(float));
            float *got = malloc((size_t)(m * ldc) * sizeof(float));
            float *panels = malloc((gemm_packed_b_floats(k, n) + 1) * sizeof(float));
            GemmPackedB packed = gemm_pack_b(tb, k, n, b, tb ? k : n, panels);
            int bad = 0;
            memcpy(want, start, (size_t)(m * ldc) * sizeof(float));
            gemm(0, tb, m, n, k, 1.5f, a, k, b, tb ? k : n, 0.25f, want, ldc);
            for (t = 1; t <= 2; t++) {
                ac_set_num_threads(t);
                memcpy(got, start, (size_t)(m * ldc) * sizeof(float));
                gemm_packed(m, 1.5f, a, k, &packed, 0.25f, got, ldc);
                bad += memcmp(got, want, (size_t)(m * ldc) * sizeof(float)) != 0;
            }
            CHECK(bad == 0);
            free(a);
            free(b);
            free(start);
            free(want);
            free(got);
            free(panels);
        }
    }
    ac_set_num_threads(threads);
}

static void test_every_kernel_set(void)
{
    static const char *const names[] = {"avx512", "avx2", "generic"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!gemm_use_kernels(names[i])) {
            printf("%s: this CPU has no %s, skipped\n", __FILE__, names[i]);
            continue;
        }
        CHECK(strcmp(gemm_kernels_name(), names[i]) == 0);
        RUN(test_shapes_and_transposes);
        RUN(test_alpha_beta);
        RUN(test_power_of_two_leading_dimensions);
        RUN(test_empty_sizes);
        RUN(test_same_bits_on_two_threads);
        RUN(test_bias_in_the_store);
        RUN(test_transposed_store);
        RUN(test_packed_b);
    }
    CHECK(gemm_use_kernels("no-such-set") == 0);
    CHECK(gemm_use_kernels(NULL) == 1);
}

/* A rejected call sets AC_ERR_ARG with a message naming sgemm, and leaves C alone. */
static void expect_rejected(int status, const float *c, size_t count)
{
    size_t i;
    int untouched = 1;
    CHECK(status == AC_ERR_ARG);
    CHECK(ac_last_error_code() == AC_ERR_ARG);
    CHECK(strncmp(ac_last_error(), "sgemm: ", 7) == 0);
    for (i = 0; i < count; i++) untouched &= c[i] == 7.0f;
    CHECK(untouched);
    ac_clear_error();
}

static void test_bad_arguments(void)
{
    float a[12], b[12], c[12];
    size_t i;
    for (i = 0; i < 12; i++) a[i] = b[i] = 1.0f, c[i] = 7.0f;
    /* A fits 3x4, B 4x3, C 3x3 */
    expect_rejected(ac_sgemm(2, 0, 3, 3, 4, 1, a, 4, b, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, -1, 3, 3, 4, 1, a, 4, b, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, -3, 3, 4, 1, a, 4, b, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, 3, -3, 4, 1, a, 4, b, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, 3, 3, -4, 1, a, 4, b, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, NULL, 4, b, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, a, 4, NULL, 3, 0, c, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, a, 4, b, 3, 0, NULL, 3), c, 12);
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, a, 3, b, 3, 0, c, 3), c, 12);  /* lda < k */
    expect_rejected(ac_sgemm(1, 0, 3, 3, 4, 1, a, 2, b, 3, 0, c, 3), c, 12);  /* lda < m */
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, a, 4, b, 2, 0, c, 3), c, 12);  /* ldb < n */
    expect_rejected(ac_sgemm(0, 1, 3, 3, 4, 1, a, 4, b, 3, 0, c, 3), c, 12);  /* ldb < k */
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, a, 4, b, 3, 0, c, 2), c, 12);  /* ldc < n */
    expect_rejected(ac_sgemm(0, 0, 3, 3, 4, 1, a, 4, b, 3, 0, c, 0), c, 12);
    expect_rejected(ac_sgemm(0, 0, (int64_t)1 << 40, 3, 4, 1, a, (int64_t)1 << 40, b, 3, 0, c,
                             3), c, 12);  /* too large to address */
    /* Still usable afterwards. */
    CHECK(ac_sgemm(0, 0, 3, 3, 4, 1, a, 4, b, 3, 0, c, 3) == AC_OK);
    CHECK(c[0] == 4.0f && c[8] == 4.0f);
}

/* Run this program again with AC_SIMD=generic; it reports the set it got. */
static void test_ac_simd_forces_a_set(char *self)
{
    pid_t child = fork();
    int status = -1;
    if (child == 0) {
        char *args[3];
        args[0] = self;
        args[1] = "--report-kernels";
        args[2] = NULL;
        setenv("AC_SIMD", "generic", 1);
        execv(self, args);
        _exit(99);
    }
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--report-kernels") == 0)
        return strcmp(gemm_kernels_name(), "generic") == 0 ? 0 : 1;
    RUN(test_every_kernel_set);
    RUN(test_bad_arguments);
    test_ac_simd_forces_a_set(argv[0]);
    return TEST_REPORT();
}
