/*
 * test_graph_free.c - backward frees the graph it walks (at root and in a
 * scope), retain_graph keeps it, and a second backward through a freed graph
 * fails with PyTorch's message.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

#define SECOND_TIME "Trying to backward through the graph a second time"

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

static AcTensor *leaf(int64_t n, float value)
{
    AcTensor *t = ac_full(&n, 1, value);
    ac_tensor_set_requires_grad(t, 1);
    return t;
}

/* loss = sum(relu(x * w) * x), its intermediates freed by the caller as a
   Python wrapper would: only the graph holds them. */
static AcTensor *two_layer_loss(AcTensor *x, AcTensor *w)
{
    AcTensor *h = ac_mul(x, w), *a = ac_relu(h), *p = ac_mul(a, x), *loss = ac_sum(p, NULL, 0, 0);
    ac_tensor_free(h);
    ac_tensor_free(a);
    ac_tensor_free(p);
    return loss;
}

static void test_root_backward_frees_what_only_the_graph_held(void)
{
    const int64_t n = 4096;
    AcMemStats start = stats(), built, done;
    AcTensor *x = leaf(n, 2.0f), *w = leaf(n, 3.0f), *loss = two_layer_loss(x, w);
    built = stats();
    CHECK(ac_backward(loss) == AC_OK);
    done = stats();
    /* the three intermediates (16 KB each) are gone, the two grads arrived */
    CHECK(built.bytes_in_use - done.bytes_in_use >= 3 * n * 4 - 2 * (n * 4 + 1024));
    CHECK(done.live_tensors == start.live_tensors + 5);   /* x, w, their grads, loss */
    CHECK(done.live_nodes == start.live_nodes + 1);       /* the loss's own */
    CHECK(loss->data[0] == 12.0f * (float)n);             /* the kept output keeps its value */
    CHECK_NEAR(x->grad->data[0], 2 * 2 * 3, 1e-4);        /* d/dx (w x^2) = 2 w x */
    CHECK_NEAR(w->grad->data[n - 1], 4, 1e-4);            /* d/dw (w x^2) = x^2 */
    ac_tensor_free(loss);
    ac_tensor_free(x);
    ac_tensor_free(w);
    CHECK(stats().bytes_in_use == start.bytes_in_use);
    CHECK(stats().live_tensors == start.live_tensors);
    CHECK(stats().live_nodes == start.live_nodes);
}

static void test_second_backward_fails_with_pytorch_message(void)
{
    AcTensor *x = leaf(8, 2.0f), *w = leaf(8, 3.0f), *loss = two_layer_loss(x, w), *twice;
    float grad0;
    CHECK(ac_backward(loss) == AC_OK);
    grad0 = x->grad->data[0];
    CHECK(ac_backward(loss) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), SECOND_TIME) != NULL);
    CHECK(strstr(ac_last_error(), "retain_graph=True") != NULL);
    CHECK(x->grad->data[0] == grad0);                     /* nothing accumulated */
    twice = ac_mul_scalar(loss, 2.0f);                    /* a new graph on a freed one */
    CHECK(ac_backward(twice) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), SECOND_TIME) != NULL);
    CHECK(x->grad->data[0] == grad0);
    ac_tensor_free(twice);
    ac_tensor_free(loss);
    ac_tensor_free(x);
    ac_tensor_free(w);
}

static void test_retain_graph_allows_another_backward(void)
{
    AcMemStats start = stats(), built;
    AcTensor *x = leaf(8, 2.0f), *w = leaf(8, 3.0f), *loss = two_layer_loss(x, w);
    built = stats();
    CHECK(ac_backward_ex(loss, NULL, 1) == AC_OK);
    CHECK_NEAR(x->grad->data[3], 12, 1e-5);
    CHECK(stats().live_tensors == built.live_tensors + 2);   /* only the grads were added */
    CHECK(stats().live_nodes == built.live_nodes);
    CHECK(ac_backward(loss) == AC_OK);                       /* frees it this time */
    CHECK_NEAR(x->grad->data[3], 24, 1e-5);
    CHECK_NEAR(w->grad->data[3], 8, 1e-5);
    CHECK(ac_backward_ex(loss, NULL, 1) == AC_ERR_STATE);
    ac_tensor_free(loss);
    ac_tensor_free(x);
    ac_tensor_free(w);
    CHECK(stats().bytes_in_use == start.bytes_in_use);
    CHECK(stats().live_tensors == start.live_tensors);
}

static void test_backward_with_frees_and_retains_too(void)
{
    int64_t n = 4;
    AcTensor *x = leaf(n, 1.0f), *y = ac_mul_scalar(x, 3.0f), *g = ac_full(&n, 1, 2.0f);
    CHECK(ac_backward_ex(y, g, 1) == AC_OK);
    CHECK(ac_backward_with(y, g) == AC_OK);
    CHECK_NEAR(x->grad->data[0], 12, 1e-6);
    CHECK(ac_backward_with(y, g) == AC_ERR_STATE);
    CHECK(y->data[2] == 3.0f);
    ac_tensor_free(g);
    ac_tensor_free(y);
    ac_tensor_free(x);
}

static void test_scoped_backward_gives_freed_activations_back(void)
{
    const int64_t n = 4096;
    AcMemStats start = stats(), built, done;
    AcTensor *w = leaf(n, 3.0f), *x, *loss;   /* a root parameter */
    AcCheckpoint cp = ac_mem_checkpoint();
    x = leaf(n, 2.0f);                        /* and a scoped input */
    loss = two_layer_loss(x, w);
    built = stats();
    CHECK(ac_backward(loss) == AC_OK);
    done = stats();
    CHECK(built.bytes_in_use - done.bytes_in_use >= 3 * n * 4 - 2 * (n * 4 + 1024));
    CHECK(done.live_tensors <= built.live_tensors + 2 - 3);
    CHECK(loss->data[0] == 12.0f * (float)n);
    CHECK_NEAR(w->grad->data[0], 4, 1e-4);
    CHECK(ac_backward(loss) == AC_ERR_STATE && strstr(ac_last_error(), SECOND_TIME));
    ac_mem_restore(cp);
    ac_tensor_free(w);
    CHECK(stats().bytes_in_use == start.bytes_in_use);
    CHECK(stats().live_tensors == start.live_tensors);
    CHECK(stats().live_nodes == start.live_nodes);
}

/* A deep chain whose activations only its graph holds, as in a Python forward:
   each goes back once its own node has run, and each gradient once the slot
   that held it is spent, so backward adds a few tensors to the peak (before,
   it added all the gradients on top of all the activations: 26 MB on 17 MB).
   Run first: the peak is process-wide. */
static void test_scoped_backward_reuses_activations_as_it_walks(void)
{
    const int64_t n = 1 << 16;   /* 256 KB a tensor */
    const int layers = 32;
    AcTensor *w = leaf(n, 0.5f), *h, *loss;
    AcCheckpoint cp = ac_mem_checkpoint();
    int64_t start = stats().bytes_in_use, forward, backward;
    int i;
    h = leaf(n, 1.0f);
    for (i = 0; i < layers; i++) {
        AcTensor *product = ac_mul(h, w), *next = ac_tanh(product);
        ac_tensor_free(product);
        ac_tensor_free(h);
        h = next;
    }
    loss = ac_sum(h, NULL, 0, 0);
    ac_tensor_free(h);
    forward = stats().bytes_in_use - start;
    CHECK(forward >= 2 * layers * n * 4);
    CHECK(ac_backward(loss) == AC_OK);
    backward = stats().peak_bytes - start - forward;
    CHECK(backward < 8 * n * 4);   /* a few tensors: the gradients of the frontier */
    CHECK(w->grad && w->grad->data[0] != 0.0f);
    ac_mem_restore(cp);
    ac_tensor_free(w);
}

/* add gives one gradient tensor to both its inputs: it is freed only once no
   node still needs it (under ASan a use after free would fail here). */
static void test_a_gradient_shared_by_two_inputs_lives_until_both_ran(void)
{
    const int64_t n = 4096;
    AcTensor *x = leaf(n, 0.0f), *a, *b, *s, *square, *loss;
    AcCheckpoint cp = ac_mem_checkpoint();
    int64_t i;
    for (i = 0; i < n; i++) x->data[i] = (float)(i % 7) - 3.0f;
    a = ac_mul_scalar(x, 2.0f);
    b = ac_mul_scalar(x, 3.0f);
    s = ac_add(a, b);
    square = ac_mul(s, s);
    loss = ac_sum(square, NULL, 0, 0);   /* sum((2x + 3x)^2): d/dx = 50 x */
    ac_tensor_free(a);
    ac_tensor_free(b);
    ac_tensor_free(s);
    ac_tensor_free(square);
    CHECK(ac_backward(loss) == AC_OK);
    for (i = 0; i < n; i++)
        if (x->grad->data[i] != 50.0f * x->data[i]) break;
    CHECK(i == n);
    ac_mem_restore(cp);
    ac_tensor_free(x);
}

/* What a view, a retain or another graph still uses stays, with its values. */
static void test_freeing_keeps_what_others_hold(void)
{
    const int64_t n = 4096;
    AcTensor *w = leaf(n, 3.0f), *x, *h, *view, *other, *loss, *kept;
    AcCheckpoint cp = ac_mem_checkpoint();
    x = leaf(n, 2.0f);
    h = ac_mul(x, w);
    view = ac_reshape(h, &n, 1);
    kept = ac_relu(h);
    ac_tensor_retain(kept);
    other = ac_sum(kept, NULL, 0, 0);        /* a second graph through h and kept */
    loss = ac_sum(ac_mul(h, kept), NULL, 0, 0);
    ac_tensor_free(h);
    ac_tensor_free(kept);
    CHECK(ac_backward(loss) == AC_OK);
    CHECK(view->data[n - 1] == 6.0f && kept->data[0] == 6.0f);
    CHECK(ac_backward(other) == AC_ERR_STATE);   /* kept's node was freed by the first */
    ac_mem_restore(cp);
    ac_tensor_free(w);
}

static void test_a_failed_backward_leaks_nothing(void)
{
    const int64_t n = 1 << 16;
    AcMemStats start = stats();
    AcTensor *x = leaf(n, 2.0f), *w = leaf(n, 3.0f), *loss = two_layer_loss(x, w);
    CHECK(ac_set_memory_limit(stats().bytes_in_use + 1024) == AC_OK);
    CHECK(ac_backward(loss) == AC_ERR_MEMORY);   /* before any node ran: the graph stays */
    /* room for the sum's gradient, not for the next node's */
    CHECK(ac_set_memory_limit(stats().bytes_in_use + 300 * 1024) == AC_OK);
    CHECK(ac_backward(loss) == AC_ERR_MEMORY);
    ac_set_memory_limit(0);
    CHECK(x->grad == NULL);
    CHECK(ac_backward(loss) == AC_ERR_STATE);    /* the sum ran and was freed */
    ac_tensor_free(loss);
    ac_tensor_free(x);
    ac_tensor_free(w);
    CHECK(stats().bytes_in_use == start.bytes_in_use);
    CHECK(stats().live_tensors == start.live_tensors);
    CHECK(stats().live_nodes == start.live_nodes);
}

static void test_a_long_chain_is_freed_as_it_is_walked(void)
{
    AcMemStats start = stats();
    AcTensor *x = leaf(1, 1.0f), *y = x, *next;
    int i;
    for (i = 0; i < 100000; i++) {
        next = ac_add_scalar(y, 1.0f);
        if (y != x) ac_tensor_free(y);
        y = next;
    }
    CHECK(ac_backward(y) == AC_OK);
    CHECK(stats().live_nodes == start.live_nodes + 1);
    CHECK(x->grad->data[0] == 1.0f && y->data[0] == 100001.0f);
    ac_tensor_free(y);
    ac_tensor_free(x);
    CHECK(stats().bytes_in_use == start.bytes_in_use);
}

static void test_backward_ex_checks_its_arguments(void)
{
    int64_t two = 2, three = 3;
    AcTensor *x = leaf(2, 1.0f), *y = ac_mul_scalar(x, 2.0f), *g = ac_full(&three, 1, 1.0f);
    CHECK(ac_backward_ex(NULL, NULL, 0) == AC_ERR_ARG);
    CHECK(ac_backward_ex(y, NULL, 2) == AC_ERR_ARG && strstr(ac_last_error(), "retain_graph"));
    CHECK(ac_backward_ex(y, NULL, 0) == AC_ERR_SHAPE);       /* two elements need a gradient */
    CHECK(ac_backward_ex(y, g, 0) == AC_ERR_SHAPE && strstr(ac_last_error(), "(3,)"));
    ac_tensor_free(g);
    g = ac_full(&two, 1, 1.0f);
    CHECK(ac_backward_ex(y, g, 0) == AC_OK);                 /* still usable, nothing freed before */
    CHECK(x->grad->data[1] == 2.0f);
    ac_tensor_free(g);
    ac_tensor_free(y);
    ac_tensor_free(x);
}

int main(void)
{
    RUN(test_scoped_backward_reuses_activations_as_it_walks);
    RUN(test_root_backward_frees_what_only_the_graph_held);
    RUN(test_second_backward_fails_with_pytorch_message);
    RUN(test_retain_graph_allows_another_backward);
    RUN(test_backward_with_frees_and_retains_too);
    RUN(test_scoped_backward_gives_freed_activations_back);
    RUN(test_a_gradient_shared_by_two_inputs_lives_until_both_ran);
    RUN(test_freeing_keeps_what_others_hold);
    RUN(test_a_failed_backward_leaks_nothing);
    RUN(test_a_long_chain_is_freed_as_it_is_walked);
    RUN(test_backward_ex_checks_its_arguments);
    return TEST_REPORT();
}
