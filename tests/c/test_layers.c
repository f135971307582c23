/*
 * test_layers.c - the layer ops added for PyTorch's examples, from C and under
 * the sanitizers: ac_rnn_tanh, ac_rnn_relu, ac_layer_norm, ac_feature_dropout,
 * ac_l1_loss and ac_smooth_l1_loss. Gradients through ac_gradient_check, scope
 * memory returned, and bad input failing with a clear message. (Values against
 * float64 references and PyTorch are in the Python tests.)
 */
#include "test.h"

#include <ac.h>
#include <string.h>

/* inputs: x, h0, w_ih, w_hh, b_ih, b_hh; user: relu flag */
static AcTensor *fn_plain_rnn(AcTensor *const *in, int n, void *user)
{
    AcTensor *h_n = NULL, *out;
    (void)n;
    out = (*(int *)user ? ac_rnn_relu : ac_rnn_tanh)(in[0], in[1], in[2], in[3], in[4], in[5], 0,
                                                    *(int *)user, &h_n);
    return out && h_n ? ac_add(ac_sum(out, NULL, 0, 0), ac_sum(h_n, NULL, 0, 0)) : NULL;
}

static AcTensor *fn_layer_norm(AcTensor *const *in, int n, void *user)
{
    const int64_t shape[2] = {3, 4};
    (void)n;
    (void)user;
    return ac_layer_norm(in[0], shape, 2, in[1], in[2], 1e-3f);
}

static AcTensor *fn_smooth_l1(AcTensor *const *in, int n, void *user)
{
    (void)n;
    return ac_smooth_l1_loss(in[0], in[1], AC_REDUCTION_NONE, *(float *)user);
}

static void test_gradient_checks(void)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    const int64_t xs[3] = {4, 2, 3}, hs[2] = {2, 5}, wi[2] = {5, 3}, wh[2] = {5, 5}, bs[1] = {5};
    const int64_t ls[3] = {2, 3, 4}, ws[2] = {3, 4}, ps[2] = {3, 5};
    AcTensor *in[6];
    float err, beta;
    int relu, i;
    ac_manual_seed(11);
    for (relu = 0; relu < 2; relu++) {
        in[0] = leaf_randn(xs, 3, 1.0f);
        in[1] = leaf_randn(hs, 2, 0.5f);
        in[2] = leaf_randn(wi, 2, 0.5f);
        in[3] = leaf_randn(wh, 2, 0.5f);
        in[4] = leaf_randn(bs, 1, 0.5f);
        in[5] = leaf_randn(bs, 1, 0.5f);
        CHECK(ac_gradient_check(fn_plain_rnn, in, 6, &relu, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    }
    in[0] = leaf_randn(ls, 3, 2.0f);
    in[1] = leaf_randn(ws, 2, 1.0f);
    in[2] = leaf_randn(ws, 2, 1.0f);
    CHECK(ac_gradient_check(fn_layer_norm, in, 3, NULL, 1e-2f, 2e-2f, 2e-2f, &err) == AC_OK);
    for (beta = 0.0f; beta < 3.0f; beta += 1.0f) {
        in[0] = leaf_randn(ps, 2, 3.0f);
        in[1] = leaf_randn(ps, 2, 1.0f);
        for (i = 0; i < in[0]->size; i++)   /* keep away from the kinks */
            if (fabsf(fabsf(in[0]->data[i] - in[1]->data[i]) - beta) < 0.1f ||
                fabsf(in[0]->data[i] - in[1]->data[i]) < 0.1f)
                in[0]->data[i] += 0.5f;
        CHECK(ac_gradient_check(fn_smooth_l1, in, 2, &beta, 1e-3f, 2e-2f, 2e-2f, &err) == AC_OK);
    }
    if (ac_last_error_code() != AC_OK) fprintf(stderr, "  %s\n", ac_last_error());
    ac_mem_restore(cp);
}

static void test_feature_dropout_keeps_whole_channels(void)
{
    const int64_t shape[4] = {4, 8, 3, 3};
    AcTensor *x = ac_full(shape, 4, 1.0f), *y, *g;   /* at root: its grad outlives the scope */
    AcCheckpoint cp = ac_mem_checkpoint();
    int64_t block, i;
    int whole = 1;
    ac_tensor_set_requires_grad(x, 1);
    ac_manual_seed(12);
    y = ac_feature_dropout(x, 0.5f, 1);
    CHECK(y != NULL && ac_backward(ac_sum(y, NULL, 0, 0)) == AC_OK);
    g = x->grad;
    for (block = 0; block < 32; block++)
        for (i = 1; i < 9; i++) {
            whole &= y->data[block * 9 + i] == y->data[block * 9];
            whole &= g->data[block * 9 + i] == y->data[block * 9];   /* dy/dx is the mask times 2 */
        }
    CHECK(whole);
    CHECK(ac_feature_dropout(x, 0.5f, 0) != NULL);
    ac_mem_restore(cp);
    ac_tensor_free(x);
}

static void test_bad_input(void)
{
    const int64_t xs[3] = {2, 2, 3}, w[2] = {4, 3}, v[1] = {3}, norm[1] = {3};
    AcTensor *x = ac_randn(xs, 3), *w_ih = ac_randn(w, 2), *vec = ac_randn(v, 1);
    AcTensor *h_n = NULL;
    CHECK(ac_rnn_tanh(NULL, NULL, w_ih, w_ih, NULL, NULL, 0, 0, &h_n) == NULL);
    CHECK(strstr(ac_last_error(), "rnn_tanh") != NULL);
    CHECK(ac_rnn_relu(x, NULL, w_ih, w_ih, NULL, NULL, 0, 0, &h_n) == NULL && h_n == NULL);
    CHECK(ac_last_error_code() == AC_ERR_SHAPE && strstr(ac_last_error(), "rnn_relu") != NULL);
    CHECK(ac_layer_norm(x, NULL, 1, NULL, NULL, 1e-5f) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_layer_norm(x, norm, 1, w_ih, NULL, 1e-5f) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_layer_norm(x, norm, 1, NULL, NULL, -1.0f) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_feature_dropout(vec, 0.5f, 1) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_feature_dropout(x, 2.0f, 1) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_l1_loss(x, vec, 1) == NULL && ac_last_error_code() == AC_ERR_SHAPE);
    CHECK(ac_smooth_l1_loss(x, x, 1, -1.0f) == NULL && ac_last_error_code() == AC_ERR_ARG);
    CHECK(ac_smooth_l1_loss(x, x, 7, 1.0f) == NULL && ac_last_error_code() == AC_ERR_ARG);
    ac_clear_error();
    {   /* still usable */
        AcTensor *y = ac_layer_norm(x, norm, 1, NULL, NULL, 1e-5f);
        CHECK(y != NULL);
        ac_tensor_free(y);
    }
    ac_tensor_free(x);
    ac_tensor_free(w_ih);
    ac_tensor_free(vec);
}

int main(void)
{
    AcMemStats before, after;
    ac_memory_stats(&before);
    RUN(test_gradient_checks);
    RUN(test_feature_dropout_keeps_whole_channels);
    RUN(test_bad_input);
    ac_memory_stats(&after);
    CHECK(after.live_tensors == before.live_tensors);
    return TEST_REPORT();
}
