/*
 * rnn_gates.h - the recurrent layers' gate math (ops/rnn.c): one step's fused
 * elementwise loops, forward and backward, as parallel_for tasks over a
 * GateJob's elements.
 */
#ifndef AC_RNN_GATES_H
#define AC_RNN_GATES_H

#include <stdint.h>

/* One step's gate blocks, feature-major (G*H, B) each; span = H*B. */
typedef struct {
    int64_t span;
    int relu;   /* plain RNN: relu, else tanh */
    const float *pre, *hs, *c_prev, *tanh_c, *h_prev;
    float *gates, *hn, *c_next, *tanh_out, *h, *dh, *dc, *dg, *dgh;
} GateJob;

/* parallel_for tasks over elements [begin, end) of one step */
void rnn_lstm_task(void *ctx, int64_t begin, int64_t end);
void rnn_lstm_back_task(void *ctx, int64_t begin, int64_t end);
void rnn_gru_task(void *ctx, int64_t begin, int64_t end);
void rnn_gru_back_task(void *ctx, int64_t begin, int64_t end);
void rnn_plain_task(void *ctx, int64_t begin, int64_t end);
void rnn_plain_back_task(void *ctx, int64_t begin, int64_t end);

#endif /* AC_RNN_GATES_H */
