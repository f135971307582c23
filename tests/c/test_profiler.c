/*
 * test_profiler.c - the profiler on a known program: event names, kinds, call
 * counts, nesting and self time, ranges as scopes, FLOPs of linear and its
 * backward, bytes allocated, shapes; graphs recorded and replayed while it
 * runs; the pool's chunks as events; the trace written by ac_profiler_dump;
 * bad calls fail cleanly.
 */
#include "ac.h"
#include "test.h"

#include <string.h>

static int count_events(const char *name, AcProfileEvent *found)
{
    AcProfileEvent e;
    int64_t i, n = ac_profiler_num_events();
    int count = 0;
    for (i = 0; i < n; i++) {
        ac_profiler_event(i, &e);
        if (strcmp(e.name, name) != 0) continue;
        if (found) *found = e;
        count++;
    }
    return count;
}

/* relu(linear(x, w, b)).sum().backward() inside range "step", twice */
static void test_known_program(void)
{
    const int64_t xs[2] = {8, 5}, ws[2] = {6, 5}, bs[1] = {6};
    AcTensor *x = ac_randn(xs, 2), *w = ac_randn(ws, 2), *b = ac_randn(bs, 1);
    AcProfileEvent e, step;
    int k;
    ac_tensor_set_requires_grad(w, 1);
    ac_tensor_set_requires_grad(b, 1);
    CHECK(ac_profiler_start(1) == AC_OK);
    for (k = 0; k < 2; k++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        CHECK(ac_profiler_push("step") == 1);
        CHECK(ac_backward(ac_sum(ac_relu(ac_linear(x, w, b)), NULL, 0, 0)) == AC_OK);
        CHECK(ac_profiler_pop() == AC_OK);
        ac_mem_restore(cp);
    }
    CHECK(ac_profiler_stop() == AC_OK);

    CHECK(count_events("step", &step) == 2);
    CHECK(step.kind == AC_EVENT_RANGE && step.depth == 0 && step.scope[0] == '\0');
    CHECK(count_events("linear", &e) == 2);
    CHECK(e.kind == AC_EVENT_OP && e.depth == 1 && e.thread == 0);
    CHECK(strcmp(e.scope, "step") == 0);
    CHECK(e.flops == 2 * 8 * 6 * 5);
    CHECK(strcmp(e.shapes, "[[8, 5], [6, 5], [6]]") == 0);
    CHECK(e.bytes >= 8 * 6 * (int64_t)sizeof(float) && e.self_bytes == e.bytes);
    CHECK(e.self_ns == e.duration_ns && e.duration_ns > 0);
    CHECK(e.start_ns >= step.start_ns && e.start_ns + e.duration_ns <= step.start_ns + step.duration_ns);
    CHECK(count_events("relu", NULL) == 2 && count_events("sum", NULL) == 2);
    CHECK(count_events("backward", &e) == 2);
    CHECK(e.kind == AC_EVENT_OP && e.depth == 1);
    CHECK(e.self_ns < e.duration_ns);   /* its nodes' events are nested in it */
    CHECK(count_events("linear_backward", &e) == 2);
    CHECK(e.kind == AC_EVENT_BACKWARD && e.depth == 2 && strcmp(e.scope, "step") == 0);
    CHECK(e.flops == 2 * 8 * 6 * 5);   /* x needs no gradient, b's is a sum: w's product only */
    CHECK(count_events("relu_backward", NULL) == 2 && count_events("sum_backward", NULL) == 2);
    CHECK(step.self_ns < step.duration_ns && step.self_ns >= 0);
    ac_tensor_free(x);
    ac_tensor_free(w);
    ac_tensor_free(b);
}

/* Off: nothing is recorded; a session forgets the last one. */
static void test_off_records_nothing(void)
{
    const int64_t s[1] = {4};
    AcTensor *a = ac_full(s, 1, 1.0f), *r;
    CHECK(ac_profiler_start(0) == AC_OK);
    CHECK(ac_profiler_stop() == AC_OK);
    r = ac_relu(a);
    CHECK(ac_profiler_push("outside") == 0);
    CHECK(ac_profiler_pop() == AC_OK);
    CHECK(ac_profiler_num_events() == 0);
    ac_tensor_free(r);
    ac_tensor_free(a);
}

/* Recording a graph while profiling: both see the ops; replay is profiled too. */
static void test_graph_and_profiler_share_the_entry(void)
{
    const int64_t s[2] = {3, 4};
    AcTensor *x = ac_randn(s, 2), *r, *y, *out = NULL;
    AcGraph *g;
    CHECK(ac_profiler_start(0) == AC_OK);
    g = ac_graph_begin();
    CHECK(ac_graph_input(g, x) == AC_OK);
    r = ac_relu(x);
    y = ac_exp(r);
    CHECK(ac_graph_end(g, &y, 1) == AC_OK);
    CHECK(ac_graph_num_nodes(g) == 2);
    CHECK(ac_graph_replay(g, &x, 1, &out, 1) == AC_OK);
    CHECK(ac_profiler_stop() == AC_OK);
    CHECK(count_events("relu", NULL) == 2 && count_events("exp", NULL) == 2);
    ac_tensor_free(out);
    ac_tensor_free(y);
    ac_tensor_free(r);
    ac_graph_free(g);
    ac_tensor_free(x);
}

/* With two threads a large enough matmul runs as pool chunks: events named for it. */
static void test_pool_work_is_its_own_events(void)
{
    const int64_t s[3] = {8, 64, 64};
    AcTensor *a = ac_randn(s, 3), *b = ac_randn(s, 3);
    AcProfileEvent e;
    int tries, tasks = 0;
    memset(&e, 0, sizeof e);
    ac_set_num_threads(2);
    /* the pool runs jobs serially for a while after slow ones (a busy machine): try again */
    for (tries = 0; tries < 200 && tasks == 0; tries++) {
        AcTensor *c;
        CHECK(ac_profiler_start(0) == AC_OK);
        c = ac_matmul(a, b);
        CHECK(ac_profiler_stop() == AC_OK);
        tasks = count_events("matmul [task]", &e);
        ac_tensor_free(c);
    }
    CHECK(tasks > 0);
    CHECK(e.kind == AC_EVENT_TASK);
    CHECK(e.thread == 0 ? e.depth == 1 : e.depth == 0);
    ac_tensor_free(a);
    ac_tensor_free(b);
}

static void test_dump_writes_a_trace(void)
{
    const int64_t s[1] = {4};
    AcTensor *a = ac_full(s, 1, 1.0f), *r;
    FILE *f = tmpfile();
    char text[4096];
    size_t len;
    CHECK(ac_profiler_start(0) == AC_OK);
    CHECK(ac_profiler_push("a \"quoted\" range") == 1);
    r = ac_neg(a);
    CHECK(ac_profiler_pop() == AC_OK);
    CHECK(ac_profiler_stop() == AC_OK);
    CHECK(f && ac_profiler_dump(f) == AC_OK);
    rewind(f);
    len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    CHECK(strstr(text, "\"traceEvents\"") != NULL);
    CHECK(strstr(text, "\"name\": \"neg\", \"cat\": \"op\", \"ph\": \"X\"") != NULL);
    CHECK(strstr(text, "a \\\"quoted\\\" range") != NULL);
    fclose(f);
    ac_tensor_free(r);
    ac_tensor_free(a);
}

static void test_bad_calls(void)
{
    AcProfileEvent e;
    CHECK(ac_profiler_stop() == AC_ERR_STATE);
    CHECK(ac_profiler_start(2) == AC_ERR_ARG);
    CHECK(ac_profiler_start(0) == AC_OK);
    CHECK(ac_profiler_start(0) == AC_ERR_STATE);
    CHECK(ac_profiler_push(NULL) == AC_ERR_ARG);
    CHECK(ac_profiler_pop() == AC_ERR_STATE);
    CHECK(ac_profiler_num_events() == AC_ERR_STATE);
    CHECK(ac_profiler_dump(stdout) == AC_ERR_STATE);
    CHECK(ac_profiler_push("left open") == 1);
    CHECK(ac_profiler_stop() == AC_OK);   /* closes it */
    CHECK(ac_profiler_num_events() == 1);
    CHECK(ac_profiler_event(1, &e) == AC_ERR_INDEX);
    CHECK(ac_profiler_event(-1, &e) == AC_ERR_INDEX);
    CHECK(ac_profiler_event(0, NULL) == AC_ERR_ARG);
    CHECK(ac_profiler_event(0, &e) == AC_OK && e.duration_ns >= 0);
    CHECK(ac_profiler_dump(NULL) == AC_ERR_ARG);
    CHECK(strstr(ac_last_error(), "profiler_dump") != NULL);
}

int main(void)
{
    RUN(test_known_program);
    RUN(test_off_records_nothing);
    RUN(test_graph_and_profiler_share_the_entry);
    RUN(test_pool_work_is_its_own_events);
    RUN(test_dump_writes_a_trace);
    RUN(test_bad_calls);
    return TEST_REPORT();
}
