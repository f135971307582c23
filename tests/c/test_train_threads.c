/*
 * test_train_threads.c - two threads, each training its own small MLP with
 * Adam, every step in a scope of its own, while the pool runs their GEMMs: the
 * scopes do not mix, memory comes back, and each thread's losses are the same
 * bits as a run alone (scopes, generators and grad mode are per thread).
 * `make tsan` runs it under ThreadSanitizer.
 */
#include "test.h"

#include <ac.h>
#include <pthread.h>
#include <string.h>

#define STEPS 30
#define BATCH 16
#define IN 8
#define HIDDEN 32

typedef struct {
    uint64_t seed;
    float losses[STEPS];
    int failed_step;                  /* -1 when every step ran */
    int depth_after;                  /* scope depth after the steps: 0 */
} Run;

/* One step in its own scope: forward, backward, Adam; returns the loss or NaN. */
static float step(AcTensor **params, AcTensor **moments, int64_t n_step, const AcTensor *x,
                  const AcTensor *y)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *hidden = ac_relu(ac_linear(x, params[0], params[1]));
    AcTensor *loss = ac_mse_loss(ac_linear(hidden, params[2], params[3]), y, AC_REDUCTION_MEAN);
    float value = NAN;
    int i, ok = loss && ac_backward(loss) == AC_OK;
    if (ok) value = loss->data[0];
    for (i = 0; i < 4 && ok; i++)
        ok = ac_adam_step(params[i], moments[2 * i], moments[2 * i + 1], n_step, 0.01f, 0.9f,
                          0.999f, 1e-8f, 0.0f, 0) == AC_OK;
    for (i = 0; i < 4; i++) ac_tensor_zero_grad(params[i]);
    if (ac_mem_restore(cp) != AC_OK || !ok) return NAN;
    return value;
}

static void *train(void *arg)
{
    Run *run = arg;
    const int64_t shapes[4][2] = {{HIDDEN, IN}, {HIDDEN, 0}, {1, HIDDEN}, {1, 0}};
    const int64_t x_shape[2] = {BATCH, IN};
    AcTensor *params[4], *moments[8], *x, *y;
    int i, s;
    ac_manual_seed(run->seed);
    for (i = 0; i < 4; i++) {
        int ndim = shapes[i][1] ? 2 : 1;
        params[i] = ac_tensor_new(shapes[i], ndim);
        ac_tensor_normal_(params[i], 0.0f, 0.3f);
        ac_tensor_set_requires_grad(params[i], 1);
        moments[2 * i] = ac_tensor_new(shapes[i], ndim);
        moments[2 * i + 1] = ac_tensor_new(shapes[i], ndim);
    }
    x = ac_randn(x_shape, 2);
    y = ac_sum(x, (const int[]){1}, 1, 1);
    run->failed_step = -1;
    for (s = 0; s < STEPS; s++) {
        run->losses[s] = step(params, moments, s + 1, x, y);
        if (run->losses[s] != run->losses[s] && run->failed_step < 0) run->failed_step = s;
    }
    run->depth_after = ac_mem_depth();
    for (i = 0; i < 4; i++) ac_tensor_free(params[i]);
    for (i = 0; i < 8; i++) ac_tensor_free(moments[i]);
    ac_tensor_free(x);
    ac_tensor_free(y);
    return NULL;
}

static void test_two_threads_train_in_their_own_scopes(void)
{
    Run alone[2] = {{1, {0}, 0, 0}, {2, {0}, 0, 0}}, together[2] = {{1, {0}, 0, 0}, {2, {0}, 0, 0}};
    pthread_t threads[2];
    AcMemStats before, after;
    int i;
    CHECK(ac_set_num_threads(2) == AC_OK);
    train(&alone[0]);
    train(&alone[1]);
    ac_memory_stats(&before);
    for (i = 0; i < 2; i++) CHECK(pthread_create(&threads[i], NULL, train, &together[i]) == 0);
    for (i = 0; i < 2; i++) CHECK(pthread_join(threads[i], NULL) == 0);
    ac_memory_stats(&after);
    for (i = 0; i < 2; i++) {
        CHECK(together[i].failed_step == -1);
        CHECK(together[i].depth_after == 0);
        CHECK(together[i].losses[STEPS - 1] < 0.5f * together[i].losses[0]);
        CHECK(memcmp(together[i].losses, alone[i].losses, sizeof alone[i].losses) == 0);
    }
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
}

int main(void)
{
    RUN(test_two_threads_train_in_their_own_scopes);
    return TEST_REPORT();
}
