/*
 * rnn_gates.c - the gate math of the LSTM, GRU and plain RNN layers
 * (ops/rnn.c): PyTorch's equations and gate order, one fused loop per step and
 * direction, forward and backward.
 */
#include "kernels/cpu/rnn_gates.h"
#include "kernels/vecmath.h"

/* The gate loops are compiled for AVX-512, AVX2 and plain x86-64, and the CPU
   picks at load time. Elementwise math without reductions or contraction
   gives the same bits on each. No clones under ThreadSanitizer, whose runtime
   is not up yet when their resolvers run at load (as winograd.c). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define GATE_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GATE_KERNEL
#endif

/* ---- gate math ------------------------------------------------------------ */

/* The loops below run over one step's (H, B) blocks, flat: element k of gate q
   is at [q * span + k], span = H * B. sigmoid_scalar and tanh_scalar
   (vecmath.h) are plain arithmetic, so the loops vectorise. */

/* LSTM: pre holds x W_ih^T + b + W_hh h^T of gates i, f, g, o; gates gets
   them activated. */
GATE_KERNEL static void lstm_gates(int64_t n, int64_t span, const float *restrict pre,
                                   float *restrict gates, const float *restrict c_prev,
                                   float *restrict c_next, float *restrict tanh_c,
                                   float *restrict h)
{
    int64_t k;
    for (k = 0; k < n; k++) {
        float i = sigmoid_scalar(pre[k]);
        float f = sigmoid_scalar(pre[span + k]);
        float g = tanh_scalar(pre[2 * span + k]);
        float o = sigmoid_scalar(pre[3 * span + k]);
        float c = f * c_prev[k] + i * g;
        float t = tanh_scalar(c);
        gates[k] = i;
        gates[span + k] = f;
        gates[2 * span + k] = g;
        gates[3 * span + k] = o;
        c_next[k] = c;
        tanh_c[k] = t;
        h[k] = o * t;
    }
}

/* LSTM backward: dh (the step's whole output gradient) and dc in, the
   pre-activation gradients dg out; dc becomes the gradient of the cell the
   step started from. */
GATE_KERNEL static void lstm_gates_back(int64_t n, int64_t span, const float *restrict gates,
                                        const float *restrict c_prev, const float *restrict tanh_c,
                                        const float *restrict dh, float *restrict dc,
                                        float *restrict dg)
{
    int64_t k;
    for (k = 0; k < n; k++) {
        float i = gates[k], f = gates[span + k], g = gates[2 * span + k];
        float o = gates[3 * span + k], t = tanh_c[k];
        float dcv = dc[k] + dh[k] * o * (1.0f - t * t);
        dg[k] = dcv * g * i * (1.0f - i);
        dg[span + k] = dcv * c_prev[k] * f * (1.0f - f);
        dg[2 * span + k] = dcv * i * (1.0f - g * g);
        dg[3 * span + k] = dh[k] * t * o * (1.0f - o);
        dc[k] = dcv * f;
    }
}

/* GRU: xs holds x W_ih^T + b_ih and hs holds W_hh h^T + b_hh, parts r, z, n;
   gates gets r, z, n and hn the hidden part of n, W_hn h + b_hn. */
GATE_KERNEL static void gru_gates(int64_t n, int64_t span, const float *restrict xs,
                                  const float *restrict hs, float *restrict gates,
                                  float *restrict hn, const float *restrict h_prev,
                                  float *restrict h)
{
    int64_t k;
    for (k = 0; k < n; k++) {
        float r = sigmoid_scalar(xs[k] + hs[k]);
        float z = sigmoid_scalar(xs[span + k] + hs[span + k]);
        float nv = tanh_scalar(xs[2 * span + k] + r * hs[2 * span + k]);
        h[k] = (1.0f - z) * nv + z * h_prev[k];
        gates[k] = r;
        gates[span + k] = z;
        gates[2 * span + k] = nv;
        hn[k] = hs[2 * span + k];
    }
}

/* GRU backward: dx gets the pre-activation gradients of the input part (r, z,
   n), dgh those of the hidden part, which differ in n by the factor r; dh
   becomes the direct part of dh_prev, dh * z. */
/* Plain RNN: h = tanh(pre) or relu(pre). */
GATE_KERNEL static void plain_gates(int64_t n, int relu, const float *restrict pre, float *restrict h)
{
    int64_t k;
    if (relu)
        for (k = 0; k < n; k++) h[k] = pre[k] > 0.0f ? pre[k] : 0.0f;
    else
        for (k = 0; k < n; k++) h[k] = tanh_scalar(pre[k]);
}

/* Plain RNN backward: the pre-activation gradient from h and dh. */
GATE_KERNEL static void plain_gates_back(int64_t n, int relu, const float *restrict h,
                                         const float *restrict dh, float *restrict dg)
{
    int64_t k;
    if (relu)
        for (k = 0; k < n; k++) dg[k] = h[k] > 0.0f ? dh[k] : 0.0f;
    else
        for (k = 0; k < n; k++) dg[k] = dh[k] * (1.0f - h[k] * h[k]);
}

GATE_KERNEL static void gru_gates_back(int64_t n, int64_t span, const float *restrict gates,
                                       const float *restrict hn, const float *restrict h_prev,
                                       float *restrict dh, float *restrict dx,
                                       float *restrict dgh)
{
    int64_t k;
    for (k = 0; k < n; k++) {
        float r = gates[k], z = gates[span + k], nv = gates[2 * span + k];
        float dn = dh[k] * (1.0f - z) * (1.0f - nv * nv);
        float dz = dh[k] * (h_prev[k] - nv) * z * (1.0f - z);
        float dr = dn * hn[k] * r * (1.0f - r);
        dx[k] = dr;
        dx[span + k] = dz;
        dx[2 * span + k] = dn;
        dgh[k] = dr;
        dgh[span + k] = dz;
        dgh[2 * span + k] = dn * r;
        dh[k] *= z;
    }
}

/* ---- tasks ------------------------------------------------------------------ */

void rnn_lstm_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    lstm_gates(end - begin, j->span, j->pre + begin, j->gates + begin, j->c_prev + begin,
               j->c_next + begin, j->tanh_out + begin, j->h + begin);
}

void rnn_lstm_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    lstm_gates_back(end - begin, j->span, j->gates + begin, j->c_prev + begin, j->tanh_c + begin,
                    j->dh + begin, j->dc + begin, j->dg + begin);
}

void rnn_gru_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    gru_gates(end - begin, j->span, j->pre + begin, j->hs + begin, j->gates + begin,
              j->hn + begin, j->h_prev + begin, j->h + begin);
}

void rnn_gru_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    gru_gates_back(end - begin, j->span, j->gates + begin, j->hn + begin, j->h_prev + begin,
                   j->dh + begin, j->dg + begin, j->dgh + begin);
}

void rnn_plain_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    plain_gates(end - begin, j->relu, j->pre + begin, j->h + begin);
}

void rnn_plain_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    plain_gates_back(end - begin, j->relu, j->gates + begin, j->dh + begin, j->dg + begin);
}
