/*
 * rnn.c - the LSTM, GRU and plain (Elman, tanh or relu) recurrent layers (one
 * layer, one direction) as fused ops, forward and backward through time, with
 * PyTorch's equations and gate order. The plain RNN is the LSTM's machinery
 * with one gate and no cell: G = 1, h' = act(pre-activation).
 *
 * A layer is one node with inputs (x, w_ih, w_hh, b_ih, b_hh, state, saved):
 *   weights and biases are read where they lie, and backward writes their
 *            gradients straight into the leaves' new grads (input_grad_data).
 *            The LSTM's and plain RNN's two biases add to the same
 *            pre-activations, so forward adds them once per call; the GRU's
 *            b_hn sits inside r * (W_hn h + b_hn), so it keeps both.
 *   state  = h0 (GRU), or h0 and c0 stacked (LSTM), or NULL for zeros.
 *   saved  = what backward needs (see the node's section), a tensor forward
 *            makes when it records a graph; as an input it is freed with the
 *            output (at the end of the step's scope), unlike a node context it
 *            is not zero-filled first, and it grows linearly with T.
 *
 * Everything is batch-major, (B, G*H) per step, as the output is: the steps'
 * products have the batch as their rows, which the GEMM's register tile (12
 * rows) covers with little waste for any batch (with the batch as columns, a
 * batch of 20 fills 20 of 32 lanes), and the state goes from one step's output
 * rows to the next step's product as it lies, with no transposes.
 *
 * Forward: the input projection of all time steps is ONE gemm, x W_ih^T. Then
 * each step is one gemm, h W_hh^T (W_hh^T packed once per call for all the
 * steps, gemm_pack_b), added to the step's rows of the projection, and one
 * fused loop over the gate math, which adds the biases.
 *
 * Backward walks the steps in reverse: a fused loop turns (dh, dc) into the
 * pre-activation gradients dG of the step, and one gemm, dG W_hh (W_hh
 * packed once), carries them to dh of the step before. The dG of all steps
 * stay, so dx = dG W_ih is one gemm after the walk, and so are x^T dG and
 * h_prev^T dG, stored transposed straight into w_ih's and w_hh's grads, the
 * biases' grads summed as dG is packed (dG^T x and dG^T h_prev, which read x
 * and the outputs as they lie but pack dG transposed, measure slower).
 *
 * The node's output is 2-d: the output rows, t*B + b (or b*T + t when
 * batch_first), and for the LSTM B more rows holding c_T. The output sequence
 * is a view of its first T*B rows; h_n and c_n are slices of it, each with its
 * own graph, so all three are differentiable. reverse visits positions T-1 .. 0
 * (a bidirectional layer's second direction), whose final state is then at 0.
 *
 * Not here: the gate loops (kernels/cpu/rnn_gates.c), stacking layers and the
 * Python modules (aicraft/nn/rnn.py).
 */
#include "graph.h"
#include "op_table.h"
#include "internal.h"
#include "kernels/kernels.h"
#include "kernels/gemm.h"
#include "kernels/transpose.h"
#include "kernels/cpu/rnn_gates.h"

#include <string.h>

#define GATE_GRAIN 1024   /* elements per gate per parallel task, at least */

/* ---- layouts and small helpers --------------------------------------------- */

typedef struct {
    int64_t steps, batch, hidden;
    int batch_first, reverse;
} SeqShape;

/* The row of (position t, sequence 0), and the distance between a position's
   rows, in a (T, B, .) or (B, T, .) tensor. */
static int64_t step_row(const SeqShape *s, int64_t t) { return s->batch_first ? t : t * s->batch; }
static int64_t batch_stride(const SeqShape *s) { return s->batch_first ? s->steps : 1; }
/* The position visited k-th. */
static int64_t position(const SeqShape *s, int64_t k) { return s->reverse ? s->steps - 1 - k : k; }

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

/* out[j] = the sum of column j of the rows x cols block m, rows added in order. */
static void column_sums(float *out, const float *m, int64_t rows, int64_t cols)
{
    int64_t r, j;
    memset(out, 0, (size_t)cols * sizeof(float));
    for (r = 0; r < rows; r++)
        for (j = 0; j < cols; j++) out[j] += m[r * cols + j];
}

/* The rows of a (T, B, width) or (B, T, width) block in time-major order. */
static void time_major_rows(float *dst, const float *src, const SeqShape *s, int64_t width)
{
    int64_t t;
    for (t = 0; t < s->steps; t++)
        copy_rows(dst + t * s->batch * width, width, src + step_row(s, t) * width,
                  batch_stride(s) * width, s->batch, width);
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

/* Rows of a gate loop's parallel task: GATE_GRAIN elements per gate, at least. */
static int64_t gate_rows(int64_t hidden) { return (GATE_GRAIN + hidden - 1) / hidden; }

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
 * One node per layer, inputs (x, w_ih, w_hh, b_ih, b_hh, state, saved), the
 * NULL ones not recorded:
 *   b_ih, b_hh  the biases or NULL.
 *   state  the initial state or NULL: LSTM (2, B, H), h0 then c0; else (B, H).
 *   saved  what backward needs, made by forward when it records a graph, a
 *          block per position, a row per sequence: LSTM gates (T, B, 4H), the
 *          cells the steps started from and tanh of the cells they made
 *          (T, B, H each); GRU gates r, z, n (T, B, 3H) and the hidden part of
 *          n, W_hn h + b_hn (T, B, H); plain RNN the states it made (T, B, H).
 *          Until step t runs, its gates block holds its rows of the input
 *          projection, which the step adds to and reads before writing its
 *          gates there.
 */
enum { IN_X, IN_W_IH, IN_W_HH, IN_B_IH, IN_B_HH, IN_STATE, IN_SAVED, N_IN };

typedef struct {
    SeqShape s;
    Cell cell;
    int64_t features;   /* I */
    int index[N_IN];    /* recorded input index, -1 when NULL */
} RnnCtx;

/* What forward's steps read of the weights, laid out for them: W_hh^T,
   (H, G*H), packed once for the gemm of every step, and the biases as rows
   of G*H (zeros when there are none). */
typedef struct {
    GemmPackedB whh_t;
    float *bias, *bias_h;   /* b_ih + b_hh (LSTM, plain); the GRU's b_ih and b_hh */
} StepWeights;

/* Fills *sw in scratch of *bytes; NULL when memory is short. */
static float *step_weights(const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                           const RnnCtx *c, StepWeights *sw, size_t *bytes)
{
    const int64_t GH = w_hh->shape[0], H = c->s.hidden;
    const size_t packed = gemm_packed_b_floats(H, GH);
    float *mem;
    int64_t j;
    *bytes = (packed + (size_t)(2 * GH)) * sizeof(float);
    if (!(mem = scratch_alloc(*bytes))) return NULL;
    sw->whh_t = gemm_pack_b(1, H, GH, w_hh->data, H, mem);
    sw->bias = mem + packed;
    sw->bias_h = sw->bias + GH;
    for (j = 0; j < GH; j++) {
        const float bi = b_ih ? b_ih->data[j] : 0.0f, bh = b_hh ? b_hh->data[j] : 0.0f;
        sw->bias[j] = c->cell == CELL_GRU ? bi : bi + bh;
        sw->bias_h[j] = c->cell == CELL_GRU ? bh : 0.0f;
    }
    return mem;
}

/* The input projection of all steps, ONE gemm: xp (T*B, G*H) = x W_ih^T, rows
   in time-major order (the steps add the biases). */
static int project_inputs(const AcTensor *x, const AcTensor *w_ih, const RnnCtx *c, float *xp)
{
    const SeqShape *s = &c->s;
    const int64_t TB = s->steps * s->batch, I = c->features, GH = w_ih->shape[0];
    const float *rows = x->data;
    size_t copy_bytes = 0;
    float *copy = NULL;
    if (s->batch_first && I > 0) {
        copy_bytes = (size_t)(TB * I) * sizeof(float);
        if (!(copy = scratch_alloc(copy_bytes))) return AC_ERR_MEMORY;
        time_major_rows(copy, x->data, s, I);
        rows = copy;
    }
    gemm(0, 1, TB, GH, I, 1.0f, rows, I, w_ih->data, I, 0.0f, xp, GH);
    if (copy) scratch_free(copy, copy_bytes);
    return AC_OK;
}

/* The steps in visiting order, each one gemm and one gate loop. xp is the
   projection, which becomes the gates (saved holds both when not NULL); the
   states go to out's rows, the LSTM's c_T after the T*B output rows. */
static int run_steps(const StepWeights *sw, const AcTensor *state, const RnnCtx *c, float *saved,
                     float *xp, float *out)
{
    const SeqShape *s = &c->s;
    const int lstm = c->cell == CELL_LSTM, gru = c->cell == CELL_GRU;
    const int64_t T = s->steps, B = s->batch, H = s->hidden, HB = H * B, bs = batch_stride(s);
    const int64_t GH = (lstm ? 4 : gru ? 3 : 1) * H;
    /* LSTM without saved: two cells and tanh of one; GRU: W_hh h, a zero row, hn */
    const size_t scratch_bytes = (size_t)(lstm ? (saved ? 0 : 3 * HB) : gru ? B * GH + H + HB : 0) *
                                 sizeof(float);
    float *scratch = scratch_bytes ? scratch_alloc(scratch_bytes) : NULL;
    float *cells = NULL, *tanh_c = NULL, *zeros = NULL;
    const float *h0 = state ? state->data : NULL;
    GateJob job;
    ParallelFn task = lstm ? rnn_lstm_task : gru ? rnn_gru_task : rnn_plain_task;
    int64_t k;
    if (scratch_bytes && !scratch) return AC_ERR_MEMORY;
    memset(&job, 0, sizeof job);
    job.hidden = H;
    job.relu = c->cell == CELL_RELU;
    job.bias = sw->bias;
    job.bias_h = sw->bias_h;
    job.h_ld = bs * H;
    if (lstm) {   /* the cells, c0 (or zeros) first */
        float *first;
        cells = saved ? saved + 4 * HB * T : scratch;
        tanh_c = saved ? cells + HB * T : scratch + 2 * HB;
        first = saved ? cells + position(s, 0) * HB : cells;
        if (state) memcpy(first, state->data + HB, (size_t)HB * sizeof(float));
        else memset(first, 0, (size_t)HB * sizeof(float));
    }
    if (gru) {
        job.hs = scratch;
        zeros = scratch + B * GH;
        memset(zeros, 0, (size_t)H * sizeof(float));
    }
    for (k = 0; k < T; k++) {
        const int64_t t = position(s, k);
        const float *h_in = k == 0 ? h0 : out + step_row(s, position(s, k - 1)) * H;
        const int64_t h_in_ld = k == 0 ? H : bs * H;
        job.gates = xp + t * B * GH;
        job.h = out + step_row(s, t) * H;
        if (lstm) {
            job.c_prev = saved ? cells + t * HB : cells + (k % 2) * HB;
            job.c_next = k + 1 == T ? out + T * HB
                         : saved    ? cells + position(s, k + 1) * HB
                                    : cells + ((k + 1) % 2) * HB;
            job.tanh_out = saved ? tanh_c + t * HB : tanh_c;
        }
        if (gru) {   /* W_hh h into hs, which the gate loop adds b_hh to */
            job.hn = saved ? saved + 3 * HB * T + t * HB : zeros + H;
            job.h_prev = h_in ? h_in : zeros;
            job.h_prev_ld = h_in ? h_in_ld : 0;
            if (h_in) gemm_packed(B, 1.0f, h_in, h_in_ld, &sw->whh_t, 0.0f, scratch, GH);
            else memset(scratch, 0, (size_t)(B * GH) * sizeof(float));
        } else if (h_in) {
            gemm_packed(B, 1.0f, h_in, h_in_ld, &sw->whh_t, 1.0f, job.gates, GH);
        }
        parallel_for(B, gate_rows(H), task, &job);
    }
    if (scratch) scratch_free(scratch, scratch_bytes);
    return AC_OK;
}

static int rnn_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

/* The layer's node: inputs as the node's section says. */
static AcTensor *rnn_forward(const RnnKind *kind, const AcTensor *x, const AcTensor *w_ih,
                             const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                             const AcTensor *state, const SeqShape *s)
{
    const int lstm = kind->cell == CELL_LSTM;
    const int64_t T = s->steps, B = s->batch, H = s->hidden;
    const int64_t saved_size = (lstm ? 6 : kind->cell == CELL_GRU ? 4 : 1) * H * B * T, xp_size = w_ih->shape[0] * T * B;
    const AcTensor *inputs[N_IN];
    int64_t shape[2];
    AcTensor *saved = NULL, *out;
    RnnCtx local, *c;
    StepWeights sw;
    size_t sw_bytes = 0;
    float *xp, *sw_mem = NULL;
    int rc = AC_ERR_MEMORY, record = 0, i;
    inputs[IN_X] = x;
    inputs[IN_W_IH] = w_ih;
    inputs[IN_W_HH] = w_hh;
    inputs[IN_B_IH] = b_ih;
    inputs[IN_B_HH] = b_hh;
    inputs[IN_STATE] = state;
    for (i = 0; i < IN_SAVED; i++) record |= inputs[i] && inputs[i]->requires_grad;
    record = record && ac_is_grad_enabled();
    if (record && !(saved = tensor_alloc(kind->op, &saved_size, 1))) return NULL;
    inputs[IN_SAVED] = saved;
    shape[0] = (T + lstm) * B;
    shape[1] = H;
    out = op_output(kind->op, shape, 2, inputs, N_IN, rnn_backward, sizeof(RnnCtx));
    ac_tensor_free(saved);   /* the node holds it */
    if (!out) return NULL;
    c = op_context(out);
    if (!c) c = &local;
    c->s = *s;
    c->cell = kind->cell;
    c->features = x->shape[2];
    for (i = 0; i < N_IN; i++) c->index[i] = recorded_index(inputs, i);
    xp = c != &local ? saved->data : scratch_alloc((size_t)xp_size * sizeof(float));
    if (xp && (sw_mem = step_weights(w_hh, b_ih, b_hh, c, &sw, &sw_bytes))) {
        rc = project_inputs(x, w_ih, c, xp);
        if (rc == AC_OK) rc = run_steps(&sw, state, c, c != &local ? xp : NULL, xp, out->data);
        scratch_free(sw_mem, sw_bytes);
    }
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
    const int64_t T = s->steps, B = s->batch, H = s->hidden, HB = H * B, TB = T * B, I = c->features;
    const int lstm = c->cell == CELL_LSTM, gru = c->cell == CELL_GRU;
    const int64_t GH = (lstm ? 4 : gru ? 3 : 1) * H, bs = batch_stride(s);
    const AcTensor *x = node->inputs[c->index[IN_X]], *w_ih = node->inputs[c->index[IN_W_IH]];
    const AcTensor *w_hh = node->inputs[c->index[IN_W_HH]];
    const AcTensor *state = c->index[IN_STATE] >= 0 ? node->inputs[c->index[IN_STATE]] : NULL;
    float *saved = node->inputs[c->index[IN_SAVED]]->data;
    const float *out = node->output->data;
    int status = AC_OK;
    float *dx = input_grad_data(node, c->index[IN_X], gin, &status);
    float *dw_ih = input_grad_data(node, c->index[IN_W_IH], gin, &status);
    float *dw_hh = input_grad_data(node, c->index[IN_W_HH], gin, &status);
    float *db_ih = input_grad_data(node, c->index[IN_B_IH], gin, &status);
    float *db_hh = input_grad_data(node, c->index[IN_B_HH], gin, &status);
    float *dstate = input_grad_data(node, c->index[IN_STATE], gin, &status);
    /* W_hh packed for the steps' gemm; dG of all steps (and the GRU's dG of
       the hidden part), time-major rows like the projection; dh, dc and a zero
       row; [x | h_prev]^T, (I + H, T*B); dx's rows before a batch_first
       reorder */
    const int dw = dw_ih || dw_hh;
    const int64_t dw_size = dw ? TB * (I + H) : 0, dx_rows_size = dx && s->batch_first ? TB * I : 0;
    const size_t whh_size = gemm_packed_b_floats(GH, H);
    float *whh = status ? NULL
                        : arena_alloc((whh_size + (size_t)((gru ? 2 : 1) * TB * GH + 2 * HB + H +
                                                           dw_size + dx_rows_size)) * sizeof(float));
    float *dg, *dgh, *dh, *dc, *zeros, *xh_t, *dx_rows;
    GemmPackedB w_hh_packed;
    GateJob job;
    ParallelFn task = lstm ? rnn_lstm_back_task : gru ? rnn_gru_back_task : rnn_plain_back_task;
    int64_t k;
    if (status) return status;
    if (!whh) return ac_last_error_code();
    w_hh_packed = gemm_pack_b(0, GH, H, w_hh->data, H, whh);
    dg = whh + whh_size;
    dgh = gru ? dg + TB * GH : dg;
    dh = dg + (gru ? 2 : 1) * TB * GH;
    dc = dh + HB;
    zeros = dc + HB;
    xh_t = zeros + H;
    dx_rows = xh_t + dw_size;
    memset(&job, 0, sizeof job);
    job.hidden = H;
    job.relu = c->cell == CELL_RELU;
    job.dh = dh;
    job.dc = dc;
    job.dh_out_ld = bs * H;
    memset(dh, 0, (size_t)(HB + HB + H) * sizeof(float));   /* dh, dc and the zero row */
    if (lstm) memcpy(dc, gout->data + T * HB, (size_t)HB * sizeof(float));
    for (k = T - 1; k >= 0; k--) {
        const int64_t t = position(s, k);
        const float *h_prev = k > 0 ? out + step_row(s, position(s, k - 1)) * H
                                    : state ? state->data : NULL;
        const int64_t h_ld = k > 0 ? bs * H : H;
        job.gates = saved + t * B * GH;
        job.dh_out = gout->data + step_row(s, t) * H;
        job.dg = dg + t * B * GH;
        job.dgh = dgh + t * B * GH;
        if (lstm) {
            job.c_prev = saved + 4 * HB * T + t * HB;
            job.tanh_c = saved + 5 * HB * T + t * HB;
        }
        if (gru) {
            job.hn = saved + 3 * HB * T + t * HB;
            job.h_prev = h_prev ? h_prev : zeros;
            job.h_prev_ld = h_prev ? h_ld : 0;
        }
        parallel_for(B, gate_rows(H), task, &job);
        /* dh of the step before, less its output's gradient (its gate loop
           adds that): dG W_hh of the hidden part, plus z dh for the GRU */
        if (k > 0 || dstate)
            gemm_packed(B, 1.0f, job.dgh, GH, &w_hh_packed, gru ? 1.0f : 0.0f, dh, H);
        if (dw) {
            int64_t j;
            matrix_transpose(xh_t + t * B, TB, x->data + step_row(s, t) * I, bs * I, B, I, 0);
            if (h_prev) matrix_transpose(xh_t + I * TB + t * B, TB, h_prev, h_ld, B, H, 0);
            else for (j = I; j < I + H; j++) memset(xh_t + j * TB + t * B, 0, (size_t)B * sizeof(float));
        }
    }
    if (dx) {   /* dx = dG W_ih */
        gemm(0, 0, TB, I, GH, 1.0f, dg, GH, w_ih->data, I, 0.0f, dx_rows_size ? dx_rows : dx, I);
        for (k = 0; dx_rows_size && k < T; k++)
            copy_rows(dx + step_row(s, k) * I, bs * I, dx_rows + k * B * I, I, B, I);
    }
    /* dW_ih = (x^T dG)^T and dW_hh = (h_prev^T dG)^T (the GRU's hidden part
       with its own dG), and the column sums of dG for the biases */
    if (dw_ih) gemm_transposed_c(0, 0, I, GH, TB, 1.0f, xh_t, TB, dg, GH, 0.0f, dw_ih, I, db_ih);
    else if (db_ih) column_sums(db_ih, dg, TB, GH);
    if (dw_hh)
        gemm_transposed_c(0, 0, H, GH, TB, 1.0f, xh_t + I * TB, TB, dgh, GH, 0.0f, dw_hh, H,
                          gru ? db_hh : NULL);
    /* the LSTM's and plain RNN's biases add to the same pre-activations */
    if (db_hh && db_ih && !gru) memcpy(db_hh, db_ih, (size_t)GH * sizeof(float));
    else if (db_hh && !(gru && dw_hh)) column_sums(db_hh, dgh, TB, GH);
    if (dstate) {
        memcpy(dstate, dh, (size_t)HB * sizeof(float));
        if (lstm) memcpy(dstate + HB, dc, (size_t)HB * sizeof(float));
    }
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

/* t, or zeros of its shape when it is NULL. */
static AcTensor *or_zeros(Temps *temps, const AcTensor *t, const int64_t *shape, int ndim)
{
    return t ? (AcTensor *)t : keep(temps, ac_full(shape, ndim, 0.0f));
}

static const RnnKind lstm_kind = {"lstm", 4, CELL_LSTM}, gru_kind = {"gru", 3, CELL_GRU};
static const RnnKind tanh_kind = {"rnn_tanh", 1, CELL_TANH}, relu_kind = {"rnn_relu", 1, CELL_RELU};

/* The LSTM node's packed output, its intermediates kept in temps. */
static AcTensor *lstm_layer(Temps *temps, const AcTensor *x, const AcTensor *h0, const AcTensor *c0,
                            const AcTensor *w_ih, const AcTensor *w_hh, const AcTensor *b_ih,
                            const AcTensor *b_hh, const SeqShape *s)
{
    AcTensor *state = NULL;
    if (h0 || c0) {
        const int64_t shape[2] = {s->batch, s->hidden};
        AcTensor *pair[2];
        pair[0] = or_zeros(temps, h0, shape, 2);
        pair[1] = or_zeros(temps, c0, shape, 2);
        if (!pair[0] || !pair[1] || !(state = keep(temps, ac_stack(pair, 2, 0)))) return NULL;
    }
    return keep(temps, rnn_forward(&lstm_kind, x, w_ih, w_hh, b_ih, b_hh, state, s));
}

AcTensor *ac_lstm(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcTensor *w_ih,
                  const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh, int batch_first,
                  int reverse, AcTensor **h_n, AcTensor **c_n)
{
    Temps temps = {{NULL}, 0};
    SeqShape s;
    AcTensor *packed, *out = NULL;
    if (ops_observed) return lstm_observed(x, h0, c0, w_ih, w_hh, b_ih, b_hh, batch_first, reverse, h_n, c_n);
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
    rows = keep(&temps, rnn_forward(kind, x, w_ih, w_hh, b_ih, b_hh, h0, &s));
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

/* ---- recording the LSTM layer (graph.h) -------------------------------------------- */

/* One node whose outputs are all three of the layer's; the ones the caller does
   not take are freed (replay makes them too). */
AcTensor *lstm_observed(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcTensor *w_ih,
                        const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh, int batch_first,
                        int reverse, AcTensor **h_n, AcTensor **c_n)
{
    AcTensor *t[10];
    t[0] = (AcTensor *)x;
    t[1] = (AcTensor *)h0;
    t[2] = (AcTensor *)c0;
    t[3] = (AcTensor *)w_ih;
    t[4] = (AcTensor *)w_hh;
    t[5] = (AcTensor *)b_ih;
    t[6] = (AcTensor *)b_hh;
    t[7] = t[8] = t[9] = NULL;
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (graph_call("lstm", lstm_replay, 7, 3, t, (double[]){batch_first, reverse}, 2)) return NULL;
    if (h_n) *h_n = t[8];
    else ac_tensor_free(t[8]);
    if (c_n) *c_n = t[9];
    else ac_tensor_free(t[9]);
    return t[7];
}

int lstm_replay(AcTensor **t, const double *attr)
{
    t[7] = ac_lstm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], (int)attr[0], (int)attr[1], &t[8], &t[9]);
    return graph_made(t[7]);
}
