/*
 * qrnn.c - the int8 LSTM and GRU layers for inference (ac_qlstm, ac_qgru): one
 * layer in one direction, with ac_lstm / ac_gru's shapes, equations and gate
 * order, and their two projections packed as int8 Linear layers.
 *
 * The input projection of all steps is one quantized product over the T * B
 * input rows (the blocked kernels); then each step quantizes h and multiplies
 * it by W_hh (a matrix-vector product at batch 1), and one loop does the gate
 * math in float32 with vecmath's sigmoid and tanh (plain arithmetic, the same
 * bits on every kernel set). No graph, nothing saved for backward.
 *
 * Not here: the int8 Linear (qlinear.c), the float layers (rnn.c).
 */
#include "qlinear.h"
#include "kernels/vecmath.h"

#include <string.h>

/* The cell loops are compiled for AVX-512, AVX2 and plain x86-64, and the CPU
   picks at load time; elementwise math without contraction gives the same bits
   on each (as rnn.c's gate loops). */
#if defined(__GNUC__) && defined(__x86_64__)
#define CELL_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CELL_KERNEL
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
    if (tensor_check(op, x, "input") || qlinear_check(op, ih, "ih") || qlinear_check(op, hh, "hh"))
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

/* LSTM: xp and hp hold the projections of gates i, f, g, o of one sequence. */
CELL_KERNEL static void lstm_cell(int64_t hidden, const float *restrict xp, const float *restrict hp,
                                  float *restrict c, float *restrict h)
{
    int64_t j;
    for (j = 0; j < hidden; j++) {
        float i = sigmoid_scalar(xp[j] + hp[j]);
        float f = sigmoid_scalar(xp[hidden + j] + hp[hidden + j]);
        float g = tanh_scalar(xp[2 * hidden + j] + hp[2 * hidden + j]);
        float o = sigmoid_scalar(xp[3 * hidden + j] + hp[3 * hidden + j]);
        c[j] = f * c[j] + i * g;
        h[j] = o * tanh_scalar(c[j]);
    }
}

/* GRU: gates r, z, n; n = tanh(x_n + r * h_n), h' = (1 - z) n + z h. */
CELL_KERNEL static void gru_cell(int64_t hidden, const float *restrict xp, const float *restrict hp,
                                 float *restrict h)
{
    int64_t j;
    for (j = 0; j < hidden; j++) {
        float r = sigmoid_scalar(xp[j] + hp[j]);
        float z = sigmoid_scalar(xp[hidden + j] + hp[hidden + j]);
        float n = tanh_scalar(xp[2 * hidden + j] + r * hp[2 * hidden + j]);
        h[j] = (1.0f - z) * n + z * h[j];
    }
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

static AcTensor *qrnn_forward(QSeq *s, const AcTensor *x, const AcTensor *h0, const AcTensor *c0,
                              const AcQLinear *ih, const AcQLinear *hh, int batch_first,
                              int reverse, AcTensor **h_n, AcTensor **c_n)
{
    int64_t rows, gh, bh, k, b, shape[3];
    size_t bytes;
    float *xp, *hp, *h, *c;
    AcTensor *out, *hn = NULL, *cn = NULL;
    int status;
    if (qrnn_check(s, x, h0, c0, ih, hh, batch_first, reverse)) return NULL;
    rows = s->steps * s->batch;
    gh = s->gates * s->hidden;
    bh = s->batch * s->hidden;
    memcpy(shape, x->shape, sizeof shape);
    shape[2] = s->hidden;
    /* The outputs first, then the scratch, which goes back before they do. */
    out = tensor_alloc(s->op, shape, 3);
    bytes = (size_t)(rows * gh + s->batch * gh + 2 * bh) * sizeof(float);
    if (!out || state_tensor(s->op, s, h_n != NULL, &hn) || state_tensor(s->op, s, c_n != NULL, &cn) ||
        !(xp = scratch_alloc(bytes))) {
        ac_tensor_free(cn);
        ac_tensor_free(hn);
        ac_tensor_free(out);
        return NULL;
    }
    hp = xp + rows * gh;
    h = hp + s->batch * gh;
    c = h + bh;
    state_init(h, h0, bh);
    state_init(c, c0, bh);
    /* xp's rows follow x's: position t of sequence b at row t * B + b, or b * T + t. */
    status = qlinear_rows(ih, x->data, rows, xp);
    for (k = 0; k < s->steps && status == AC_OK; k++) {
        int64_t t = s->reverse ? s->steps - 1 - k : k;
        status = qlinear_rows(hh, h, s->batch, hp);
        for (b = 0; b < s->batch && status == AC_OK; b++) {
            int64_t row = s->batch_first ? b * s->steps + t : t * s->batch + b;
            if (s->gates == 4)
                lstm_cell(s->hidden, xp + row * gh, hp + b * gh, c + b * s->hidden, h + b * s->hidden);
            else
                gru_cell(s->hidden, xp + row * gh, hp + b * gh, h + b * s->hidden);
            memcpy(out->data + row * s->hidden, h + b * s->hidden, (size_t)s->hidden * sizeof(float));
        }
    }
    if (hn) memcpy(hn->data, h, (size_t)bh * sizeof(float));
    if (cn) memcpy(cn->data, c, (size_t)bh * sizeof(float));
    scratch_free(xp, bytes);
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
