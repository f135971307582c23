/*
 * test_threads.c - the thread pool: parallel_for covers its range once, nested
 * calls run, several threads may call at once, a forked child can use the
 * pool, AC_NUM_THREADS is honoured, and sgemm gives bit-identical results for
 * any thread count.
 */
#define _POSIX_C_SOURCE 200809L

#include "internal.h"
#include "test.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- parallel_for covers [0, n) exactly once ------------------------------ */

typedef struct {
    int *hits;
    int64_t n;
} Cover;

static void count_hits(void *ctx, int64_t begin, int64_t end)
{
    Cover *cover = ctx;
    int64_t i;
    for (i = begin; i < end; i++) __atomic_fetch_add(&cover->hits[i], 1, __ATOMIC_RELAXED);
}

/* 1 when parallel_for(n, grain) called fn exactly once for every index. */
static int covers_once(int64_t n, int64_t grain)
{
    Cover cover;
    int64_t i;
    int ok = 1;
    cover.hits = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    cover.n = n;
    parallel_for(n, grain, count_hits, &cover);
    for (i = 0; i < n; i++) ok &= cover.hits[i] == 1;
    free(cover.hits);
    return ok;
}

static void test_parallel_for_covers_range(void)
{
    static const int64_t sizes[][2] = {{0, 1}, {1, 1}, {2, 1}, {7, 3}, {100, 1},
                                       {1000, 10}, {100003, 1000}, {5, 100}};
    int threads;
    size_t s;
    for (threads = 1; threads <= 4; threads++) {
        CHECK(ac_set_num_threads(threads) == AC_OK);
        CHECK(ac_get_num_threads() == threads);
        for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            CHECK(covers_once(sizes[s][0], sizes[s][1]));
    }
}

/* ---- nested calls run serially instead of deadlocking --------------------- */

static void nested_inner(void *ctx, int64_t begin, int64_t end)
{
    count_hits(ctx, begin, end);
}

static void nested_outer(void *ctx, int64_t begin, int64_t end)
{
    Cover *cover = ctx;
    int64_t i;
    for (i = begin; i < end; i++) {
        Cover row;
        row.hits = cover->hits + i * 64;
        row.n = 64;
        parallel_for(64, 1, nested_inner, &row);
    }
}

static void test_nested_parallel_for(void)
{
    Cover cover;
    int64_t i;
    int ok = 1;
    ac_set_num_threads(2);
    cover.hits = calloc(32 * 64, sizeof(int));
    cover.n = 32 * 64;
    parallel_for(32, 1, nested_outer, &cover);
    for (i = 0; i < 32 * 64; i++) ok &= cover.hits[i] == 1;
    CHECK(ok);
    free(cover.hits);
}

/* ---- sgemm helpers --------------------------------------------------------- */

static float *filled(int64_t count, unsigned seed)
{
    float *x = malloc((size_t)count * sizeof(float));
    int64_t i;
    for (i = 0; i < count; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
    }
    return x;
}

/* C = op(A) op(B) for fresh random operands, or NULL if sgemm failed; the
   caller frees the result. Safe to call from several threads. */
static float *product(int ta, int tb, int64_t m, int64_t n, int64_t k, unsigned seed)
{
    float *a = filled(m * k, seed), *b = filled(k * n, seed + 1);
    float *c = malloc((size_t)(m * n) * sizeof(float));
    if (ac_sgemm(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n) != AC_OK) {
        free(c);
        c = NULL;
    }
    free(a);
    free(b);
    return c;
}

/* 1 when both products exist and hold the same bits. */
static int same_bits(const float *x, const float *y, int64_t count)
{
    return x && y && memcmp(x, y, (size_t)count * sizeof(float)) == 0;
}

/* ---- determinism: the same bits for any thread count ---------------------- */

static void test_sgemm_same_bits_for_any_thread_count(void)
{
    static const int64_t shapes[][5] = {
        {0, 0, 64, 128, 784}, {1, 0, 784, 128, 64}, {0, 1, 64, 784, 128},
        {0, 0, 256, 256, 256}, {1, 1, 301, 299, 703}, {0, 0, 1000, 37, 515},
        {0, 1, 37, 1000, 515}, {0, 0, 130, 130, 1500}, {0, 1, 3, 4099, 700},
        {0, 0, 2, 4099, 700}, {1, 1, 509, 61, 1030}, {0, 1, 777, 250, 97},
    };
    size_t s;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int ta = (int)shapes[s][0], tb = (int)shapes[s][1], threads;
        int64_t m = shapes[s][2], n = shapes[s][3], k = shapes[s][4];
        float *one;
        ac_set_num_threads(1);
        one = product(ta, tb, m, n, k, (unsigned)s);
        for (threads = 2; threads <= 4; threads++) {
            float *many;
            ac_set_num_threads(threads);
            many = product(ta, tb, m, n, k, (unsigned)s);
            CHECK(same_bits(one, many, m * n));
            free(many);
        }
        free(one);
    }
}

/*
 * Threads that split the rows of C keep op(B) packed for the whole job; the
 * next job, with other values in the same arrays, must pack its own. Each
 * product on 2 threads is checked against the same one on 1 thread.
 */
static void test_sgemm_next_job_packs_its_own_b(void)
{
    const int64_t m = 300, n = 200, k = 700;   /* rows split, B kept, two depth slices */
    float *a = filled(m * k, 7), *b = malloc((size_t)(k * n) * sizeof(float));
    float *one = malloc((size_t)(m * n) * sizeof(float));
    float *two = malloc((size_t)(m * n) * sizeof(float));
    unsigned round;
    for (round = 0; round < 3; round++) {
        float *values = filled(k * n, 100 + round);
        memcpy(b, values, (size_t)(k * n) * sizeof(float));
        free(values);
        ac_set_num_threads(1);
        CHECK(ac_sgemm(0, round == 2, m, n, k, 1.0f, a, k, b, round == 2 ? k : n, 0.0f, one,
                       n) == AC_OK);
        ac_set_num_threads(2);
        CHECK(ac_sgemm(0, round == 2, m, n, k, 1.0f, a, k, b, round == 2 ? k : n, 0.0f, two,
                       n) == AC_OK);
        CHECK(same_bits(one, two, m * n));
    }
    free(a);
    free(b);
    free(one);
    free(two);
}

/* ---- several caller threads at once --------------------------------------- */

enum { CALLER_SHAPES = 6 };
static float *caller_references[CALLER_SHAPES];

static int64_t caller_size(int shape) { return 20 + shape * 37; }

/* The products the callers compute, made first by one thread alone. */
static void make_caller_references(void)
{
    int s;
    for (s = 0; s < CALLER_SHAPES; s++) {
        int64_t size = caller_size(s);
        caller_references[s] = product(s % 2, s / 3, size, size + 3, size + 5, (unsigned)s);
    }
}

typedef struct {
    int id;
    int failures;
} Caller;

/* Many small and large parallel_for and sgemm calls, each checked. */
static void *caller_main(void *arg)
{
    Caller *caller = arg;
    int round;
    for (round = 0; round < 60; round++) {
        int s = (caller->id + round) % CALLER_SHAPES;
        int64_t size = caller_size(s);
        float *c;
        if (!covers_once(round % 3 == 0 ? 200000 : 50 + round, 100)) caller->failures++;
        c = product(s % 2, s / 3, size, size + 3, size + 5, (unsigned)s);
        if (!same_bits(c, caller_references[s], size * (size + 3))) caller->failures++;
        free(c);
    }
    return NULL;
}

static void test_many_callers_at_once(void)
{
    enum { CALLERS = 4 };
    pthread_t threads[CALLERS];
    Caller callers[CALLERS];
    int i;
    ac_set_num_threads(2);
    for (i = 0; i < CALLERS; i++) {
        callers[i].id = i;
        callers[i].failures = 0;
        CHECK(pthread_create(&threads[i], NULL, caller_main, &callers[i]) == 0);
    }
    for (i = 0; i < CALLERS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(callers[i].failures == 0);
    }
}

/* The pool resizes between calls while other threads use it. */
static void *resizer_main(void *arg)
{
    int i;
    (void)arg;
    for (i = 0; i < 200; i++) ac_set_num_threads(1 + i % 4);
    return NULL;
}

static void test_resize_while_in_use(void)
{
    pthread_t resizer, caller_thread;
    Caller caller = {1, 0};
    CHECK(pthread_create(&resizer, NULL, resizer_main, NULL) == 0);
    CHECK(pthread_create(&caller_thread, NULL, caller_main, &caller) == 0);
    pthread_join(resizer, NULL);
    pthread_join(caller_thread, NULL);
    CHECK(caller.failures == 0);
}

/* ---- fork ------------------------------------------------------------------ */

static void test_forked_child_uses_pool(void)
{
    float *before, *in_parent;
    pid_t child;
    int status = -1;
    ac_set_num_threads(2);
    before = product(0, 0, 200, 150, 300, 7);   /* the pool has workers now */
    CHECK(covers_once(100000, 100));
    child = fork();
    if (child == 0) {
        float *in_child = product(0, 0, 200, 150, 300, 7);
        int ok = covers_once(100000, 100) && same_bits(before, in_child, 200 * 150);
        free(in_child);
        free(before);
        _exit(ok ? 0 : 1);
    }
    CHECK(child > 0);
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    in_parent = product(0, 0, 200, 150, 300, 7);
    CHECK(same_bits(before, in_parent, 200 * 150));
    free(before);
    free(in_parent);
}

/* ---- the thread count ------------------------------------------------------ */

static void test_set_num_threads_rejects_bad_counts(void)
{
    CHECK(ac_set_num_threads(3) == AC_OK);
    CHECK(ac_set_num_threads(0) == AC_ERR_ARG);
    CHECK(strncmp(ac_last_error(), "set_num_threads: ", 17) == 0);
    CHECK(ac_set_num_threads(-2) == AC_ERR_ARG);
    CHECK(ac_set_num_threads(257) == AC_ERR_ARG);
    CHECK(ac_get_num_threads() == 3);
    CHECK(ac_set_num_threads(256) == AC_OK);
    CHECK(covers_once(5000, 1));
    CHECK(ac_set_num_threads(1) == AC_OK);
    ac_clear_error();
}

/* Run this program again with AC_NUM_THREADS set; it reports the count it got. */
static void test_num_threads_from_environment(char *self)
{
    pid_t child = fork();
    int status = -1;
    if (child == 0) {
        char *args[3];
        args[0] = self;
        args[1] = "--report-threads";
        args[2] = NULL;
        setenv("AC_NUM_THREADS", "3", 1);
        execv(self, args);
        _exit(99);
    }
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
}

int main(int argc, char **argv)
{
    int i;
    if (argc == 2 && strcmp(argv[1], "--report-threads") == 0)
        return ac_get_num_threads();
    RUN(test_parallel_for_covers_range);
    RUN(test_nested_parallel_for);
    RUN(test_sgemm_same_bits_for_any_thread_count);
    RUN(test_sgemm_next_job_packs_its_own_b);
    make_caller_references();
    RUN(test_many_callers_at_once);
    RUN(test_resize_while_in_use);
    RUN(test_forked_child_uses_pool);
    RUN(test_set_num_threads_rejects_bad_counts);
    test_num_threads_from_environment(argv[0]);
    for (i = 0; i < CALLER_SHAPES; i++) free(caller_references[i]);
    return TEST_REPORT();
}
