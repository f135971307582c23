/*
 * test_leaf_grad.c - backwards that write a leaf's new grad in place
 * (leaf_grad_to_fill: linear's and embedding's weight gradients): the same
 * values as a grad that is added to, and a backward that fails part way
 * leaves no half-written grad behind.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

#define IN 1000
#define OUT 1000

/* loss = sum(linear(x, w, b)) for x (1, IN) that needs no grad. */
static AcTensor *linear_loss(const AcTensor *x, AcTensor *w, AcTensor *b)
{
    return ac_sum(ac_linear(x, w, b), NULL, 0, 0);
}

static void test_in_place_grad_equals_an_added_one(void)
{
    const int64_t x_shape[2] = {1, IN}, w_shape[2] = {OUT, IN}, b_shape[1] = {OUT};
    AcTensor *x = ac_randn(x_shape, 2), *w = leaf_randn(w_shape, 2, 0.1f), *b = leaf_randn(b_shape, 1, 1.0f);
    AcTensor *first_w, *first_b;
    int64_t i;
    AcCheckpoint cp = ac_mem_checkpoint();
    CHECK(ac_backward(linear_loss(x, w, b)) == AC_OK);   /* fills the new grads */
    first_w = ac_tensor_clone(w->grad);
    first_b = ac_tensor_clone(b->grad);
    CHECK(ac_backward(linear_loss(x, w, b)) == AC_OK);   /* adds to them */
    for (i = 0; i < w->size; i++) CHECK(w->grad->data[i] == 2.0f * first_w->data[i]);
    for (i = 0; i < b->size; i++) CHECK(b->grad->data[i] == 2.0f && first_b->data[i] == 1.0f);
    for (i = 0; i < IN; i++) CHECK(first_w->data[i] == x->data[i]);   /* d sum / d w[o][i] = x[i] */
    ac_mem_restore(cp);
    ac_tensor_free(x);
    ac_tensor_free(w);
    ac_tensor_free(b);
}

/* Limits around the weight gradient's size: some let the weight's grad be made
   and then fail the bias's, or the walk after it. Whatever fails, a leaf that
   had no grad before backward has none after. */
static void test_failed_backward_leaves_no_grad(void)
{
    const int64_t x_shape[2] = {1, IN}, w_shape[2] = {OUT, IN}, b_shape[1] = {OUT};
    AcTensor *x = ac_randn(x_shape, 2), *w = leaf_randn(w_shape, 2, 0.1f), *b = leaf_randn(b_shape, 1, 1.0f);
    const int64_t w_bytes = OUT * IN * (int64_t)sizeof(float);
    int64_t extra;
    int failed_past_w = 0, succeeded = 0;
    for (extra = w_bytes - 16384; extra <= w_bytes + 65536; extra += 512) {
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *loss = linear_loss(x, w, b);
        AcMemStats s;
        int rc;
        ac_tensor_zero_grad(w);
        ac_tensor_zero_grad(b);
        ac_memory_stats(&s);
        ac_set_memory_limit(s.bytes_in_use + extra);
        rc = ac_backward(loss);
        ac_set_memory_limit(0);
        if (rc == AC_OK) {
            succeeded = 1;
            CHECK(w->grad != NULL && b->grad != NULL);
        } else {
            CHECK(rc == AC_ERR_MEMORY);
            CHECK(w->grad == NULL && b->grad == NULL);
            if (extra >= w_bytes) failed_past_w = 1;
        }
        ac_mem_restore(cp);
    }
    CHECK(failed_past_w && succeeded);
    {
        AcCheckpoint cp = ac_mem_checkpoint();
        CHECK(ac_backward(linear_loss(x, w, b)) == AC_OK && w->grad && b->grad);   /* still usable */
        ac_mem_restore(cp);
    }
    ac_tensor_free(x);
    ac_tensor_free(w);
    ac_tensor_free(b);
}

int main(void)
{
    RUN(test_in_place_grad_equals_an_added_one);
    RUN(test_failed_backward_leaves_no_grad);
    return TEST_REPORT();
}
