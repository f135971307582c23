/*
 * replay_step.c - what a compiled FDUAI step costs replay in C, with no Python:
 * X 256x1, scalars w and b, y = X*w + b, MSE, backward, two SGD updates and
 * the zero_grads, recorded with ac_graph_begin/end, then ac_graph_call'd inside
 * a checkpoint per call as Python does. Prints the CPU time per call (best of
 * the rounds) and, with --nodes, each node's share (one replay per node prefix).
 *
 *   make build/bench/replay_step
 *   build/bench/replay_step [calls per round, default 100000] [rounds, default 5]
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include "ac.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROWS 256

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static AcTensor *step(AcTensor *x, AcTensor *y, AcTensor *w, AcTensor *b)
{
    AcTensor *loss;
    ac_tensor_zero_grad(w);
    ac_tensor_zero_grad(b);
    loss = ac_mse_loss(ac_add(ac_mul(x, w), b), y, AC_REDUCTION_MEAN);
    ac_backward(loss);
    ac_sgd_step(w, NULL, 1, 0.1f, 0.0f, 0.0f, 0, 0.0f);
    ac_sgd_step(b, NULL, 1, 0.1f, 0.0f, 0.0f, 0, 0.0f);
    return loss;
}

int main(int argc, char **argv)
{
    const int64_t xs[2] = {ROWS, 1}, ws[1] = {1};
    const long calls = argc > 1 ? atol(argv[1]) : 100000;
    const int rounds = argc > 2 ? atoi(argv[2]) : 5;
    float xd[ROWS], yd[ROWS];
    AcTensor *x, *y, *w, *b, *loss, *out;
    AcGraph *g;
    double best = 1e30;
    long i;
    int r;
    for (i = 0; i < ROWS; i++) {
        xd[i] = (float)i / ROWS;
        yd[i] = 2.0f * xd[i] + 1.0f;
    }
    ac_set_num_threads(1);
    x = ac_tensor_from_data(xd, xs, 2);
    y = ac_tensor_from_data(yd, xs, 2);
    w = ac_tensor_new(ws, 1);
    b = ac_tensor_new(ws, 1);
    ac_tensor_set_requires_grad(w, 1);
    ac_tensor_set_requires_grad(b, 1);
    g = ac_graph_begin();
    ac_graph_input(g, x);
    ac_graph_input(g, y);
    loss = step(x, y, w, b);
    if (ac_graph_end(g, &loss, 1)) {
        fprintf(stderr, "replay_step: %s\n", ac_last_error());
        return 1;
    }
    ac_tensor_free(loss);
    for (r = 0; r < rounds; r++) {
        double start = cpu_seconds(), t;
        for (i = 0; i < calls; i++) {
            AcCheckpoint cp = ac_mem_checkpoint();
            if (ac_graph_call(g, (AcTensor *[]){x, y}, 2, &out, 1) != 1) {
                fprintf(stderr, "replay_step: %s\n", ac_last_error());
                return 1;
            }
            ac_mem_restore(cp);
        }
        t = (cpu_seconds() - start) / (double)calls;
        if (t < best) best = t;
    }
    printf("replay FDUAI step: %.3f us per call (CPU time, best of %d x %ld); w %.6f b %.6f\n",
           best * 1e6, rounds, calls, w->data[0], b->data[0]);
    ac_graph_free(g);
    ac_tensor_zero_grad(w);
    ac_tensor_zero_grad(b);
    ac_tensor_free(x);
    ac_tensor_free(y);
    ac_tensor_free(w);
    ac_tensor_free(b);
    return 0;
}
