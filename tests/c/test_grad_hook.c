/*
 * test_grad_hook.c - ac_tensor_set_grad_hook: backward calls a leaf's hook once,
 * when the leaf's gradient is final (a leaf used twice included), the leaves
 * nearest the loss first; a failing hook stops the backward; bad calls are
 * refused.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

#define MAX_CALLS 8

/* What the hooks saw: which leaf, in which order, and its grad at the time. */
typedef struct {
    int n_calls;
    const AcTensor *leaf[MAX_CALLS];
    float grad_sum[MAX_CALLS];
    int fail_at;   /* the call that returns an error; -1: none */
} Seen;

static float sum_of(const AcTensor *t)
{
    float s = 0.0f;
    int64_t i;
    for (i = 0; t && i < t->size; i++) s += t->data[i];
    return s;
}

static int record_hook(AcTensor *leaf, void *user)
{
    Seen *seen = user;
    int call = seen->n_calls++;
    if (call < MAX_CALLS) {
        seen->leaf[call] = leaf;
        seen->grad_sum[call] = leaf->grad ? sum_of(leaf->grad) : NAN;
    }
    return call == seen->fail_at ? AC_ERR_STATE : AC_OK;
}

/* loss = sum(relu(x @ w1 + b1) @ w2): the hooks run w2 first (nearest the
   loss), then b1 and w1, each once, with the grad backward leaves in the end. */
static void test_hooks_run_once_nearest_the_loss_first(void)
{
    const int64_t xs[2] = {5, 4}, w1s[2] = {4, 3}, b1s[1] = {3}, w2s[2] = {3, 2};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ac_randn(xs, 2), *w1 = leaf_randn(w1s, 2, 0.5f), *b1 = leaf_randn(b1s, 1, 0.5f);
    AcTensor *w2 = leaf_randn(w2s, 2, 0.5f), *loss;
    Seen seen = {0, {NULL}, {0}, -1};
    int k;
    CHECK(ac_tensor_set_grad_hook(w1, record_hook, &seen) == AC_OK);
    CHECK(ac_tensor_set_grad_hook(b1, record_hook, &seen) == AC_OK);
    CHECK(ac_tensor_set_grad_hook(w2, record_hook, &seen) == AC_OK);
    loss = ac_sum(ac_matmul(ac_relu(ac_add(ac_matmul(x, w1), b1)), w2), NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(seen.n_calls == 3);
    CHECK(seen.leaf[0] == w2);
    CHECK((seen.leaf[1] == b1 && seen.leaf[2] == w1) || (seen.leaf[1] == w1 && seen.leaf[2] == b1));
    for (k = 0; k < 3 && k < seen.n_calls; k++)
        CHECK_NEAR(seen.grad_sum[k], sum_of(seen.leaf[k]->grad), 1e-6);
    ac_mem_restore(cp);
}

/* w feeds two nodes: its hook waits for both contributions. */
static void test_hook_of_a_leaf_used_twice_waits_for_both(void)
{
    const int64_t n = 6;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ac_full(&n, 1, 2.0f), *w = ac_full(&n, 1, 3.0f), *loss;
    Seen seen = {0, {NULL}, {0}, -1};
    ac_tensor_set_requires_grad(w, 1);
    CHECK(ac_tensor_set_grad_hook(w, record_hook, &seen) == AC_OK);
    /* loss = sum(w * x) + sum(w * w): d/dw = x + 2w = 8 per element */
    loss = ac_add(ac_sum(ac_mul(w, x), NULL, 0, 0), ac_sum(ac_mul(w, w), NULL, 0, 0));
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(seen.n_calls == 1);
    CHECK_NEAR(seen.grad_sum[0], 8.0 * n, 1e-5);
    ac_mem_restore(cp);
}

/* Each backward calls the hook again (retain_graph: the same graph twice); a
   backward of the leaf itself calls it too. */
static void test_hook_runs_in_every_backward(void)
{
    const int64_t n = 3;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *w = ac_full(&n, 1, 1.0f), *loss;
    Seen seen = {0, {NULL}, {0}, -1};
    ac_tensor_set_requires_grad(w, 1);
    CHECK(ac_tensor_set_grad_hook(w, record_hook, &seen) == AC_OK);
    loss = ac_sum(ac_mul(w, w), NULL, 0, 0);
    CHECK(ac_backward_ex(loss, NULL, 1) == AC_OK);
    CHECK(ac_backward_ex(loss, NULL, 1) == AC_OK);
    CHECK(seen.n_calls == 2);
    CHECK_NEAR(seen.grad_sum[1], 4.0 * n, 1e-6);   /* accumulated: 2w twice */
    CHECK(ac_backward_with(w, ac_full(&n, 1, 1.0f)) == AC_OK);
    CHECK(seen.n_calls == 3);
    CHECK(seen.leaf[2] == w);
    CHECK(ac_tensor_set_grad_hook(w, NULL, NULL) == AC_OK);   /* removed: no more calls */
    CHECK(ac_backward(ac_sum(ac_mul(w, w), NULL, 0, 0)) == AC_OK);
    CHECK(seen.n_calls == 3);
    ac_mem_restore(cp);
}

/* A hook that fails stops the backward with its status and a message naming the
   leaf; the library keeps working. */
static void test_failing_hook_stops_backward(void)
{
    const int64_t s1[2] = {3, 2}, s2[2] = {2, 2};
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *x = ac_randn(s1, 2), *w1 = leaf_randn(s2, 2, 1.0f), *w2 = leaf_randn(s2, 2, 1.0f), *loss;
    Seen seen = {0, {NULL}, {0}, 0};
    CHECK(ac_tensor_set_grad_hook(w1, record_hook, &seen) == AC_OK);
    CHECK(ac_tensor_set_grad_hook(w2, record_hook, &seen) == AC_OK);
    loss = ac_sum(ac_matmul(ac_matmul(x, w1), w2), NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), "grad hook of leaf (2, 2) failed") != NULL);
    CHECK(seen.n_calls == 1);   /* w2's; the walk stopped before w1's gradient */
    CHECK(w1->grad == NULL);
    seen.fail_at = -1;
    CHECK(ac_backward(ac_sum(ac_matmul(ac_matmul(x, w1), w2), NULL, 0, 0)) == AC_OK);
    CHECK(seen.n_calls == 3);
    ac_mem_restore(cp);
}

static void test_bad_calls_are_refused(void)
{
    const int64_t n = 2;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *plain = ac_full(&n, 1, 1.0f), *w = ac_full(&n, 1, 1.0f);
    Seen seen = {0, {NULL}, {0}, -1};
    ac_tensor_set_requires_grad(w, 1);
    CHECK(ac_tensor_set_grad_hook(NULL, record_hook, &seen) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "set_grad_hook: tensor is NULL") != NULL);
    CHECK(ac_tensor_set_grad_hook(plain, record_hook, &seen) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), "does not require grad") != NULL);
    CHECK(ac_tensor_set_grad_hook(ac_mul(w, w), record_hook, &seen) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), "is not a leaf (made by mul)") != NULL);
    CHECK(ac_tensor_set_grad_hook(plain, NULL, NULL) == AC_OK);   /* removing none is fine */
    ac_mem_restore(cp);
}

int main(void)
{
    RUN(test_hooks_run_once_nearest_the_loss_first);
    RUN(test_hook_of_a_leaf_used_twice_waits_for_both);
    RUN(test_hook_runs_in_every_backward);
    RUN(test_failing_hook_stops_backward);
    RUN(test_bad_calls_are_refused);
    return TEST_REPORT();
}
