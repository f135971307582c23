/*
 * rnn_gates.h - the recurrent layers' gate math (ops/rnn.c): one step's fused
 * elementwise loops, forward and backward, as parallel_for tasks over the
 * step's batch rows.
 */
#ifndef AC_RNN_GATES_H
#define AC_RNN_GATES_H

#include <stdint.h>

/*
 * One step, batch-major: row b of a (B, width) block is at block + b * width,
 * except h, h_prev and dh_out, whose rows are their *_ld apart (rows of the
 * layer's output; h_prev_ld 0 repeats one row of zeros). G*H wide: gates, hs,
 * dg, dgh, bias, bias_h; H wide: the rest.
 */
typedef struct {
    int64_t hidden;   /* H */
    int relu;         /* plain RNN: relu, else tanh */
    const float *bias, *bias_h;   /* b_ih + b_hh (LSTM, plain); the GRU's b_ih and b_hh */
    float *gates;     /* forward: pre-activations in (without bias), gates out */
    const float *hs;  /* GRU: W_hh h (without b_hh) */
    float *hn;        /* GRU: the hidden part of n, W_hn h + b_hn */
    const float *c_prev, *tanh_c;
    float *c_next, *tanh_out;
    const float *h_prev;
    int64_t h_prev_ld;
    float *h;
    int64_t h_ld;
    const float *dh_out;   /* backward: the step's output gradient rows */
    int64_t dh_out_ld;
    float *dh;        /* in: dh from the step after; GRU out: its direct part, dh * z */
    float *dc;        /* LSTM: in dc of the cell made, out dc of the cell started from */
    float *dg, *dgh;  /* pre-activation gradients, of the input and hidden parts */
} GateJob;

/* parallel_for tasks over the step's rows [begin, end) */
void rnn_lstm_task(void *ctx, int64_t begin, int64_t end);
void rnn_lstm_back_task(void *ctx, int64_t begin, int64_t end);
void rnn_gru_task(void *ctx, int64_t begin, int64_t end);
void rnn_gru_back_task(void *ctx, int64_t begin, int64_t end);
void rnn_plain_task(void *ctx, int64_t begin, int64_t end);
void rnn_plain_back_task(void *ctx, int64_t begin, int64_t end);

#endif /* AC_RNN_GATES_H */
