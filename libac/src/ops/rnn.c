/*
 * rnn.c - the LSTM, GRU and plain (Elman, tanh or relu) recurrent layers (one
 * layer, one direction) as fused ops, forward and backward through time, with
 * PyTorch's equations and gate order. The plain RNN is the LSTM's machinery
 * with one gate and no cell: G = 1, h' = act(pre-activation).
 *
 * A layer is one node with inputs (x, W, state, saved), within AC_MAX_INPUTS:
 *   W      = [w_ih | w_hh | bias columns], one cat (and an add: the LSTM's two
 *            biases add to the same pre-activations, so it gets one column,
 *            b_ih + b_hh; the GRU's b_hn sits inside r * (W_hn h + b_hn), so it
 *            keeps two). The cat costs one copy of the weights per call; in
 *            return backward makes all weight gradients itself, with no
 *            transposed copies of dG.
 *   state  = h0 (GRU), or h0 and c0 stacked (LSTM), or NULL for zeros.
 *   saved  = what backward needs (see the node's section), a tensor forward
 *            makes when it records a graph; as an input it is freed with the
 *            output (at the end of the step's scope), unlike a node context it
 *            is not zero-filled first, and it grows linearly with T.
 *
 * Forward: the input projection of all time steps is ONE gemm, x W_ih^T. Then
 * each step is one gemm, W_hh h^T, and one fused loop over the gate math. A
 * step's gates are one contiguous (G*H, B) block, feature-major: the weights
 * are gemm's left operand, read where they lie, only the small (B, H) state is
 * packed per step (batch-major gates would repack all of W_hh every step,
 * which costs more than the multiply at small batches), and the gate loop runs
 * flat over the block. Each step moves its rows of the projection into its
 * block with one transpose.
 *
 * Backward walks the steps in reverse: a fused loop turns (dh, dc) into the
 * pre-activation gradients dG of the step, one gemm carries them to dh of the
 * step before; dW += dG [x_t | h_prev] runs as one gemm per DW_CHUNK steps.
 *
 * The node's output is 2-d: the output rows, t*B + b (or b*T + t when
 * batch_first), and for the LSTM B more rows holding c_T. The output sequence
 * is a view of its first T*B rows; h_n and c_n are slices of it, each with its
 * own graph, so all three are differentiable. reverse visits positions T-1 .. 0
 * (a bidirectional layer's second direction), whose final state is then at 0.
 *
 * Not here: stacking layers and the Python modules (aicraft/nn/rnn.py).
 */
#include "internal.h"
#include "kernels/kernels.h"
#include "kernels/transpose.h"
#include "kernels/vecmath.h"

#include <string.h>

#define GATE_GRAIN 4096   /* elements per gate per parallel task, at least */
#define DW_CHUNK 4        /* LSTM steps whose weight-gradient products run as one gemm */

/* The gate loops are compiled for AVX-512, AVX2 and plain x86-64, and the CPU
   picks at load time. Elementwise math without reductions or contraction
   gives the same bits on each. */
#if defined(__GNUC__) && defined(__x86_64__)
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

/* ---- layouts and small helpers --------------------------------------------- */

typedef struct {
    int64_t steps, batch, hidden;
    int batch_first, reverse;
} SeqShape;

/* The batch-major row of (position t, sequence 0), and the distance between a
   position's rows, in a (T, B, .) or (B, T, .) tensor. */
static int64_t step_row(const SeqShape *s, int64_t t) { return s->batch_first ? t : t * s->batch; }
static int64_t batch_stride(const SeqShape *s) { return s->batch_first ? s->steps : 1; }
/* The position visited k-th. */
static int64_t position(const SeqShape *s, int64_t k) { return s->reverse ? s->steps - 1 - k : k; }

/* A position's (B, H) state rows, feature-major into dst (H, B); zeros for NULL. */
static void state_in(float *dst, const float *rows, int64_t ld, int64_t batch, int64_t hidden)
{
    if (rows) matrix_transpose(dst, batch, rows, ld, batch, hidden, 0);
    else memset(dst, 0, (size_t)(batch * hidden) * sizeof(float));
}

/* The transpose (cols x rows) of the rows x cols block w (leading dimension
   ld), in the current scope, its rows padded by 16 floats: gemm packs a left
   operand whose rows are a multiple of 2 KiB apart on every call. */
static float *transposed_block(const float *w, int64_t rows, int64_t cols, int64_t ld, int64_t *t_ld)
{
    float *t;
    *t_ld = rows + 16;
    t = arena_alloc((size_t)(cols * *t_ld) * sizeof(float));
    if (t) matrix_transpose(t, *t_ld, w, ld, rows, cols, 0);
    return t;
}

/* rows x cols from src (leading dimension src_ld) to dst; zeros when src is NULL. */
static void copy_rows(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows,
                      int64_t cols)
{
    int64_t r;
    for (r = 0; r < rows; r++) {
        if (src) memcpy(dst + r * dst_ld, src + r * src_ld, (size_t)cols * sizeof(float));
        else memset(dst + r * dst_ld, 0, (size_t)cols * sizeof(float));
    }
}

/* out[j] += the sum of row j of the rows x cols block m, added in order. */
static void add_row_sums(float *out, int64_t out_stride, const float *m, int64_t rows, int64_t cols)
{
    int64_t j, c;
    for (j = 0; j < rows; j++) {
        float sum = 0.0f;
        for (c = 0; c < cols; c++) sum += m[j * cols + c];
        out[j * out_stride] += sum;
    }
}

/* The index of inputs[i] among the node's recorded inputs (NULL ones are not
   recorded), or -1 when it is NULL. */
static int recorded_index(const AcTensor *const *inputs, int i)
{
    int j, index = 0;
    if (!inputs[i]) return -1;
    for (j = 0; j < i; j++)
        if (inputs[j]) index++;
    return index;
}

/* rows x cols block m += column col (stride ld) of w, one value per row. */
static void add_column(float *m, int64_t rows, int64_t cols, const float *col, int64_t ld)
{
    int64_t j, k;
    for (j = 0; j < rows; j++) {
        const float v = col[j * ld];
        for (k = 0; k < cols; k++) m[j * cols + k] += v;
    }
}

/* ---- argument checks ------------------------------------------------------- */

typedef enum { CELL_LSTM, CELL_GRU, CELL_TANH, CELL_RELU } Cell;

typedef struct {
    const char *op;
    int n_gates;    /* 4 (LSTM), 3 (GRU) or 1 (plain) */
    Cell cell;
} RnnKind;

static int check_state(const RnnKind *k, const AcTensor *state, const char *what,
                       const SeqShape *s, const AcTensor *x)
{
    if (state && (state->ndim != 2 || state->shape[0] != s->batch || state->shape[1] != s->hidden))
        return error_set(AC_ERR_SHAPE, "%s: %s %s must be (batch, hidden) = (%lld, %lld) for input %s",
                         k->op, what, tensor_shape_str(state), (long long)s->batch,
                         (long long)s->hidden, tensor_shape_str(x));
    return AC_OK;
}

static int check_bias(const RnnKind *k, const AcTensor *bias, const char *what, int64_t gates)
{
    if (bias && (bias->ndim != 1 || bias->shape[0] != gates))
        return error_set(AC_ERR_SHAPE, "%s: %s %s must be (%lld,)", k->op, what,
                         tensor_shape_str(bias), (long long)gates);
    return AC_OK;
}

/* Check a layer's arguments; write the layout to *s. */
static int rnn_check(const RnnKind *k, const AcTensor *x, const AcTensor *h0, const AcTensor *c0,
                     const AcTensor *w_ih, const AcTensor *w_hh, const AcTensor *b_ih,
                     const AcTensor *b_hh, int batch_first, int reverse, SeqShape *s)
{
    const char *op = k->op;
    int64_t gates, hidden;
    if (tensor_check(op, x, "input") || tensor_check(op, w_ih, "w_ih") ||
        tensor_check(op, w_hh, "w_hh") ||
        cpu_only(op, (const AcTensor *[]){x, h0, c0, w_ih, w_hh, b_ih, b_hh}, 7))
        return -1;
    if (x->ndim != 3)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be 3-d, %s", op, tensor_shape_str(x),
                         batch_first ? "(batch, seq, features)" : "(seq, batch, features)");
    if (w_ih->ndim != 2 || w_ih->shape[0] == 0 || w_ih->shape[0] % k->n_gates != 0)
        return error_set(AC_ERR_SHAPE, "%s: w_ih %s must be (%d * hidden, features) with hidden > 0",
                         op, tensor_shape_str(w_ih), k->n_gates);
    gates = w_ih->shape[0];
    hidden = gates / k->n_gates;
    if (w_ih->shape[1] != x->shape[2])
        return error_set(AC_ERR_SHAPE, "%s: input %s has %lld features, w_ih %s expects %lld", op,
                         tensor_shape_str(x), (long long)x->shape[2], tensor_shape_str(w_ih),
                         (long long)w_ih->shape[1]);
    if (w_hh->ndim != 2 || w_hh->shape[0] != gates || w_hh->shape[1] != hidden)
        return error_set(AC_ERR_SHAPE, "%s: w_hh %s must be (%lld, %lld) to fit w_ih %s", op,
                         tensor_shape_str(w_hh), (long long)gates, (long long)hidden,
                         tensor_shape_str(w_ih));
    if (check_bias(k, b_ih, "b_ih", gates) || check_bias(k, b_hh, "b_hh", gates)) return -1;
    s->steps = x->shape[batch_first ? 1 : 0];
    s->batch = x->shape[batch_first ? 0 : 1];
    s->hidden = hidden;
    s->batch_first = batch_first != 0;
    s->reverse = reverse != 0;
    if (s->steps == 0 || s->batch == 0)
        return error_set(AC_ERR_SHAPE, "%s: input %s has no %s", op, tensor_shape_str(x),
                         s->steps == 0 ? "time steps" : "sequences");
    if (check_state(k, h0, "h0", s, x) || check_state(k, c0, "c0", s, x)) return -1;
    /* Saved arrays hold up to 8 * H floats per step and sequence. */
    if (s->steps * s->batch > (INT64_MAX / 64) / (8 * hidden))
        return error_set(AC_ERR_MEMORY, "%s: input %s with hidden size %lld is too large", op,
                         tensor_shape_str(x), (long long)hidden);
    return AC_OK;
}

/* ---- the layer node ------------------------------------------------------------ */

/*
 * One node per layer, inputs (x, W, state, saved):
 *   W      [w_ih | w_hh | bias columns], (G*H, I + H + bias_cols): the LSTM and
 *          the plain RNN have one bias column, b_ih + b_hh, the GRU two.
 *   state  the initial state or NULL: LSTM (2, B, H), h0 then c0; else (B, H).
 *   saved  what backward needs, made by forward when it records a graph: LSTM
 *          gates (T, 4H, B), the cells the steps started from and tanh of the
 *          cells they made (T, H, B each); GRU gates r, z, n (T, 3H, B) and the
 *          hidden part of n, W_hn h + b_hn (T, H, B); plain RNN the states it
 *          made (T, H, B). Blocks go by position.
 *          Until step t runs, its gates block holds its rows of the input
 *          projection, which the step reads before writing its gates there.
 */
typedef struct {
    SeqShape s;
    Cell cell;
    int64_t features;                /* I */
    int bias_cols;
    int state_index, saved_index;    /* recorded input index, -1 when NULL */
} RnnCtx;

typedef struct {
    int64_t span;
    int relu;   /* plain RNN: relu, else tanh */
    const float *pre, *hs, *c_prev, *tanh_c, *h_prev;
    float *gates, *hn, *c_next, *tanh_out, *h, *dh, *dc, *dg, *dgh;
} GateJob;

static void lstm_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    lstm_gates(end - begin, j->span, j->pre + begin, j->gates + begin, j->c_prev + begin,
               j->c_next + begin, j->tanh_out + begin, j->h + begin);
}

static void lstm_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    lstm_gates_back(end - begin, j->span, j->gates + begin, j->c_prev + begin, j->tanh_c + begin,
                    j->dh + begin, j->dc + begin, j->dg + begin);
}

static void gru_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    gru_gates(end - begin, j->span, j->pre + begin, j->hs + begin, j->gates + begin,
              j->hn + begin, j->h_prev + begin, j->h + begin);
}

static void gru_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    gru_gates_back(end - begin, j->span, j->gates + begin, j->hn + begin, j->h_prev + begin,
                   j->dh + begin, j->dg + begin, j->dgh + begin);
}

static void plain_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    plain_gates(end - begin, j->relu, j->pre + begin, j->h + begin);
}

static void plain_back_task(void *ctx, int64_t begin, int64_t end)
{
    const GateJob *j = ctx;
    plain_gates_back(end - begin, j->relu, j->gates + begin, j->dh + begin, j->dg + begin);
}

/* The input projection of all steps, ONE gemm: xp (T*B, G*H) = x W_ih^T, rows
   in time-major order (the steps add b_ih as they read their rows). */
static int project_inputs(const AcTensor *x, const AcTensor *W, const RnnCtx *c, float *xp)
{
    const SeqShape *s = &c->s;
    const int64_t T = s->steps, B = s->batch, I = c->features, TB = T * B;
    const int64_t GH = W->shape[0], ldw = W->shape[1];
    const float *rows = x->data;
    size_t copy_bytes = 0;
    float *copy = NULL;
    int64_t t, b;
    if (s->batch_first && I > 0) {
        copy_bytes = (size_t)(TB * I) * sizeof(float);
        if (!(copy = scratch_alloc(copy_bytes))) return AC_ERR_MEMORY;
        for (t = 0; t < T; t++)
            for (b = 0; b < B; b++)
                memcpy(copy + (t * B + b) * I, x->data + (b * T + t) * I, (size_t)I * sizeof(float));
        rows = copy;
    }
    gemm(0, 1, TB, GH, I, 1.0f, rows, I, W->data, ldw, 0.0f, xp, GH);
    if (copy) scratch_free(copy, copy_bytes);
    return AC_OK;
}

static int lstm_steps(const AcTensor *W, const AcTensor *state, const RnnCtx *c, float *saved,
                      const float *xp, float *P)
{
    const SeqShape *s = &c->s;
    const int64_t T = s->steps, B = s->batch, H = s->hidden, HB = H * B, bs = batch_stride(s);
    const int64_t I = c->features, ldw = W->shape[1];
    const size_t scratch_bytes = (size_t)(12 * HB) * sizeof(float);
    float *scratch = scratch_alloc(scratch_bytes), *pre, *cells[2];
    float *gates = saved, *c_prev = saved ? saved + 4 * HB * T : NULL;
    float *tanh_c = saved ? c_prev + HB * T : NULL;
    const float *h0 = state ? state->data : NULL, *c0 = state ? state->data + HB : NULL;
    GateJob job;
    int64_t k;
    if (!scratch) return AC_ERR_MEMORY;
    pre = scratch;
    job.span = HB;
    job.pre = pre;
    job.h = scratch + 8 * HB;
    cells[0] = job.h + HB;
    cells[1] = cells[0] + HB;
    state_in(saved ? c_prev + position(s, 0) * HB : cells[0], c0, H, B, H);
    for (k = 0; k < T; k++) {
        const int64_t t = position(s, k);
        const float *h_in = k == 0 ? h0 : P + step_row(s, position(s, k - 1)) * H;
        const int64_t h_in_ld = k == 0 ? H : bs * H;
        job.gates = saved ? gates + t * 4 * HB : scratch + 4 * HB;
        job.c_prev = saved ? c_prev + t * HB : cells[k % 2];
        job.c_next = !saved ? cells[(k + 1) % 2] : k + 1 < T ? c_prev + position(s, k + 1) * HB : cells[0];
        job.tanh_out = saved ? tanh_c + t * HB : cells[1] + HB;
        matrix_transpose(pre, B, xp + t * B * 4 * H, 4 * H, B, 4 * H, 0);
        if (c->bias_cols) add_column(pre, 4 * H, B, W->data + I + H, ldw);
        if (h_in) gemm(0, 1, 4 * H, B, H, 1.0f, W->data + I, ldw, h_in, h_in_ld, 1.0f, pre, B);
        parallel_for(HB, GATE_GRAIN, lstm_task, &job);
        matrix_transpose(P + step_row(s, t) * H, bs * H, job.h, B, H, B, 0);
    }
    matrix_transpose(P + T * HB, H, job.c_next, B, H, B, 0);   /* c_T, after the T*B output rows */
    scratch_free(scratch, scratch_bytes);
    return AC_OK;
}

static int gru_steps(const AcTensor *W, const AcTensor *state, const RnnCtx *c, float *saved,
                     const float *xp, float *out)
{
    const SeqShape *s = &c->s;
    const int64_t T = s->steps, B = s->batch, H = s->hidden, HB = H * B, bs = batch_stride(s);
    const int64_t I = c->features, ldw = W->shape[1];
    const size_t scratch_bytes = (size_t)(12 * HB) * sizeof(float);
    float *scratch = scratch_alloc(scratch_bytes), *xs, *hs, *states[2];
    float *gates = saved, *hn = saved ? saved + 3 * HB * T : NULL;
    GateJob job;
    int64_t k, j;
    if (!scratch) return AC_ERR_MEMORY;
    xs = scratch;
    hs = scratch + 3 * HB;
    states[0] = scratch + 10 * HB;
    states[1] = states[0] + HB;
    job.span = HB;
    job.pre = xs;
    job.hs = hs;
    state_in(states[0], state ? state->data : NULL, H, B, H);
    for (k = 0; k < T; k++) {
        const int64_t t = position(s, k);
        const float *h_in = k == 0 ? (state ? state->data : NULL)
                                   : out + step_row(s, position(s, k - 1)) * H;
        const int64_t h_in_ld = k == 0 ? H : bs * H;
        job.gates = saved ? gates + t * 3 * HB : scratch + 6 * HB;
        job.hn = saved ? hn + t * HB : scratch + 9 * HB;
        job.h_prev = states[k % 2];
        job.h = states[(k + 1) % 2];
        matrix_transpose(xs, B, xp + t * B * 3 * H, 3 * H, B, 3 * H, 0);
        if (c->bias_cols) add_column(xs, 3 * H, B, W->data + I + H, ldw);
        for (j = 0; j < 3 * H; j++) {   /* W_hh h^T + b_hh */
            const float bias = c->bias_cols ? W->data[j * ldw + I + H + 1] : 0.0f;
            int64_t b;
            for (b = 0; b < B; b++) hs[j * B + b] = bias;
        }
        if (h_in) gemm(0, 1, 3 * H, B, H, 1.0f, W->data + I, ldw, h_in, h_in_ld, 1.0f, hs, B);
        parallel_for(HB, GATE_GRAIN, gru_task, &job);
        matrix_transpose(out + step_row(s, t) * H, bs * H, job.h, B, H, B, 0);
    }
    scratch_free(scratch, scratch_bytes);
    return AC_OK;
}

static int plain_steps(const AcTensor *W, const AcTensor *state, const RnnCtx *c, float *saved,
                       const float *xp, float *out)
{
    const SeqShape *s = &c->s;
    const int64_t T = s->steps, B = s->batch, H = s->hidden, HB = H * B, bs = batch_stride(s);
    const int64_t I = c->features, ldw = W->shape[1];
    const size_t scratch_bytes = (size_t)(2 * HB) * sizeof(float);
    float *scratch = scratch_alloc(scratch_bytes);
    GateJob job;
    int64_t k;
    if (!scratch) return AC_ERR_MEMORY;
    job.span = HB;
    job.relu = c->cell == CELL_RELU;
    job.pre = scratch;
    for (k = 0; k < T; k++) {
        const int64_t t = position(s, k);
        const float *h_in = k == 0 ? (state ? state->data : NULL)
                                   : out + step_row(s, position(s, k - 1)) * H;
        const int64_t h_in_ld = k == 0 ? H : bs * H;
        job.h = saved ? saved + t * HB : scratch + HB;
        matrix_transpose(scratch, B, xp + t * B * H, H, B, H, 0);
        if (c->bias_cols) add_column(scratch, H, B, W->data + I + H, ldw);
        if (h_in) gemm(0, 1, H, B, H, 1.0f, W->data + I, ldw, h_in, h_in_ld, 1.0f, scratch, B);
        parallel_for(HB, GATE_GRAIN, plain_task, &job);
        matrix_transpose(out + step_row(s, t) * H, bs * H, job.h, B, H, B, 0);
    }
    scratch_free(scratch, scratch_bytes);
    return AC_OK;
}

static int rnn_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

static AcTensor *rnn_forward(const RnnKind *kind, const AcTensor *x, const AcTensor *W,
                             const AcTensor *state, const SeqShape *s, int bias_cols)
{
    const int lstm = kind->cell == CELL_LSTM;
    const int64_t T = s->steps, B = s->batch, H = s->hidden;
    const int64_t saved_size = (lstm ? 6 : kind->cell == CELL_GRU ? 4 : 1) * H * B * T, xp_size = W->shape[0] * T * B;
    const int record = ac_is_grad_enabled() &&
                       (x->requires_grad || W->requires_grad || (state && state->requires_grad));
    const AcTensor *inputs[4];
    int64_t shape[2];
    AcTensor *saved = NULL, *out;
    RnnCtx local, *c;
    float *xp;
    int rc;
    if (record && !(saved = tensor_alloc(kind->op, &saved_size, 1))) return NULL;
    inputs[0] = x;
    inputs[1] = W;
    inputs[2] = state;
    inputs[3] = saved;
    shape[0] = (T + lstm) * B;
    shape[1] = H;
    out = op_output(kind->op, shape, 2, inputs, 4, rnn_backward, sizeof(RnnCtx));
    ac_tensor_free(saved);   /* the node holds it */
    if (!out) return NULL;
    c = op_context(out);
    if (!c) c = &local;
    c->s = *s;
    c->cell = kind->cell;
    c->features = x->shape[2];
    c->bias_cols = bias_cols;
    c->state_index = recorded_index(inputs, 2);
    c->saved_index = recorded_index(inputs, 3);
    xp = c != &local ? saved->data : scratch_alloc((size_t)xp_size * sizeof(float));
    rc = xp ? project_inputs(x, W, c, xp) : AC_ERR_MEMORY;
    if (rc == AC_OK && lstm) rc = lstm_steps(W, state, c, c != &local ? xp : NULL, xp, out->data);
    else if (rc == AC_OK && kind->cell == CELL_GRU)
        rc = gru_steps(W, state, c, c != &local ? xp : NULL, xp, out->data);
    else if (rc == AC_OK) rc = plain_steps(W, state, c, c != &local ? xp : NULL, xp, out->data);
    if (c == &local && xp) scratch_free(xp, (size_t)xp_size * sizeof(float));
    if (rc) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- backward through time --------------------------------------------------- */

static int rnn_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const RnnCtx *c = node->context;
    const SeqShape *s = &c->s;
    const int64_t T = s->steps, B = s->batch, H = s->hidden, HB = H * B, I = c->features;
    const int lstm = c->cell == CELL_LSTM, gru = c->cell == CELL_GRU;
    const int64_t G = lstm ? 4 : gru ? 3 : 1, GH = G * H, bs = batch_stride(s), x_ld = bs * I;
    const AcTensor *x = node->inputs[0], *W = node->inputs[1];
    const AcTensor *state = c->state_index >= 0 ? node->inputs[c->state_index] : NULL;
    const float *saved = node->inputs[c->saved_index]->data, *out = node->output->data;
    const int64_t ldw = W->shape[1];
    const int need_state = state && input_needs_grad(node, c->state_index);
    AcTensor *dx = input_needs_grad(node, 0) ? tensor_alloc_like(node->op, x) : NULL;
    AcTensor *dw = input_needs_grad(node, 1) ? ac_tensor_new(W->shape, 2) : NULL;
    AcTensor *dstate = need_state ? tensor_alloc_like(node->op, state) : NULL;
    const int64_t CB = DW_CHUNK * B;
    float *work = arena_alloc((size_t)(3 * HB + 2 * GH * B + CB * (GH + I + H)) * sizeof(float));
    int64_t t_ld, k;
    float *w_t = transposed_block(W->data + I, GH, H, ldw, &t_ld);   /* W_hh^T, (H, G*H) */
    /* the LSTM's (and plain RNN's) dG of DW_CHUNK steps side by side, (G*H, CB), and their
       [x_t | h_prev] rows, (CB, I + H): dW += one product per chunk */
    float *dg_chunk = work ? work + 3 * HB + 2 * GH * B : NULL, *xh_chunk = dg_chunk + GH * CB;
    GateJob job;
    if (!work || !w_t || (input_needs_grad(node, 0) && !dx) || (input_needs_grad(node, 1) && !dw) ||
        (need_state && !dstate))
        return ac_last_error_code();
    job.span = HB;
    job.dh = work;
    job.dc = work + HB;
    job.dg = work + 3 * HB;
    job.dgh = job.dg + GH * B;
    job.relu = c->cell == CELL_RELU;
    if (lstm) state_in(job.dc, gout->data + T * HB, H, B, H);
    state_in(job.dh, gout->data + step_row(s, position(s, T - 1)) * H, bs * H, B, H);
    for (k = T - 1; k >= 0; k--) {
        const int64_t t = position(s, k);
        const float *h_prev = k > 0 ? out + step_row(s, position(s, k - 1)) * H
                                    : state ? state->data : NULL;
        const int64_t h_ld = k > 0 ? bs * H : H;
        const float *x_t = x->data + step_row(s, t) * I;
        if (lstm) {
            job.gates = (float *)saved + t * 4 * HB;
            job.c_prev = saved + 4 * HB * T + t * HB;
            job.tanh_c = saved + 5 * HB * T + t * HB;
            parallel_for(HB, GATE_GRAIN, lstm_back_task, &job);
        } else if (!gru) {
            job.gates = (float *)saved + t * HB;
            parallel_for(HB, GATE_GRAIN, plain_back_task, &job);
        } else {
            float *h_prev_t = work + 2 * HB;
            state_in(h_prev_t, h_prev, h_ld, B, H);
            job.gates = (float *)saved + t * 3 * HB;
            job.hn = (float *)saved + 3 * HB * T + t * HB;
            job.h_prev = h_prev_t;
            parallel_for(HB, GATE_GRAIN, gru_back_task, &job);
        }
        if (dw && !gru) {   /* dW_ih and dW_hh in one product: dG [x_t | h_prev] */
            const int64_t slot = (T - 1 - k) % DW_CHUNK;
            float *xh = xh_chunk + slot * B * (I + H);
            copy_rows(dg_chunk + slot * B, CB, job.dg, B, GH, B);
            copy_rows(xh, I + H, x_t, x_ld, B, I);
            copy_rows(xh + I, I + H, h_prev, h_ld, B, H);
            if (slot == DW_CHUNK - 1 || k == 0)
                gemm(0, 0, GH, I + H, (slot + 1) * B, 1.0f, dg_chunk, CB, xh_chunk, I + H, 1.0f,
                     dw->data, ldw);
            if (c->bias_cols) add_row_sums(dw->data + I + H, ldw, job.dg, GH, B);
        } else if (dw) {
            gemm(0, 0, GH, I, B, 1.0f, job.dg, B, x_t, x_ld, 1.0f, dw->data, ldw);
            if (h_prev) gemm(0, 0, GH, H, B, 1.0f, job.dgh, B, h_prev, h_ld, 1.0f, dw->data + I, ldw);
            if (c->bias_cols) {
                add_row_sums(dw->data + I + H, ldw, job.dg, GH, B);
                add_row_sums(dw->data + I + H + 1, ldw, job.dgh, GH, B);
            }
        }
        if (dx) gemm(1, 0, B, I, GH, 1.0f, job.dg, B, W->data, ldw, 0.0f, dx->data + step_row(s, t) * I, x_ld);
        /* dh of the step before: its output's gradient, plus z dh for the GRU,
           plus W_hh^T times the hidden part's pre-activation gradients */
        if (k > 0)
            matrix_transpose(job.dh, B, gout->data + step_row(s, position(s, k - 1)) * H, bs * H,
                             B, H, gru);
        if (k > 0 || need_state)
            gemm(0, 0, H, B, GH, 1.0f, w_t, t_ld, gru ? job.dgh : job.dg, B,
                 !gru && k == 0 ? 0.0f : 1.0f, job.dh, B);
    }
    if (dstate) {
        matrix_transpose(dstate->data, H, job.dh, B, H, B, 0);
        if (lstm) matrix_transpose(dstate->data + HB, H, job.dc, B, H, B, 0);
    }
    gin[0] = dx;
    gin[1] = dw;
    if (need_state) gin[c->state_index] = dstate;
    return AC_OK;
}

/* ---- the layers ------------------------------------------------------------------ */

static int prefix_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0];
    gin[0] = tensor_alloc_like(node->op, a);
    if (!gin[0]) return ac_last_error_code();
    memcpy(gin[0]->data, gout->data, (size_t)gout->size * sizeof(float));
    memset(gin[0]->data + gout->size, 0, (size_t)(a->size - gout->size) * sizeof(float));
    return AC_OK;
}

/* The output sequence, (T, B, H) or (B, T, H): a view of the node output's
   first T*B rows (the LSTM's c_T rows follow them). */
static AcTensor *output_view(const AcTensor *node_out, const SeqShape *s)
{
    int64_t shape[3];
    shape[0] = s->batch_first ? s->batch : s->steps;
    shape[1] = s->batch_first ? s->steps : s->batch;
    shape[2] = s->hidden;
    return op_view("rnn_output", node_out, shape, 3, prefix_backward, 0);
}

/* The B rows of the node output from row `first`, `stride` apart: (B, H). */
static AcTensor *state_rows(const AcTensor *node_out, const SeqShape *s, int64_t first, int64_t stride)
{
    AcSlice rows;
    memset(&rows, 0, sizeof rows);
    rows.start = first;
    rows.stop = first + (s->batch - 1) * stride + 1;
    rows.step = stride;
    rows.has_start = rows.has_stop = 1;
    return ac_slice(node_out, &rows, 1);
}

/* h_n: the rows of the position visited last. */
static AcTensor *final_hidden(const AcTensor *node_out, const SeqShape *s)
{
    return state_rows(node_out, s, step_row(s, position(s, s->steps - 1)), batch_stride(s));
}

/* Intermediates of a layer call, freed when it returns (at root; scoped ones die
   with their scope, and a node that uses one holds its own reference). */
typedef struct {
    AcTensor *items[12];
    int n;
} Temps;

static AcTensor *keep(Temps *temps, AcTensor *t)
{
    if (t) temps->items[temps->n++] = t;
    return t;
}

static void free_temps(Temps *temps)
{
    while (temps->n > 0) ac_tensor_free(temps->items[--temps->n]);
}

/* W = [w_ih | w_hh | the bias columns], the node's weight input. */
static AcTensor *packed_weights(Temps *temps, const AcTensor *w_ih, const AcTensor *w_hh,
                                AcTensor *const *biases, int n_biases)
{
    AcTensor *parts[4];
    int i;
    parts[0] = (AcTensor *)w_ih;
    parts[1] = (AcTensor *)w_hh;
    for (i = 0; i < n_biases; i++)
        if (!(parts[2 + i] = keep(temps, ac_unsqueeze(biases[i], 1)))) return NULL;
    return keep(temps, ac_cat(parts, 2 + n_biases, 1));
}

/* b, or zeros of its shape when it is NULL. */
static AcTensor *or_zeros(Temps *temps, const AcTensor *b, const int64_t *shape, int ndim)
{
    return b ? (AcTensor *)b : keep(temps, ac_full(shape, ndim, 0.0f));
}

static const RnnKind lstm_kind = {"lstm", 4, CELL_LSTM}, gru_kind = {"gru", 3, CELL_GRU};
static const RnnKind tanh_kind = {"rnn_tanh", 1, CELL_TANH}, relu_kind = {"rnn_relu", 1, CELL_RELU};

/* W with one bias column, b_ih + b_hh (LSTM, plain RNN); *has_bias says
   whether there is one. */
static AcTensor *summed_bias_weights(Temps *temps, const AcTensor *w_ih, const AcTensor *w_hh,
                                     const AcTensor *b_ih, const AcTensor *b_hh, int *has_bias)
{
    AcTensor *bias = (AcTensor *)(b_ih ? b_ih : b_hh);
    if (b_ih && b_hh && !(bias = keep(temps, ac_add(b_ih, b_hh)))) return NULL;
    *has_bias = bias != NULL;
    return packed_weights(temps, w_ih, w_hh, &bias, bias ? 1 : 0);
}

/* The LSTM node's packed output, its intermediates kept in temps. */
static AcTensor *lstm_layer(Temps *temps, const AcTensor *x, const AcTensor *h0, const AcTensor *c0,
                            const AcTensor *w_ih, const AcTensor *w_hh, const AcTensor *b_ih,
                            const AcTensor *b_hh, const SeqShape *s)
{
    AcTensor *W, *state = NULL;
    int has_bias;
    if (!(W = summed_bias_weights(temps, w_ih, w_hh, b_ih, b_hh, &has_bias))) return NULL;
    if (h0 || c0) {
        const int64_t shape[2] = {s->batch, s->hidden};
        AcTensor *pair[2];
        pair[0] = or_zeros(temps, h0, shape, 2);
        pair[1] = or_zeros(temps, c0, shape, 2);
        if (!pair[0] || !pair[1] || !(state = keep(temps, ac_stack(pair, 2, 0)))) return NULL;
    }
    return keep(temps, rnn_forward(&lstm_kind, x, W, state, s, has_bias));
}

AcTensor *ac_lstm(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcTensor *w_ih,
                  const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh, int batch_first,
                  int reverse, AcTensor **h_n, AcTensor **c_n)
{
    Temps temps = {{NULL}, 0};
    SeqShape s;
    AcTensor *packed, *out = NULL;
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (rnn_check(&lstm_kind, x, h0, c0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, &s))
        return NULL;
    packed = lstm_layer(&temps, x, h0, c0, w_ih, w_hh, b_ih, b_hh, &s);
    if (packed) out = output_view(packed, &s);
    if (out && h_n) *h_n = final_hidden(packed, &s);
    if (out && c_n) *c_n = state_rows(packed, &s, s.steps * s.batch, 1);
    if (out && ((h_n && !*h_n) || (c_n && !*c_n))) {   /* a slice failed: none is returned */
        keep(&temps, out);
        out = NULL;
        if (h_n) keep(&temps, *h_n), *h_n = NULL;
        if (c_n) keep(&temps, *c_n), *c_n = NULL;
    }
    free_temps(&temps);
    return out;
}

/* The GRU node's output, its intermediates kept in temps. */
static AcTensor *gru_layer(Temps *temps, const AcTensor *x, const AcTensor *h0,
                           const AcTensor *w_ih, const AcTensor *w_hh, const AcTensor *b_ih,
                           const AcTensor *b_hh, const SeqShape *s)
{
    AcTensor *biases[2], *W;
    const int n_biases = b_ih || b_hh ? 2 : 0;
    if (n_biases) {
        const int64_t shape[1] = {w_ih->shape[0]};
        if (!(biases[0] = or_zeros(temps, b_ih, shape, 1)) ||
            !(biases[1] = or_zeros(temps, b_hh, shape, 1)))
            return NULL;
    }
    if (!(W = packed_weights(temps, w_ih, w_hh, biases, n_biases))) return NULL;
    return rnn_forward(&gru_kind, x, W, h0, s, n_biases);
}

/* The plain RNN node's output, its intermediates kept in temps. */
static AcTensor *plain_layer(Temps *temps, const RnnKind *kind, const AcTensor *x,
                             const AcTensor *h0, const AcTensor *w_ih, const AcTensor *w_hh,
                             const AcTensor *b_ih, const AcTensor *b_hh, const SeqShape *s)
{
    AcTensor *W;
    int has_bias;
    if (!(W = summed_bias_weights(temps, w_ih, w_hh, b_ih, b_hh, &has_bias))) return NULL;
    return rnn_forward(kind, x, W, h0, s, has_bias);
}

/* A GRU or plain RNN layer: its output and, when h_n is not NULL, h_n. */
static AcTensor *one_state_layer(const RnnKind *kind, const AcTensor *x, const AcTensor *h0,
                                 const AcTensor *w_ih, const AcTensor *w_hh, const AcTensor *b_ih,
                                 const AcTensor *b_hh, int batch_first, int reverse,
                                 AcTensor **h_n)
{
    Temps temps = {{NULL}, 0};
    SeqShape s;
    AcTensor *rows, *out;
    if (h_n) *h_n = NULL;
    if (rnn_check(kind, x, h0, NULL, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, &s))
        return NULL;
    rows = kind->cell == CELL_GRU ? gru_layer(&temps, x, h0, w_ih, w_hh, b_ih, b_hh, &s)
                                  : plain_layer(&temps, kind, x, h0, w_ih, w_hh, b_ih, b_hh, &s);
    keep(&temps, rows);
    out = rows ? output_view(rows, &s) : NULL;
    if (out && h_n && !(*h_n = final_hidden(rows, &s))) {
        keep(&temps, out);
        out = NULL;
    }
    free_temps(&temps);
    return out;
}

AcTensor *ac_gru(const AcTensor *x, const AcTensor *h0, const AcTensor *w_ih, const AcTensor *w_hh,
                 const AcTensor *b_ih, const AcTensor *b_hh, int batch_first, int reverse,
                 AcTensor **h_n)
{
    return one_state_layer(&gru_kind, x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, h_n);
}

AcTensor *ac_rnn_tanh(const AcTensor *x, const AcTensor *h0, const AcTensor *w_ih,
                      const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                      int batch_first, int reverse, AcTensor **h_n)
{
    return one_state_layer(&tanh_kind, x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, h_n);
}

AcTensor *ac_rnn_relu(const AcTensor *x, const AcTensor *h0, const AcTensor *w_ih,
                      const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                      int batch_first, int reverse, AcTensor **h_n)
{
    return one_state_layer(&relu_kind, x, h0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, h_n);
}
