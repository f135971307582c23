/*
 * test_graph.c - a C program records a training step (zero_grad, forward,
 * loss, backward, SGD and Adam updates) with ac_graph_begin/end and replays
 * it: the same bits as eager steps, no heap allocation per replay, memory
 * flat; ops the graph cannot replay fail it by name; bad calls fail cleanly;
 * a scalar bound to memory is read from it at each call.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

#define BATCH 8
#define IN 5
#define HIDDEN 6
#define CLASSES 3

typedef struct {
    AcTensor *w1, *b1, *w2, *b2;
    AcTensor *m[4], *v[4];   /* Adam moments of w1, b1, w2, b2 */
    int64_t step;
} Model;

static AcMemStats stats(void)
{
    AcMemStats s;
    ac_memory_stats(&s);
    return s;
}

static AcTensor *param(const int64_t *shape, int ndim)
{
    AcTensor *t = ac_randn(shape, ndim);
    ac_tensor_set_requires_grad(t, 1);
    return t;
}

static void model_init(Model *m, uint64_t seed)
{
    const int64_t s1[2] = {HIDDEN, IN}, s2[1] = {HIDDEN}, s3[2] = {CLASSES, HIDDEN}, s4[1] = {CLASSES};
    AcTensor **p[4];
    int i;
    ac_manual_seed(seed);
    m->w1 = param(s1, 2);
    m->b1 = param(s2, 1);
    m->w2 = param(s3, 2);
    m->b2 = param(s4, 1);
    p[0] = &m->w1, p[1] = &m->b1, p[2] = &m->w2, p[3] = &m->b2;
    for (i = 0; i < 4; i++) {
        m->m[i] = ac_tensor_new((*p[i])->shape, (*p[i])->ndim);
        m->v[i] = ac_tensor_new((*p[i])->shape, (*p[i])->ndim);
    }
    m->step = 0;
}

static void model_free(Model *m)
{
    AcTensor *all[12] = {m->w1, m->b1, m->w2, m->b2, m->m[0], m->m[1], m->m[2], m->m[3],
                         m->v[0], m->v[1], m->v[2], m->v[3]};
    int i;
    for (i = 0; i < 12; i++) {
        ac_tensor_zero_grad(all[i]);
        ac_tensor_free(all[i]);
    }
}

/* One training step: Adam on the first layer, SGD on the second, dropout
   between. Returns the loss (in the current scope). */
static AcTensor *train_step(Model *m, AcTensor *x, AcTensor *y)
{
    AcTensor *params[4] = {m->w1, m->b1, m->w2, m->b2}, *h, *logits, *loss;
    int i;
    for (i = 0; i < 4; i++) ac_tensor_zero_grad(params[i]);
    h = ac_dropout(ac_relu(ac_linear(x, m->w1, m->b1)), 0.25f, 1);
    logits = ac_add(ac_matmul(h, ac_transpose(m->w2, 0, 1)), m->b2);
    loss = ac_cross_entropy(logits, y, AC_REDUCTION_MEAN, 0.0f);
    ac_backward(loss);
    m->step++;
    for (i = 0; i < 2; i++)
        ac_adam_step(params[i], m->m[i], m->v[i], m->step, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 0);
    for (i = 2; i < 4; i++) ac_sgd_step(params[i], NULL, 1, 0.1f, 0.0f, 0.0f, 0, 0.0f);
    return loss;
}

static int same_bits(const AcTensor *a, const AcTensor *b)
{
    return a->size == b->size && memcmp(a->data, b->data, (size_t)a->size * sizeof(float)) == 0;
}

static void make_batch(AcTensor **x, AcTensor **y)
{
    const int64_t xs[2] = {BATCH, IN}, ys[1] = {BATCH};
    int64_t labels[BATCH];
    int i;
    ac_manual_seed(7);
    *x = ac_randn(xs, 2);
    for (i = 0; i < BATCH; i++) labels[i] = i % CLASSES;
    *y = ac_tensor_from_typed(labels, ys, 1, AC_INT64);
}

static void test_replayed_steps_match_eager_steps(void)
{
    Model eager, compiled;
    AcTensor *x, *y, *loss, *out;
    AcGraph *g;
    AcCheckpoint cp;
    int step, ok = 1, i;
    make_batch(&x, &y);
    model_init(&eager, 1);
    model_init(&compiled, 1);
    ac_manual_seed(3);
    for (step = 0; step < 20; step++) {
        cp = ac_mem_checkpoint();
        loss = train_step(&eager, x, y);
        out = ac_tensor_keep(loss);
        ac_mem_restore(cp);
        ac_tensor_free(out);
    }
    ac_manual_seed(3);
    g = ac_graph_begin();
    CHECK(g != NULL);
    CHECK(ac_graph_input(g, x) == AC_OK);
    CHECK(ac_graph_input(g, y) == AC_OK);
    cp = ac_mem_checkpoint();
    loss = train_step(&compiled, x, y);
    CHECK(ac_graph_end(g, &loss, 1) == AC_OK);
    ac_mem_restore(cp);
    CHECK(ac_graph_num_nodes(g) > 10);
    CHECK(strcmp(ac_graph_node_op(g, 4), "linear") == 0);
    CHECK(ac_graph_buffer_kind(g, 0) == AC_BUFFER_INPUT);
    for (step = 1; step < 20; step++) {
        compiled.step++;
        for (i = 0; i < ac_graph_num_nodes(g); i++)   /* Adam's step count, per call */
            if (strcmp(ac_graph_node_op(g, i), "adam_step") == 0)
                CHECK(ac_graph_set_scalar(g, i, 0, (double)compiled.step) == AC_OK);
        ok &= ac_graph_replay(g, (AcTensor *[]){x, y}, 2, &out, 1) == AC_OK;
        ac_tensor_free(out);
    }
    CHECK(ok);
    CHECK(same_bits(eager.w1, compiled.w1) && same_bits(eager.b1, compiled.b1));
    CHECK(same_bits(eager.w2, compiled.w2) && same_bits(eager.b2, compiled.b2));
    CHECK(ac_graph_free(g) == AC_OK);
    model_free(&eager);
    model_free(&compiled);
    ac_tensor_free(x);
    ac_tensor_free(y);
}

static void test_replay_allocates_nothing_and_memory_stays_flat(void)
{
    Model m;
    AcTensor *x, *y, *loss, *out;
    AcGraph *g;
    AcMemStats before, after;
    AcCheckpoint cp;
    int i, ok = 1;
    make_batch(&x, &y);
    model_init(&m, 2);
    g = ac_graph_begin();
    ac_graph_input(g, x);
    ac_graph_input(g, y);
    cp = ac_mem_checkpoint();
    loss = train_step(&m, x, y);
    CHECK(ac_graph_end(g, &loss, 1) == AC_OK);
    ac_mem_restore(cp);
    for (i = 0; i < 10; i++) {   /* warm the arena and the root caches */
        ok &= ac_graph_replay(g, (AcTensor *[]){x, y}, 2, &out, 1) == AC_OK;
        ac_tensor_free(out);
    }
    before = stats();
    for (i = 0; i < 1000; i++) {
        ok &= ac_graph_replay(g, (AcTensor *[]){x, y}, 2, &out, 1) == AC_OK;
        ac_tensor_free(out);
    }
    after = stats();
    CHECK(ok);
    CHECK(after.heap_allocations == before.heap_allocations);
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.live_tensors == before.live_tensors);
    CHECK(after.live_nodes == before.live_nodes);
    ac_graph_free(g);
    model_free(&m);
    ac_tensor_free(x);
    ac_tensor_free(y);
}

static void test_unreplayable_op_fails_the_graph_by_name(void)
{
    const int64_t shape[1] = {4};
    AcTensor *x = ac_full(shape, 1, 1.0f), *r, *s;
    AcGraph *g = ac_graph_begin();
    ac_graph_input(g, x);
    r = ac_rand(shape, 1);   /* random: a graph would replay a constant */
    s = ac_add(x, r);
    CHECK(s != NULL && s->data[0] >= 1.0f);   /* the op still ran */
    CHECK(ac_graph_end(g, &s, 1) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), "rand cannot be recorded") != NULL);
    CHECK(ac_graph_replay(g, &x, 1, &r, 1) == AC_ERR_STATE);
    ac_graph_free(g);
    ac_tensor_free(r);
    ac_tensor_free(s);
    ac_tensor_free(x);
}

static void test_gradient_read_as_a_tensor_fails_the_graph(void)
{
    const int64_t shape[1] = {3};
    AcTensor *w = ac_full(shape, 1, 2.0f), *loss, *g2;
    AcCheckpoint cp = ac_mem_checkpoint();
    AcGraph *g;
    ac_tensor_set_requires_grad(w, 1);
    g = ac_graph_begin();
    loss = ac_sum(ac_mul(w, w), NULL, 0, 0);
    ac_backward(loss);
    g2 = ac_mul_scalar(w->grad, 2.0f);   /* the grad is remade each step: not a constant */
    CHECK(ac_graph_end(g, &g2, 1) == AC_ERR_STATE);
    CHECK(strstr(ac_last_error(), "made inside an earlier op") != NULL);
    ac_graph_free(g);
    ac_mem_restore(cp);
    ac_tensor_zero_grad(w);
    ac_tensor_free(w);
}

static void test_bad_calls_fail_cleanly(void)
{
    const int64_t shape[2] = {2, 3}, other[2] = {3, 3};
    AcTensor *x = ac_full(shape, 2, 1.0f), *wrong = ac_full(other, 2, 1.0f), *y, *out = NULL;
    AcGraph *g = ac_graph_begin();
    CHECK(ac_graph_begin() == NULL && ac_last_error_code() == AC_ERR_STATE);
    CHECK(ac_graph_input(g, NULL) == AC_ERR_ARG);
    CHECK(ac_graph_input(g, x) == AC_OK);
    CHECK(ac_graph_input(g, x) == AC_ERR_STATE);
    y = ac_exp(x);
    CHECK(ac_graph_end(NULL, &y, 1) == AC_ERR_ARG);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_graph_end(g, &y, 1) == AC_ERR_STATE);
    CHECK(ac_graph_replay(g, &wrong, 1, &out, 1) == AC_ERR_SHAPE && out == NULL);
    CHECK(strstr(ac_last_error(), "input 0 is float32 (3, 3)") != NULL);
    CHECK(ac_graph_replay(g, &x, 2, &out, 1) == AC_ERR_ARG);
    CHECK(ac_graph_replay(g, (AcTensor *[]){NULL}, 1, &out, 1) == AC_ERR_ARG);
    CHECK(ac_graph_replay(NULL, &x, 1, &out, 1) == AC_ERR_ARG);
    CHECK(ac_graph_set_scalar(g, 0, 0, 1.0) == AC_ERR_INDEX);   /* exp has no scalars */
    CHECK(ac_graph_set_scalar(g, 5, 0, 1.0) == AC_ERR_INDEX);
    CHECK(ac_graph_node_op(g, -1) == NULL && ac_graph_buffer_kind(g, 99) == AC_ERR_INDEX);
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);   /* still usable */
    CHECK(out && fabsf(out->data[5] - expf(1.0f)) == 0.0f && out != y);
    CHECK(ac_graph_free(NULL) == AC_ERR_ARG);
    ac_graph_free(g);
    ac_tensor_free(out);
    ac_tensor_free(y);
    ac_tensor_free(x);
    ac_tensor_free(wrong);
}

static void test_accepts_tells_which_inputs_replay_takes(void)
{
    const int64_t shape[2] = {2, 3}, other[2] = {3, 3};
    AcTensor *x = ac_full(shape, 2, 1.0f), *same = ac_full(shape, 2, 5.0f);
    AcTensor *wrong = ac_full(other, 2, 1.0f), *y;
    AcGraph *g = ac_graph_begin();
    ac_graph_input(g, x);
    y = ac_exp(x);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_graph_accepts(g, &x, 1) == 1);
    CHECK(ac_graph_accepts(g, &same, 1) == 1);
    CHECK(ac_graph_accepts(g, &wrong, 1) == 0);
    CHECK(strstr(ac_last_error(), "graph_accepts: input 0 is float32 (3, 3)") != NULL);
    CHECK(ac_graph_accepts(NULL, &x, 1) == AC_ERR_ARG);
    CHECK(ac_graph_accepts(g, &x, 2) == AC_ERR_ARG);
    CHECK(ac_graph_accepts(g, NULL, 1) == AC_ERR_ARG);
    CHECK(ac_graph_accepts(g, (AcTensor *[]){NULL}, 1) == AC_ERR_ARG);
    ac_graph_free(g);
    ac_tensor_free(y);
    ac_tensor_free(x);
    ac_tensor_free(same);
    ac_tensor_free(wrong);
}

static void test_call_runs_only_what_fits_the_graph(void)
{
    const int64_t shape[2] = {2, 3}, other[2] = {3, 3};
    AcTensor *x = ac_full(shape, 2, 1.0f), *wrong = ac_full(other, 2, 1.0f), *y, *out = NULL;
    AcGraph *g = ac_graph_begin(), *recording;
    ac_graph_input(g, x);
    y = ac_exp(x);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 1);
    CHECK(out && out != y && out->data[5] == y->data[5]);
    ac_tensor_free(out);
    out = NULL;
    ac_clear_error();
    CHECK(ac_graph_call(g, &wrong, 1, &out, 1) == 0);       /* another signature: no error */
    CHECK(out == NULL && ac_last_error_code() == AC_OK);
    ac_set_grad_enabled(0);
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 0);           /* recorded with grad mode on */
    ac_set_grad_enabled(1);
    recording = ac_graph_begin();
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 0);           /* a recording runs ops eagerly */
    ac_graph_end(recording, NULL, 0);
    ac_graph_free(recording);
    CHECK(out == NULL);
    CHECK(ac_graph_call(NULL, &x, 1, &out, 1) == AC_ERR_ARG);
    CHECK(ac_graph_call(g, &x, 2, &out, 1) == AC_ERR_ARG);
    CHECK(ac_graph_call(g, &x, 1, &out, 0) == AC_ERR_ARG);
    CHECK(ac_graph_call(g, NULL, 1, &out, 1) == AC_ERR_ARG);
    CHECK(ac_graph_call(g, &x, 1, NULL, 1) == AC_ERR_ARG);
    CHECK(ac_graph_call(g, (AcTensor *[]){NULL}, 1, &out, 1) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "graph_call: input 0 is NULL") != NULL);
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 1);           /* still usable */
    ac_tensor_free(out);
    ac_graph_free(g);
    ac_tensor_free(y);
    ac_tensor_free(x);
    ac_tensor_free(wrong);
}

static void test_bound_scalar_is_read_at_each_call(void)
{
    const int64_t shape[1] = {3};
    AcTensor *x = ac_full(shape, 1, 1.5f), *e, *y, *out = NULL;
    AcGraph *g = ac_graph_begin();
    double scale = 3.0, other = 5.0;
    ac_graph_input(g, x);
    e = ac_exp(x);
    y = ac_mul_scalar(e, 2.0f);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_graph_bind_scalar(g, 1, 0, &scale) == AC_OK);
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 1);
    CHECK(out && out->data[2] == expf(1.5f) * 3.0f);
    ac_tensor_free(out);
    scale = 0.25;   /* read when the call starts: no set_scalar */
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);
    CHECK(out->data[0] == expf(1.5f) * 0.25f);
    ac_tensor_free(out);
    CHECK(ac_graph_bind_scalar(g, 1, 0, &other) == AC_OK);   /* replaces the source */
    scale = 7.0;
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 1 && out->data[1] == expf(1.5f) * 5.0f);
    ac_tensor_free(out);
    CHECK(ac_graph_bind_scalar(NULL, 1, 0, &scale) == AC_ERR_ARG);
    CHECK(ac_graph_bind_scalar(g, 1, 0, NULL) == AC_ERR_ARG);
    CHECK(ac_graph_bind_scalar(g, 0, 0, &scale) == AC_ERR_INDEX);   /* exp has no scalars */
    CHECK(strstr(ac_last_error(), "graph_bind_scalar: exp (node 0) has 0 scalar arguments") != NULL);
    CHECK(ac_graph_bind_scalar(g, 2, 0, &scale) == AC_ERR_INDEX);
    CHECK(ac_graph_bind_scalar(g, 1, 1, &scale) == AC_ERR_INDEX);
    CHECK(ac_graph_call(g, &x, 1, &out, 1) == 1 && out->data[0] == expf(1.5f) * 5.0f);   /* still usable */
    ac_tensor_free(out);
    ac_graph_free(g);
    ac_tensor_free(y);
    ac_tensor_free(e);
    ac_tensor_free(x);
}

int main(void)
{
    AcMemStats start = stats(), end;
    RUN(test_replayed_steps_match_eager_steps);
    RUN(test_replay_allocates_nothing_and_memory_stays_flat);
    RUN(test_unreplayable_op_fails_the_graph_by_name);
    RUN(test_gradient_read_as_a_tensor_fails_the_graph);
    RUN(test_bad_calls_fail_cleanly);
    RUN(test_accepts_tells_which_inputs_replay_takes);
    RUN(test_call_runs_only_what_fits_the_graph);
    RUN(test_bound_scalar_is_read_at_each_call);
    end = stats();
    CHECK(end.live_tensors == start.live_tensors);
    CHECK(end.bytes_in_use == start.bytes_in_use);
    return TEST_REPORT();
}
