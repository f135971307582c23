/*
 * test_script_draws.c - the C side of what training scripts reach: the generator's
 * state saved and restored, randperm, multinomial (values, distinctness, bad
 * weights), custom Function nodes (backward called, grads checked and copied,
 * release called once) and tensors in shared memory (shared, named, reopened,
 * released); every bad input a clear error, the library usable after.
 */
#include "test.h"

#include <ac.h>
#include <string.h>

static int message_has(const char *text) { return strstr(ac_last_error(), text) != NULL; }

static void test_rng_state_round_trip(void)
{
    uint32_t state[AC_RNG_STATE_WORDS], zero[AC_RNG_STATE_WORDS] = {0};
    const int64_t shape[1] = {5};
    AcTensor *a, *b;
    int i;
    ac_manual_seed(7);
    CHECK(ac_rng_get_state(state) == AC_OK);
    a = ac_randn(shape, 1);
    CHECK(ac_rng_set_state(state) == AC_OK);
    b = ac_randn(shape, 1);
    for (i = 0; a && b && i < 5; i++) CHECK(a->data[i] == b->data[i]);
    CHECK(ac_rng_set_state(zero) < 0 && message_has("all-zero"));
    CHECK(ac_rng_get_state(NULL) < 0);
    ac_tensor_free(a);
    ac_tensor_free(b);
}

static void test_randperm(void)
{
    AcTensor *p = ac_randperm(100);
    int seen[100] = {0}, i, ok = 1;
    CHECK(p && p->dtype == AC_INT64 && p->size == 100);
    for (i = 0; p && i < 100; i++) {
        const int64_t v = ((int64_t *)(void *)p->data)[i];
        if (v < 0 || v >= 100 || seen[v]++) ok = 0;
    }
    CHECK(ok);
    CHECK(ac_randperm(-1) == NULL && message_has("randperm"));
    ac_tensor_free(p);
    p = ac_randperm(0);
    CHECK(p && p->size == 0);
    ac_tensor_free(p);
}

static void test_multinomial(void)
{
    const float w[8] = {0, 1, 0, 3, 2, 0, 0, 1};
    const float bad[2] = {1, -1}, none[2] = {0, 0};
    const int64_t shape[2] = {2, 4}, flat[1] = {2};
    AcTensor *probs = ac_tensor_from_data(w, shape, 2), *draws, *b, *z;
    int64_t *d;
    int i;
    draws = ac_multinomial(probs, 2, 0);
    CHECK(draws && draws->ndim == 2 && draws->shape[0] == 2 && draws->shape[1] == 2);
    d = draws ? (int64_t *)(void *)draws->data : NULL;
    CHECK(d && ((d[0] == 1 && d[1] == 3) || (d[0] == 3 && d[1] == 1)));   /* row 0's only non-zero ones */
    CHECK(d && d[2] != d[3] && d[2] != 1 && d[2] != 2 && d[3] != 1 && d[3] != 2);
    ac_tensor_free(draws);
    draws = ac_multinomial(probs, 1000, 1);
    d = draws ? (int64_t *)(void *)draws->data : NULL;
    for (i = 0; d && i < 1000; i++) CHECK(w[d[i]] > 0.0f);
    ac_tensor_free(draws);
    CHECK(ac_multinomial(probs, 3, 0) == NULL && message_has("non-zero weights"));
    CHECK(ac_multinomial(probs, 5, 0) == NULL && message_has("n_sample"));
    CHECK(ac_multinomial(probs, 0, 1) == NULL && message_has("positive"));
    b = ac_tensor_from_data(bad, flat, 1);
    z = ac_tensor_from_data(none, flat, 1);
    CHECK(ac_multinomial(b, 1, 1) == NULL && message_has("element < 0"));
    CHECK(ac_multinomial(z, 1, 1) == NULL && message_has("sums to zero"));
    CHECK(ac_multinomial(NULL, 1, 1) == NULL);
    draws = ac_multinomial(probs, 1, 1);   /* still usable */
    CHECK(draws != NULL);
    ac_tensor_free(draws);
    ac_tensor_free(probs);
    ac_tensor_free(b);
    ac_tensor_free(z);
}

static int backward_calls, releases;
static AcTensor *given_grad;   /* made inside backward: its scope owns it */

static int double_grad(void *user, const AcTensor *grad_out, AcTensor **grad_in, int n_inputs)
{
    const int64_t shape[1] = {3};
    int64_t i;
    (void)user;
    backward_calls++;
    CHECK(n_inputs == 1);
    given_grad = ac_tensor_new(shape, 1);
    for (i = 0; given_grad && i < 3; i++) given_grad->data[i] = 2.0f * grad_out->data[i];
    grad_in[0] = given_grad;
    return 0;
}

static void count_release(void *user)
{
    (void)user;
    releases++;
}

static void test_function_node(void)
{
    const float xv[3] = {1, 2, 3};
    const int64_t shape[1] = {3};
    AcTensor *x = ac_tensor_from_data(xv, shape, 1), *values, *y, *loss, *inputs[1];
    ac_tensor_set_requires_grad(x, 1);
    values = ac_tensor_from_data(xv, shape, 1);
    inputs[0] = x;
    y = ac_function_apply("double", values, inputs, 1, double_grad, count_release, NULL);
    CHECK(y && y->node && releases == 0 && y->data[2] == 3.0f);
    loss = ac_sum(y, NULL, 0, 0);
    CHECK(ac_backward(loss) == AC_OK && backward_calls == 1);
    CHECK(x->grad && x->grad->data[0] == 2.0f && x->grad->data[2] == 2.0f);
    ac_tensor_free(loss);
    ac_tensor_free(y);
    CHECK(releases == 1);   /* given_grad was made in backward's own scope, which freed it */
    ac_set_grad_enabled(0);   /* no node: released at once */
    y = ac_function_apply("double", values, inputs, 1, double_grad, count_release, NULL);
    CHECK(y && !y->node && releases == 2);
    ac_set_grad_enabled(1);
    ac_tensor_free(y);
    CHECK(ac_function_apply("double", NULL, inputs, 1, double_grad, count_release, NULL) == NULL && releases == 3);
    CHECK(ac_function_apply("double", values, NULL, 1, double_grad, count_release, NULL) == NULL && releases == 4);
    ac_tensor_free(values);
    ac_tensor_free(x);
}

static void test_shared_memory(void)
{
    const float xv[4] = {1, 2, 3, 4};
    const int64_t shape[1] = {4}, two[1] = {2};
    AcTensor *x = ac_tensor_from_data(xv, shape, 1), *s, *again, *tail;
    char name[AC_SHARED_NAME_MAX];
    int64_t offset = -1;
    s = ac_tensor_share(x);
    CHECK(s && s->data[3] == 4.0f);
    CHECK(ac_tensor_shared_name(x, name, sizeof name, &offset) == 0);
    CHECK(s && ac_tensor_shared_name(s, name, sizeof name, &offset) == 1 && offset == 0 && name[0] == '/');
    again = ac_tensor_open_shared(name, 0, shape, 1, AC_FLOAT32);
    tail = ac_tensor_open_shared(name, 8, two, 1, AC_FLOAT32);
    CHECK(again && tail && tail->data[0] == 3.0f);
    if (again && s) {
        again->data[1] = 20.0f;
        CHECK(s->data[1] == 20.0f);   /* one memory, two mappings */
    }
    CHECK(ac_tensor_open_shared(name, 8, shape, 1, AC_FLOAT32) == NULL && message_has("does not hold"));
    CHECK(ac_tensor_open_shared("/no-such-aicraft-object", 0, shape, 1, AC_FLOAT32) == NULL);
    CHECK(ac_tensor_open_shared("bad/name", 0, shape, 1, AC_FLOAT32) == NULL && message_has("bad shared"));
    ac_tensor_free(again);
    ac_tensor_free(tail);
    ac_tensor_free(s);   /* the creator's last reference: the name is gone */
    CHECK(ac_tensor_open_shared(name, 0, shape, 1, AC_FLOAT32) == NULL);
    CHECK(ac_tensor_share(NULL) == NULL);
    ac_tensor_free(x);
}

int main(void)
{
    RUN(test_rng_state_round_trip);
    RUN(test_randperm);
    RUN(test_multinomial);
    RUN(test_function_node);
    RUN(test_shared_memory);
    return TEST_REPORT();
}
