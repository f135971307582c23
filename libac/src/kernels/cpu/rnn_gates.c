/*
 * rnn_gates.c - the gate math of the LSTM, GRU and plain RNN layers
 * (ops/rnn.c): PyTorch's equations and gate order, one fused loop per step and
 * direction, forward and backward, over the step's batch rows.
 */
#include "kernels/cpu.h"
#include "kernels/cpu/rnn_gates.h"
#include "kernels/vecmath.h"


/* ---- gate math, one batch row ------------------------------------------------ */

/* A row of G*H holds gate q's H values at [q * H, q * H + H). sigmoid_scalar
   and tanh_scalar (vecmath.h) are plain arithmetic, so the loops vectorise. */

/* LSTM: g holds x W_ih^T + W_hh h of gates i, f, g, o, and gets them
   activated; bias is b_ih + b_hh. */
CPU_CLONES static void lstm_row(int64_t H, const float *restrict bias, float *restrict g,
                                 const float *restrict c_prev, float *restrict c_next,
                                 float *restrict tanh_c, float *restrict h)
{
    int64_t k;
    for (k = 0; k < H; k++) {
        float i = sigmoid_scalar(g[k] + bias[k]);
        float f = sigmoid_scalar(g[H + k] + bias[H + k]);
        float gv = tanh_scalar(g[2 * H + k] + bias[2 * H + k]);
        float o = sigmoid_scalar(g[3 * H + k] + bias[3 * H + k]);
        float c = f * c_prev[k] + i * gv;
        float t = tanh_scalar(c);
        g[k] = i;
        g[H + k] = f;
        g[2 * H + k] = gv;
        g[3 * H + k] = o;
        c_next[k] = c;
        tanh_c[k] = t;
        h[k] = o * t;
    }
}

/* LSTM backward: the step's output gradient dh_out plus dh from the step
   after, and dc in; the pre-activation gradients dg out, and dc becomes the
   gradient of the cell the step started from. */
CPU_CLONES static void lstm_row_back(int64_t H, const float *restrict g,
                                      const float *restrict c_prev, const float *restrict tanh_c,
                                      const float *restrict dh_out, const float *restrict dh,
                                      float *restrict dc, float *restrict dg)
{
    int64_t k;
    for (k = 0; k < H; k++) {
        float i = g[k], f = g[H + k], gv = g[2 * H + k], o = g[3 * H + k], t = tanh_c[k];
        float dhv = dh_out[k] + dh[k];
        float dcv = dc[k] + dhv * o * (1.0f - t * t);
        dg[k] = dcv * gv * i * (1.0f - i);
        dg[H + k] = dcv * c_prev[k] * f * (1.0f - f);
        dg[2 * H + k] = dcv * i * (1.0f - gv * gv);
        dg[3 * H + k] = dhv * t * o * (1.0f - o);
        dc[k] = dcv * f;
    }
}

/* GRU: g holds x W_ih^T of parts r, z, n and gets r, z, n; hs holds W_hh h;
   hn gets the hidden part of n, W_hn h + b_hn. */
CPU_CLONES static void gru_row(int64_t H, const float *restrict b_ih, const float *restrict b_hh,
                                float *restrict g, const float *restrict hs, float *restrict hn,
                                const float *restrict h_prev, float *restrict h)
{
    int64_t k;
    for (k = 0; k < H; k++) {
        float r = sigmoid_scalar(g[k] + b_ih[k] + (hs[k] + b_hh[k]));
        float z = sigmoid_scalar(g[H + k] + b_ih[H + k] + (hs[H + k] + b_hh[H + k]));
        float hnv = hs[2 * H + k] + b_hh[2 * H + k];
        float nv = tanh_scalar(g[2 * H + k] + b_ih[2 * H + k] + r * hnv);
        h[k] = (1.0f - z) * nv + z * h_prev[k];
        g[k] = r;
        g[H + k] = z;
        g[2 * H + k] = nv;
        hn[k] = hnv;
    }
}

/* GRU backward: dg gets the pre-activation gradients of the input part (r, z,
   n), dgh those of the hidden part, which differ in n by the factor r; dh
   becomes the direct part of dh_prev, dh * z. */
CPU_CLONES static void gru_row_back(int64_t H, const float *restrict g, const float *restrict hn,
                                     const float *restrict h_prev, const float *restrict dh_out,
                                     float *restrict dh, float *restrict dg, float *restrict dgh)
{
    int64_t k;
    for (k = 0; k < H; k++) {
        float r = g[k], z = g[H + k], nv = g[2 * H + k];
        float dhv = dh_out[k] + dh[k];
        float dn = dhv * (1.0f - z) * (1.0f - nv * nv);
        float dz = dhv * (h_prev[k] - nv) * z * (1.0f - z);
        float dr = dn * hn[k] * r * (1.0f - r);
        dg[k] = dr;
        dg[H + k] = dz;
        dg[2 * H + k] = dn;
        dgh[k] = dr;
        dgh[H + k] = dz;
        dgh[2 * H + k] = dn * r;
        dh[k] = dhv * z;
    }
}

/* Plain RNN: h = tanh(pre + bias) or relu(pre + bias), to pre (kept for
   backward) and to h. */
CPU_CLONES static void plain_row(int64_t H, int relu, const float *restrict bias,
                                  float *restrict pre, float *restrict h)
{
    int64_t k;
    if (relu)
        for (k = 0; k < H; k++) {
            float v = pre[k] + bias[k];
            h[k] = pre[k] = v > 0.0f ? v : 0.0f;
        }
    else
        for (k = 0; k < H; k++) h[k] = pre[k] = tanh_scalar(pre[k] + bias[k]);
}

/* Plain RNN backward: the pre-activation gradient from h and dh. */
CPU_CLONES static void plain_row_back(int64_t H, int relu, const float *restrict h,
                                       const float *restrict dh_out, const float *restrict dh,
                                       float *restrict dg)
{
    int64_t k;
    if (relu)
        for (k = 0; k < H; k++) dg[k] = h[k] > 0.0f ? dh_out[k] + dh[k] : 0.0f;
    else
        for (k = 0; k < H; k++) dg[k] = (dh_out[k] + dh[k]) * (1.0f - h[k] * h[k]);
}

/* ---- tasks ------------------------------------------------------------------ */

void rnn_lstm_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    const int64_t H = j->hidden;
    int64_t b;
    for (b = begin; b < end; b++)
        lstm_row(H, j->bias, j->gates + b * 4 * H, j->c_prev + b * H, j->c_next + b * H,
                 j->tanh_out + b * H, j->h + b * j->h_ld);
}

void rnn_lstm_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    const int64_t H = j->hidden;
    int64_t b;
    for (b = begin; b < end; b++)
        lstm_row_back(H, j->gates + b * 4 * H, j->c_prev + b * H, j->tanh_c + b * H,
                      j->dh_out + b * j->dh_out_ld, j->dh + b * H, j->dc + b * H, j->dg + b * 4 * H);
}

void rnn_gru_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    const int64_t H = j->hidden;
    int64_t b;
    for (b = begin; b < end; b++)
        gru_row(H, j->bias, j->bias_h, j->gates + b * 3 * H, j->hs + b * 3 * H, j->hn + b * H,
                j->h_prev + b * j->h_prev_ld, j->h + b * j->h_ld);
}

void rnn_gru_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    const int64_t H = j->hidden;
    int64_t b;
    for (b = begin; b < end; b++)
        gru_row_back(H, j->gates + b * 3 * H, j->hn + b * H, j->h_prev + b * j->h_prev_ld,
                     j->dh_out + b * j->dh_out_ld, j->dh + b * H, j->dg + b * 3 * H,
                     j->dgh + b * 3 * H);
}

void rnn_plain_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    const int64_t H = j->hidden;
    int64_t b;
    for (b = begin; b < end; b++)
        plain_row(H, j->relu, j->bias, j->gates + b * H, j->h + b * j->h_ld);
}

void rnn_plain_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    const int64_t H = j->hidden;
    int64_t b;
    for (b = begin; b < end; b++)
        plain_row_back(H, j->relu, j->gates + b * H, j->dh_out + b * j->dh_out_ld, j->dh + b * H,
                       j->dg + b * H);
}
