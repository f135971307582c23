/*
 * qrnn.c - the int8 LSTM and GRU layers for inference (ac_qlstm, ac_qgru): one
 * layer in one direction, with ac_lstm / ac_gru's shapes, equations and gate
 * order, and their two projections packed as int8 Linear layers.
 *
 * The input projection of all steps is one quantized product over the T * B
 * input rows (the blocked kernels). W_hh is packed once into column panels
 * (qgemm.h), whose kernels sum each output in its own vector lane: with a few
 * dozen hidden units a dot product is only that many bytes, and sums across
 * lanes would cost as much as the products. Each step multiplies the quantized
 * h of all sequences by the panels, then one call per step turns the int32
 * sums into floats and does the gate math in float32 with vecmath's sigmoid
 * and tanh (plain arithmetic, the same bits on every kernel set), and one more
 * quantizes the new h. No graph, nothing saved for backward.
 *
 * Not here: the int8 Linear (qlinear.c), the float layers (rnn.c).
 */
#include "qlinear.h"
#include "kernels/kernels.h"
#include "kernels/cpu.h"
#include "kernels/vecmath.h"

#include <string.h>

/* The cell loops are CPU_CLONES: elementwise math without contraction gives the
   same bits in each (as rnn.c's gate loops); the row functions are compiled into
   each clone. */
#if defined(__GNUC__) && defined(__x86_64__)
#define CELL_ROW static inline __attribute__((always_inline))
#else
#define CELL_ROW static inline
#endif

typedef struct {
    const char *op;
    int64_t steps, batch, hidden, gates;
    int batch_first, reverse;
} QSeq;

static int check_state(const QSeq *s, const AcTensor *state, const char *what)
{
    if (!state) return AC_OK;
    if (tensor_check(s->op, state, what)) return -1;
    if (state->ndim != 2 || state->shape[0] != s->batch || state->shape[1] != s->hidden)
        return error_set(AC_ERR_SHAPE, "%s: %s %s must be (batch, hidden) = (%lld, %lld)", s->op,
                         what, tensor_shape_str(state), (long long)s->batch, (long long)s->hidden);
    return AC_OK;
}

static int qrnn_check(QSeq *s, const AcTensor *x, const AcTensor *h0, const AcTensor *c0,
                      const AcQLinear *ih, const AcQLinear *hh, int batch_first, int reverse)
{
    const char *op = s->op;
    int64_t rows, in, features;
    if (tensor_check(op, x, "input") || qlinear_check(op, ih, "ih") || qlinear_check(op, hh, "hh") ||
        cpu_only(op, (const AcTensor *[]){x, h0, c0}, 3))
        return -1;
    if (x->ndim != 3)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be 3-d, %s", op, tensor_shape_str(x),
                         batch_first ? "(batch, seq, features)" : "(seq, batch, features)");
    rows = ac_qlinear_out_features(ih);
    in = ac_qlinear_in_features(ih);
    features = x->shape[2];
    if (rows == 0 || rows % s->gates != 0)
        return error_set(AC_ERR_SHAPE, "%s: ih has %lld output rows; it must be %lld * hidden with "
                         "hidden > 0", op, (long long)rows, (long long)s->gates);
    s->hidden = rows / s->gates;
    if (in != features)
        return error_set(AC_ERR_SHAPE, "%s: input %s has %lld features, ih expects %lld", op,
                         tensor_shape_str(x), (long long)features, (long long)in);
    if (ac_qlinear_out_features(hh) != rows || ac_qlinear_in_features(hh) != s->hidden)
        return error_set(AC_ERR_SHAPE, "%s: hh is (%lld, %lld); it must be (%lld, %lld) to fit ih",
                         op, (long long)ac_qlinear_out_features(hh),
                         (long long)ac_qlinear_in_features(hh), (long long)rows,
                         (long long)s->hidden);
    s->steps = x->shape[batch_first ? 1 : 0];
    s->batch = x->shape[batch_first ? 0 : 1];
    s->batch_first = batch_first != 0;
    s->reverse = reverse != 0;
    if (s->steps == 0 || s->batch == 0)
        return error_set(AC_ERR_SHAPE, "%s: input %s has no %s", op, tensor_shape_str(x),
                         s->steps == 0 ? "time steps" : "sequences");
    if (x->requires_grad && ac_is_grad_enabled())
        return error_set(AC_ERR_STATE, "%s: int8 layers do not train; the input requires grad "
                         "(run under no_grad)", op);
    return check_state(s, h0, "h0") || check_state(s, c0, "c0") ? -1 : AC_OK;
}

/* One step of all B sequences: xp's rows (xp_ld floats apart) hold the input
   projections, sums (B, G * H; row b's scale sx[b]) the exact products of h,
   which hh's scales and bias turn into floats as qlinear_rows does (sum *
   (sx * scale) + bias); the new h goes to h (B, H) and out's rows (out_ld
   floats apart). */
typedef struct {
    int64_t batch, hidden;
    const float *xp;
    int64_t xp_ld;
    const int32_t *sums;
    const float *sx, *scale, *bias;
    float *c, *h, *out;
    int64_t out_ld;
} Cells;

/* LSTM, one sequence: gates i, f, g, o. */
CELL_ROW void lstm_row(int64_t hidden, const float *restrict xp, const int32_t *restrict sums,
                      float sx, const float *restrict scale, const float *restrict bias,
                      float *restrict c, float *restrict h, float *restrict out)
{
    int64_t j;
    for (j = 0; j < hidden; j++) {
        const int64_t f_j = hidden + j, g_j = 2 * hidden + j, o_j = 3 * hidden + j;
        float i = sigmoid_scalar(xp[j] + ((float)sums[j] * (sx * scale[j]) + bias[j]));
        float f = sigmoid_scalar(xp[f_j] + ((float)sums[f_j] * (sx * scale[f_j]) + bias[f_j]));
        float g = tanh_scalar(xp[g_j] + ((float)sums[g_j] * (sx * scale[g_j]) + bias[g_j]));
        float o = sigmoid_scalar(xp[o_j] + ((float)sums[o_j] * (sx * scale[o_j]) + bias[o_j]));
        float cj = f * c[j] + i * g;
        c[j] = cj;
        h[j] = o * tanh_scalar(cj);
        out[j] = h[j];
    }
}

/* GRU, one sequence: gates r, z, n; n = tanh(x_n + r * h_n), h' = (1 - z) n + z h. */
CELL_ROW void gru_row(int64_t hidden, const float *restrict xp, const int32_t *restrict sums,
                     float sx, const float *restrict scale, const float *restrict bias,
                     float *restrict h, float *restrict out)
{
    int64_t j;
    for (j = 0; j < hidden; j++) {
        const int64_t z_j = hidden + j, n_j = 2 * hidden + j;
        float r = sigmoid_scalar(xp[j] + ((float)sums[j] * (sx * scale[j]) + bias[j]));
        float z = sigmoid_scalar(xp[z_j] + ((float)sums[z_j] * (sx * scale[z_j]) + bias[z_j]));
        float n = tanh_scalar(xp[n_j] + r * ((float)sums[n_j] * (sx * scale[n_j]) + bias[n_j]));
        h[j] = (1.0f - z) * n + z * h[j];
        out[j] = h[j];
    }
}

/* The rows in one call: the CPU's clone is picked once per step, not per row. */
CPU_CLONES static void lstm_cells(const Cells *cl)
{
    int64_t b, H = cl->hidden;
    for (b = 0; b < cl->batch; b++)
        lstm_row(H, cl->xp + b * cl->xp_ld, cl->sums + b * 4 * H, cl->sx[b], cl->scale, cl->bias,
                 cl->c + b * H, cl->h + b * H, cl->out + b * cl->out_ld);
}

CPU_CLONES static void gru_cells(const Cells *cl)
{
    int64_t b, H = cl->hidden;
    for (b = 0; b < cl->batch; b++)
        gru_row(H, cl->xp + b * cl->xp_ld, cl->sums + b * 3 * H, cl->sx[b], cl->scale, cl->bias,
                cl->h + b * H, cl->out + b * cl->out_ld);
}

/* A (B, H) state: a copy of src, or zeros. */
static void state_init(float *dst, const AcTensor *src, int64_t count)
{
    if (src) memcpy(dst, src->data, (size_t)count * sizeof(float));
    else memset(dst, 0, (size_t)count * sizeof(float));
}

/* A new (B, H) tensor, when wanted. */
static int state_tensor(const char *op, const QSeq *s, int wanted, AcTensor **t)
{
    int64_t shape[2];
    shape[0] = s->batch;
    shape[1] = s->hidden;
    *t = wanted ? tensor_alloc(op, shape, 2) : NULL;
    return wanted && !*t ? -1 : AC_OK;
}

static size_t round_up64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The steps' working memory, one scratch block in 64-byte aligned pieces. */
typedef struct {
    float *xp;        /* (T * B, G * H): the input projections */
    float *h, *c;     /* (B, H) */
    float *bias;      /* (G * H): hh's bias, or zeros */
    float *sx;        /* (B): the scales of qh's rows */
    uint8_t *qh;      /* (B, ld_h): h quantized for the next step */
    int32_t *sums;    /* (B, G * H): qh times hh's weight */
    void *panels;     /* hh's weight packed, or NULL */
    size_t bytes;
} Steps;

static int steps_alloc(const QSeq *s, int64_t ld_h, int panels, Steps *w)
{
    const int64_t gh = s->gates * s->hidden, bh = s->batch * s->hidden;
    size_t sizes[8], offset = 0;
    char *block;
    int i;
    sizes[0] = (size_t)(s->steps * s->batch * gh) * sizeof(float);
    sizes[1] = sizes[2] = (size_t)bh * sizeof(float);
    sizes[3] = (size_t)gh * sizeof(float);
    sizes[4] = (size_t)s->batch * sizeof(float);
    sizes[5] = (size_t)(s->batch * ld_h);
    sizes[6] = (size_t)(s->batch * gh) * sizeof(int32_t);
    sizes[7] = panels ? qgemm_panels_bytes(gh, s->hidden) : 0;
    for (i = 0; i < 8; i++) offset += round_up64(sizes[i]);
    w->bytes = offset;
    block = scratch_alloc(w->bytes);
    if (!block) return -1;
    w->xp = (float *)(void *)block;
    offset = round_up64(sizes[0]);
    w->h = (float *)(void *)(block + offset);
    w->c = (float *)(void *)(block + (offset += round_up64(sizes[1])));
    w->bias = (float *)(void *)(block + (offset += round_up64(sizes[2])));
    w->sx = (float *)(void *)(block + (offset += round_up64(sizes[3])));
    w->qh = (uint8_t *)(block + (offset += round_up64(sizes[4])));
    w->sums = (int32_t *)(void *)(block + (offset += round_up64(sizes[5])));
    w->panels = panels ? block + offset + round_up64(sizes[6]) : NULL;
    return AC_OK;
}

static AcTensor *qrnn_forward(QSeq *s, const AcTensor *x, const AcTensor *h0, const AcTensor *c0,
                              const AcQLinear *ih, const AcQLinear *hh, int batch_first,
                              int reverse, AcTensor **h_n, AcTensor **c_n)
{
    int64_t rows, gh, bh, ld_h, k, shape[3];
    const QGemmKernels *kern;
    QPanels panels;
    Steps w;
    Cells cells;
    int use_panels, status;
    AcTensor *out, *hn = NULL, *cn = NULL;
    if (qrnn_check(s, x, h0, c0, ih, hh, batch_first, reverse)) return NULL;
    rows = s->steps * s->batch;
    gh = s->gates * s->hidden;
    bh = s->batch * s->hidden;
    ld_h = (int64_t)round_up64((size_t)s->hidden);
    /* Panels sum in the lanes, so they suit any hidden size (the row kernels do
       not suit few in features; qlinear_kernels). */
    kern = qgemm_kernels()->dot_panels ? qgemm_kernels() : qlinear_kernels(hh);
    use_panels = kern->dot_panels != NULL;
    memcpy(shape, x->shape, sizeof shape);
    shape[2] = s->hidden;
    /* The outputs first, then the scratch, which goes back before they do. */
    out = tensor_alloc(s->op, shape, 3);
    if (!out || state_tensor(s->op, s, h_n != NULL, &hn) || state_tensor(s->op, s, c_n != NULL, &cn) ||
        steps_alloc(s, ld_h, use_panels, &w)) {
        ac_tensor_free(cn);
        ac_tensor_free(hn);
        ac_tensor_free(out);
        return NULL;
    }
    state_init(w.h, h0, bh);
    state_init(w.c, c0, bh);
    if (hh->bias) memcpy(w.bias, hh->bias, (size_t)gh * sizeof(float));
    else memset(w.bias, 0, (size_t)gh * sizeof(float));
    /* W_hh once into panels: every step's product reads them. */
    if (use_panels) qgemm_pack_panels(hh->weight, gh, s->hidden, w.panels, &panels);
    qlinear_quantize_rows(w.h, s->batch, s->hidden, ld_h, kern->x_plus_128, w.qh, w.sx);
    /* xp's rows follow x's: position t of sequence b at row t * B + b, or b * T + t. */
    status = qlinear_rows(ih, x->data, rows, w.xp);
    cells.batch = s->batch;
    cells.hidden = s->hidden;
    cells.xp_ld = (s->batch_first ? s->steps : 1) * gh;
    cells.out_ld = (s->batch_first ? s->steps : 1) * s->hidden;
    cells.sums = w.sums;
    cells.sx = w.sx;
    cells.scale = hh->scale;
    cells.bias = w.bias;
    cells.c = w.c;
    cells.h = w.h;
    for (k = 0; k < s->steps && status == AC_OK; k++) {
        int64_t t = s->reverse ? s->steps - 1 - k : k, row = s->batch_first ? t : t * s->batch;
        qlinear_sums(hh, kern, use_panels ? &panels : NULL, w.qh, ld_h, s->batch, w.sums);
        cells.xp = w.xp + row * gh;
        cells.out = out->data + row * s->hidden;
        if (s->gates == 4) lstm_cells(&cells);
        else gru_cells(&cells);
        qlinear_quantize_rows(w.h, s->batch, s->hidden, ld_h, kern->x_plus_128, w.qh, w.sx);
    }
    if (hn) memcpy(hn->data, w.h, (size_t)bh * sizeof(float));
    if (cn) memcpy(cn->data, w.c, (size_t)bh * sizeof(float));
    scratch_free(w.xp, w.bytes);
    if (status != AC_OK) {
        ac_tensor_free(cn);
        ac_tensor_free(hn);
        ac_tensor_free(out);
        return NULL;
    }
    if (h_n) *h_n = hn;
    if (c_n) *c_n = cn;
    return out;
}

AcTensor *ac_qlstm(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcQLinear *ih,
                   const AcQLinear *hh, int batch_first, int reverse, AcTensor **h_n,
                   AcTensor **c_n)
{
    QSeq s;
    s.op = "qlstm";
    s.gates = 4;
    return qrnn_forward(&s, x, h0, c0, ih, hh, batch_first, reverse, h_n, c_n);
}

AcTensor *ac_qgru(const AcTensor *x, const AcTensor *h0, const AcQLinear *ih, const AcQLinear *hh,
                  int batch_first, int reverse, AcTensor **h_n)
{
    QSeq s;
    s.op = "qgru";
    s.gates = 3;
    return qrnn_forward(&s, x, h0, NULL, ih, hh, batch_first, reverse, h_n, NULL);
}
