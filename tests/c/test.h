/*
 * test.h - the few macros the C tests share. Each tests/c/test_*.c is its own
 * program: it runs its checks, prints failures, and exits non-zero if any failed.
 */
#ifndef AC_TEST_H
#define AC_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ac.h"

static int test_failures = 0;
static int test_checks = 0;

#define CHECK(cond)                                                            \
    do {                                                                       \
        test_checks++;                                                         \
        if (!(cond)) {                                                         \
            test_failures++;                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                    \
        }                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                  \
    do {                                                                       \
        double check_a_ = (a), check_b_ = (b);                                 \
        test_checks++;                                                         \
        if (!(fabs(check_a_ - check_b_) <= (tol))) {                           \
            test_failures++;                                                   \
            fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (tol %g)\n",      \
                    __FILE__, __LINE__, #a, check_a_, check_b_, (double)(tol)); \
        }                                                                      \
    } while (0)

/* Run one test function, then report how it went. */
#define RUN(test_fn)                                                           \
    do {                                                                       \
        int before_ = test_failures;                                           \
        test_fn();                                                             \
        if (test_failures != before_) fprintf(stderr, "FAIL %s\n", #test_fn);  \
    } while (0)

/* A leaf that requires grad, standard normal times scale (gradient checks' inputs). */
static inline AcTensor *leaf_randn(const int64_t *shape, int ndim, float scale)
{
    AcTensor *t = ac_randn(shape, ndim);
    int64_t i;
    for (i = 0; t && i < t->size; i++) t->data[i] *= scale;
    ac_tensor_set_requires_grad(t, 1);
    return t;
}

#define TEST_REPORT()                                                          \
    (printf("%s: %d checks, %d failed\n", __FILE__, test_checks,               \
            test_failures),                                                    \
     test_failures ? 1 : 0)

#endif /* AC_TEST_H */
