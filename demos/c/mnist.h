/*
 * mnist.h - what the C demos share: MNIST's IDX files and the Python demos'
 * normalisation, a seeded shuffle, PyTorch's Linear init and a clock. Static
 * inline functions, so that each demo still builds from its one .c file.
 */
#ifndef DEMOS_MNIST_H
#define DEMOS_MNIST_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L   /* clock_gettime; the demos include this file first */
#endif

#include <ac.h>

#include <math.h>
#include <stdio.h>
#include <time.h>

#define PIXELS 784

/* folder/name as a float tensor; NULL when it cannot be read, after saying why
   on stderr, prefixed with the program's name. */
static inline AcTensor *mnist_read(const char *program, const char *folder, const char *name)
{
    char path[4096];
    AcTensor *t;
    snprintf(path, sizeof path, "%s/%s", folder, name);
    t = ac_read_idx(path);
    if (!t)
        fprintf(stderr, "%s: %s\n(run demos/mnist_mlp.py once to download MNIST)\n", program,
                ac_last_error());
    return t;
}

/* Images order[start .. start+n) (start .. start+n when order is NULL) into x,
   scaled as the Python demos' transforms, (x / 255 - 0.1307) / 0.3081; their
   labels into y unless it is NULL. */
static inline void mnist_batch(const AcTensor *images, const AcTensor *labels, const int64_t *order,
                               int64_t start, int64_t n, float *x, float *y)
{
    int64_t i, p;
    for (i = 0; i < n; i++) {
        int64_t row = order ? order[start + i] : start + i;
        const float *image = images->data + row * PIXELS;
        for (p = 0; p < PIXELS; p++) x[i * PIXELS + p] = (image[p] / 255.0f - 0.1307f) / 0.3081f;
        if (y) y[i] = labels->data[row];
    }
}

static inline uint64_t next_random(uint64_t *state)   /* xorshift64* */
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ULL;
}

/* 0 .. n-1 in an order drawn from *state (Fisher-Yates). */
static inline void mnist_shuffle(int64_t *order, int64_t n, uint64_t *state)
{
    int64_t i;
    for (i = 0; i < n; i++) order[i] = i;
    for (i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(next_random(state) % (uint64_t)(i + 1)), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

/* PyTorch's nn.Linear init: weight and bias uniform in +-1/sqrt(fan_in),
   requiring grad; NULL on error. */
static inline AcTensor *linear_parameter(const int64_t *shape, int ndim, int64_t fan_in)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    AcTensor *t = ac_tensor_new(shape, ndim);
    if (t && (ac_tensor_uniform_(t, -bound, bound) || ac_tensor_set_requires_grad(t, 1))) {
        ac_tensor_free(t);
        return NULL;
    }
    return t;
}

static inline double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* DEMOS_MNIST_H */
