/*
 * cpu/conv.c - the CPU's kernels for conv.c: 2-D convolution on NCHW data and
 * its backward, for any kernel size, stride, padding, dilation and groups.
 *
 * For one image and one group the convolution is a matrix product,
 * out (F/g x P) = W (F/g x K) * col (K x P), where col unfolds the input
 * (im2col): K = C/g * kH * kW rows, one per kernel tap, and P = oH * oW
 * columns, one per output pixel. col is built for a band of output rows at a
 * time, small enough to stay in cache, and never for the whole batch; with a
 * stride, from the band's input rows zero-padded and split into column phases
 * first, so that each tap's row of col is plain copies.
 * Backward, per band: dW^T += col dY^T and dcol = W^T dY, which col2im folds
 * back into dx. Both products keep the big operand (col, dY) where the GEMM
 * reads it in place; only the small one (dY, W) is transposed. A bias rides
 * along as a row of ones under col and a column of W, so forward adds it and
 * backward sums db inside the same products. A 1x1 kernel with stride 1 and
 * no padding reads x itself as col. When a whole image gives col few columns
 * (the late layers of a CNN: 4x4 or 8x8 pixels), col holds a block of images
 * side by side instead, so that each product has enough columns (and dW
 * enough depth) to run at GEMM speed; the block's output is computed into
 * scratch and copied out per image. A 3x3 kernel with stride 1 and padding 1
 * (no dilation, no groups) over 32 channels or more goes through Winograd's
 * F(2x2, 3x3) instead (kernels/winograd.c), forward, for dx (the same
 * convolution of dY with the kernel rotated) and for dW (the products of the
 * transformed dY and x tiles, summed per chunk of images and taken back to
 * 3x3), with 2.25x fewer multiplications. Even with one input channel (a first
 * layer) im2col plus the SIMD GEMM beats a direct loop in portable C, so
 * there is no direct path.
 *
 * Threads share out the images: each worker slot has its own scratch and
 * claims images one by one. dW is summed per fixed chunk of images (chunks
 * that depend on the shapes only), then over chunks in order (the threads
 * split that sum by elements of dW), so the result is the same for any
 * thread count.
 *
 * Not here: the shapes, checks and graph wiring (ops/conv.c), the GEMM
 * (kernels/gemm.c).
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/transpose.h"
#include "kernels/vecmath.h"
#include "kernels/winograd.h"

#include <string.h>

/* Floats of col per slot: a band of output rows is cut to fit. */
#define COL_BUDGET (1 << 18)
/* Images that fit in col whole are taken in blocks of about this many columns ... */
#define BLOCK_COLUMNS 256
/* ... whose col holds at most this many floats. */
#define BLOCK_BUDGET (1 << 20)
/* Winograd when channels and filters are at least this many and the map at least 2x2:
   its transforms run across the channels 32 at a time, and fewer make thin GEMMs; a map
   one pixel wide wastes half of each 2x2 tile. Measured on one thread, batch 32, forward
   and forward + backward against im2col: 32->32 at 7x7 0.33 / 1.0 ms against 0.41 / 1.26,
   64->64 at 8x8 0.93 / 3.0 against 1.6 / 5.4, 128->128 at 2x2 0.3 / 0.9 against
   0.6 / 1.9; 16->32 at 14x14 and 24->24 at 16x16 lose by 10-20%, 256->256 at 1x1 by 2x. */
#define WINOGRAD_MIN_CHANNELS 32
/* Winograd: images in blocks of about this many tiles, ... */
#define WINOGRAD_TILES 128
/* ... whose transformed input and output hold at most this many floats (an image
   that alone needs more runs im2col, in bands). */
#define WINOGRAD_BUDGET (1 << 21)
/* dW is summed over at most this many chunks of images ... */
#define DW_CHUNKS 16
/* ... whose partial sums together hold at most this many floats. */
#define DW_PART_BUDGET (1 << 22)
/* Floats of dW per task and per block when the parts are summed: a block stays in L1. */
#define DW_SUM_GRAIN 16384
#define DW_SUM_BLOCK 2048
#define BIAS_GRAIN 16384

typedef struct {
    int64_t n, c, h, w;          /* input; n is 1 for an unbatched (C, H, W) input */
    int64_t f, kh, kw;           /* filters and kernel */
    int64_t oh, ow, p;           /* output rows, columns, pixels */
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t groups, cg, fg, k;   /* channels and filters per group; K = cg*kh*kw */
    int64_t band;                /* output rows per col block */
    int64_t images;              /* images per col block (> 1 only when band == oh) */
    int winograd;                /* 3x3, stride 1, padding 1: forward and dx by Winograd */
    int64_t tile_images;         /* Winograd: images per block */
    int ones_row;                /* col has a row of ones after its K rows, W a bias column */
    int in_place;                /* 1x1, stride 1, no padding: col is x itself */
    int flat;                    /* stride 1 and oW == W: a row of col is a shifted copy of x */
    int64_t phase_w;             /* padded im2col: floats of a padded row's column phase */
    int64_t padded_floats;       /* ... and of a band's padded rows, all phases; 0: not padded */
} ConvGeom;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Images per block: at most `most`, the n images shared evenly among the blocks. */
static int64_t block_images(int64_t n, int64_t most)
{
    int64_t blocks;
    if (most <= 1 || n <= 1) return 1;
    blocks = (n + min64(most, n) - 1) / min64(most, n);
    return (n + blocks - 1) / blocks;
}

static ConvGeom conv_geom(const ConvShape *s)
{
    ConvGeom g;
    g.n = s->n;
    g.c = s->c;
    g.h = s->h;
    g.w = s->w;
    g.f = s->f;
    g.kh = s->kh;
    g.kw = s->kw;
    g.sh = s->sh;
    g.sw = s->sw;
    g.ph = s->ph;
    g.pw = s->pw;
    g.dh = s->dh;
    g.dw = s->dw;
    g.oh = s->oh;
    g.ow = s->ow;
    g.p = g.oh * g.ow;
    g.groups = s->groups;
    g.cg = g.c / g.groups;
    g.fg = g.f / g.groups;
    g.k = g.cg * g.kh * g.kw;
    g.in_place = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    g.flat = g.sh == 1 && g.sw == 1 && g.ow == g.w;
    g.ones_row = 0;
    g.band = g.in_place ? g.oh : min64(g.oh, COL_BUDGET / (g.k * g.ow > 0 ? g.k * g.ow : 1));
    if (g.band < 1) g.band = 1;
    g.phase_w = ((g.ow - 1) * g.sw + (g.kw - 1) * g.dw) / g.sw + 1;
    /* Padded when the kernel spans its stride, so that its taps read every padded pixel
       (not a strided 1x1 shortcut, which reads a quarter of them). */
    g.padded_floats = g.in_place || g.flat || (g.kh - 1) * g.dh + 1 < g.sh ||
                              (g.kw - 1) * g.dw + 1 < g.sw
                          ? 0
                          : ((g.band - 1) * g.sh + (g.kh - 1) * g.dh + 1) * g.sw * g.phase_w;
    g.images = 1;
    if (!g.in_place && g.band == g.oh && g.p > 0 && g.p < BLOCK_COLUMNS)
        g.images = block_images(g.n, min64((BLOCK_COLUMNS + g.p - 1) / g.p,
                                           BLOCK_BUDGET / ((g.k + 1) * g.p)));
    g.winograd = g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.ph == 1 && g.pw == 1 &&
                 g.dh == 1 && g.dw == 1 && g.groups == 1 &&
                 min64(g.c, g.f) >= WINOGRAD_MIN_CHANNELS && g.h >= 2 && g.w >= 2 &&
                 WINOGRAD_POINTS * (g.c + g.f) * winograd_tiles(g.h, g.w) <= WINOGRAD_BUDGET;
    g.tile_images = 1;
    if (g.winograd) {
        const int64_t tiles = winograd_tiles(g.h, g.w);
        const int64_t most = WINOGRAD_BUDGET / (WINOGRAD_POINTS * (g.c + g.f) * tiles);
        g.tile_images = block_images(g.n, min64((WINOGRAD_TILES + tiles - 1) / tiles, most));
    }
    return g;
}

/* The output columns [*lo, *hi) whose input column o*stride + offset lies in [0, size). */
static void valid_columns(int64_t out_size, int64_t size, int64_t stride, int64_t offset,
                          int64_t *lo, int64_t *hi)
{
    *lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    *hi = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
    if (*hi > out_size) *hi = out_size;
    if (*lo > *hi) *lo = *hi;
}

/* ---- im2col and col2im --------------------------------------------------- */

/*
 * Where one row of col, tap (i, j) over output rows [oh0, oh1), reads the
 * input plane: output row r (counted from oh0) and column q read input row
 * r*sh + first_row and column q*sw + offset, which lie inside the plane for
 * r in [row_lo, row_hi) and q in [col_lo, col_hi). In the flat layout that is
 * plane[r*ow + q + shift], and the valid rows, clipped to the plane, are the
 * one stretch [flat_lo, flat_hi) of the col row.
 */
typedef struct {
    int64_t row_lo, row_hi, col_lo, col_hi, first_row, offset, shift, flat_lo, flat_hi;
} TapRange;

static TapRange tap_range(const ConvGeom *g, int64_t i, int64_t j, int64_t oh0, int64_t oh1)
{
    TapRange t;
    t.first_row = oh0 * g->sh + i * g->dh - g->ph;
    t.offset = j * g->dw - g->pw;
    valid_columns(g->ow, g->w, g->sw, t.offset, &t.col_lo, &t.col_hi);
    valid_columns(oh1 - oh0, g->h, g->sh, t.first_row, &t.row_lo, &t.row_hi);
    t.shift = t.first_row * g->w + t.offset;
    t.flat_lo = t.row_lo * g->ow;
    t.flat_hi = t.row_hi * g->ow;
    if (t.flat_lo < -t.shift) t.flat_lo = -t.shift;
    if (t.flat_hi > g->h * g->w - t.shift) t.flat_hi = g->h * g->w - t.shift;
    return t;
}

/*
 * Zero the columns outside [col_lo, col_hi) of the valid rows of a col row
 * in the flat layout. There are few such columns (at most the padding), so
 * the loop runs down each column rather than along each row.
 */
static void zero_edges(float *row, const TapRange *t, int64_t ow)
{
    int64_t r, q;
    for (q = 0; q < t->col_lo; q++)
        for (r = t->row_lo; r < t->row_hi; r++) row[r * ow + q] = 0.0f;
    for (q = t->col_hi; q < ow; q++)
        for (r = t->row_lo; r < t->row_hi; r++) row[r * ow + q] = 0.0f;
}

/* dst[q] = src[q * stride] for q < n; strides 1 and 2 (the usual ones) as loops the
   compiler vectorizes. */
static void copy_strided(float *restrict dst, const float *restrict src, int64_t n,
                         int64_t stride)
{
    int64_t q;
    if (stride == 1)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (stride == 2)
        for (q = 0; q < n; q++) dst[q] = src[2 * q];
    else
        for (q = 0; q < n; q++) dst[q] = src[q * stride];
}

/*
 * Padded (not flat, as with a stride above 1 or an output narrower than the
 * input, and a kernel at least as wide as the stride): the input
 * rows that output rows [oh0, oh1) read, zero-padded, split into the stride's
 * column phases: padded column u (input column u - pw) of padded row v (input
 * row oh0*sh + v - ph) to pad[(v*sw + u % sw) * phase_w + u / sw]. Tap (i, j)
 * at output pixel (r, q) reads padded pixel (r*sh + i*dh, q*sw + j*dw), so each
 * tap's output row is a run of ow floats of one phase, with no edges to test.
 * The padding lies in the same places for every channel: pad is zeroed once
 * per band (zero_pad), then each channel's pad_phases writes the input only.
 */
static int64_t padded_rows(const ConvGeom *g, int64_t oh0, int64_t oh1)
{
    return (oh1 - 1 - oh0) * g->sh + (g->kh - 1) * g->dh + 1;
}

static void zero_pad(const ConvGeom *g, int64_t oh0, int64_t oh1, float *pad)
{
    memset(pad, 0, (size_t)(padded_rows(g, oh0, oh1) * g->sw * g->phase_w) * sizeof(float));
}

static void pad_phases(const ConvGeom *g, const float *plane, int64_t oh0, int64_t oh1,
                       float *pad)
{
    int64_t v, k, lo, hi, y_lo, y_hi;
    /* the padded rows v whose input row oh0*sh + v - ph lies in [0, h) */
    valid_columns(padded_rows(g, oh0, oh1), g->h, 1, oh0 * g->sh - g->ph, &y_lo, &y_hi);
    for (k = 0; k < g->sw; k++) {
        /* the phase's columns t with input column t*sw + k - pw in [0, w) */
        valid_columns(g->phase_w, g->w, g->sw, k - g->pw, &lo, &hi);
        for (v = y_lo; v < y_hi; v++)
            copy_strided(pad + (v * g->sw + k) * g->phase_w + lo,
                         plane + (oh0 * g->sh + v - g->ph) * g->w + lo * g->sw + k - g->pw,
                         hi - lo, g->sw);
    }
}

/*
 * col (K rows of cols = (oh1 - oh0) * ow, then the ones row if any; row r at
 * col + r*ld) for output rows [oh0, oh1) of the cg channels at x; pad holds
 * g->padded_floats.
 */
/* im2col's rows of col from the channels' padded column phases (pad_phases). */
static void im2col_padded(const ConvGeom *g, const float *x, int64_t oh0, int64_t oh1,
                          float *col, int64_t ld, float *pad)
{
    const int64_t rows = oh1 - oh0, row_step = g->sh * g->sw * g->phase_w;
    int64_t c, i, j, r, q;
    zero_pad(g, oh0, oh1, pad);
    for (c = 0; c < g->cg; c++) {
        pad_phases(g, x + c * g->h * g->w, oh0, oh1, pad);
        for (i = 0; i < g->kh; i++) {
            for (j = 0; j < g->kw; j++) {
                const float *src = pad + (i * g->dh * g->sw + j * g->dw % g->sw) * g->phase_w +
                                   j * g->dw / g->sw;
                float *row = col + ((c * g->kh + i) * g->kw + j) * ld;
                for (r = 0; r < rows; r++)
                    for (q = 0; q < g->ow; q++) row[r * g->ow + q] = src[r * row_step + q];
            }
        }
    }
}

static void im2col(const ConvGeom *g, const float *x, int64_t oh0, int64_t oh1, float *col,
                   int64_t ld, float *pad)
{
    const int64_t rows = oh1 - oh0, cols = rows * g->ow, plane_size = g->h * g->w;
    int64_t c, i, j, r, q;
    if (g->ones_row)
        for (q = 0; q < cols; q++) col[g->k * ld + q] = 1.0f;
    if (g->padded_floats) {
        im2col_padded(g, x, oh0, oh1, col, ld, pad);
        return;
    }
    for (i = 0; i < g->kh; i++) {
        for (j = 0; j < g->kw; j++) {
            const TapRange t = tap_range(g, i, j, oh0, oh1);
            const int64_t lo = t.flat_lo, hi = t.flat_hi;
            for (c = 0; c < g->cg; c++) {
                const float *plane = x + c * plane_size;
                float *row = col + ((c * g->kh + i) * g->kw + j) * ld;
                if (t.row_lo > 0) memset(row, 0, (size_t)(t.row_lo * g->ow) * sizeof(float));
                if (t.row_hi < rows)
                    memset(row + t.row_hi * g->ow, 0,
                           (size_t)((rows - t.row_hi) * g->ow) * sizeof(float));
                /* Flat: one copy of the valid rows (clipped to the plane), then
                   zeros over the columns that wrapped around from the next row. */
                if (g->flat && lo < hi)
                    memcpy(row + lo, plane + lo + t.shift, (size_t)(hi - lo) * sizeof(float));
                if (g->flat) {
                    zero_edges(row, &t, g->ow);
                    continue;
                }
                for (r = t.row_lo; r < t.row_hi; r++) {
                    float *dst = row + r * g->ow;
                    const int64_t src = (r * g->sh + t.first_row) * g->w + t.offset;
                    for (q = 0; q < t.col_lo; q++) dst[q] = 0.0f;
                    copy_strided(dst + t.col_lo, plane + src + t.col_lo * g->sw,
                                 t.col_hi - t.col_lo, g->sw);
                    for (q = t.col_hi; q < g->ow; q++) dst[q] = 0.0f;
                }
            }
        }
    }
}

static void add_into(float *restrict dst, const float *restrict src, int64_t n)
{
    int64_t q;
    for (q = 0; q < n; q++) dst[q] += src[q];
}

/*
 * dx += the fold of dcol (K rows of cols, row r at dcol + r*ld) for output
 * rows [oh0, oh1): im2col's adjoint. dcol is scratch: in the flat layout its
 * wrapped-around columns are zeroed first, so each tap is one add over a
 * contiguous stretch.
 */
static void col2im(const ConvGeom *g, float *dcol, int64_t oh0, int64_t oh1, float *dx,
                   int64_t ld)
{
    const int64_t plane_size = g->h * g->w;
    int64_t c, i, j, r, q;
    for (i = 0; i < g->kh; i++) {
        for (j = 0; j < g->kw; j++) {
            const TapRange t = tap_range(g, i, j, oh0, oh1);
            const int64_t lo = t.flat_lo, hi = t.flat_hi;
            for (c = 0; c < g->cg; c++) {
                float *plane = dx + c * plane_size;
                float *row = dcol + ((c * g->kh + i) * g->kw + j) * ld;
                if (g->flat) {
                    zero_edges(row, &t, g->ow);
                    if (lo < hi) add_into(plane + lo + t.shift, row + lo, hi - lo);
                    continue;
                }
                for (r = t.row_lo; r < t.row_hi; r++) {
                    const float *src = row + r * g->ow;
                    const int64_t dst = (r * g->sh + t.first_row) * g->w + t.offset;
                    for (q = t.col_lo; q < t.col_hi; q++) plane[dst + q * g->sw] += src[q];
                }
            }
        }
    }
}

/* ---- sharing images among threads ---------------------------------------- */

typedef struct ConvJob ConvJob;
typedef void (*ConvItemFn)(ConvJob *job, float *scratch, int64_t item);

struct ConvJob {
    ConvGeom g;
    const float *x, *w, *bias, *gy;
    const float *wt;             /* backward: W^T per group (K x F/g); Winograd: U */
    float *out, *dx, *dw_parts;
    int64_t chunk_images;        /* backward: images per chunk of dW */
    ConvItemFn fn;
    int64_t items, next_item;    /* next_item is claimed atomically */
    float *scratch;
    int64_t slot_floats;
};

static void conv_slot(void *ctx, int64_t begin, int64_t end)
{
    ConvJob *job = ctx;
    int64_t slot;
    for (slot = begin; slot < end; slot++) {
        float *scratch = job->scratch ? job->scratch + slot * job->slot_floats : NULL;
        for (;;) {
            int64_t item = __atomic_fetch_add(&job->next_item, 1, __ATOMIC_RELAXED);
            if (item >= job->items) break;
            job->fn(job, scratch, item);
        }
    }
}

/*
 * Run fn over items on up to one slot per thread, each slot with
 * slot_floats of scratch from a scope opened here. One slot runs on the
 * calling thread, outside any parallel region, so its gemm calls can use
 * the thread pool themselves.
 */
static int conv_run(ConvJob *job, int64_t items, int64_t slot_floats, ConvItemFn fn)
{
    int64_t slots = min64(ac_get_num_threads(), items);
    AcCheckpoint cp;
    if (items <= 0) return AC_OK;
    job->fn = fn;
    job->items = items;
    job->next_item = 0;
    job->slot_floats = (slot_floats + 15) / 16 * 16;
    job->scratch = NULL;
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) return ac_last_error_code();
    if (job->slot_floats > 0) {
        job->scratch = arena_alloc((size_t)(slots * job->slot_floats) * sizeof(float));
        if (!job->scratch) {
            ac_mem_restore(cp);
            return AC_ERR_MEMORY;
        }
    }
    if (slots <= 1)
        conv_slot(job, 0, 1);
    else
        parallel_for(slots, 1, conv_slot, job);
    ac_mem_restore(cp);
    return AC_OK;
}

/* The padded rows im2col uses: the last g.padded_floats floats of a slot's scratch. */
static float *slot_pad(const ConvJob *job, float *scratch)
{
    return scratch + job->slot_floats - job->g.padded_floats;
}

/* ---- forward ------------------------------------------------------------- */

/*
 * With a ones row, W carries the bias as an extra column (job->w is then that
 * F x (K+1) copy) and the product adds it; otherwise out starts as the bias.
 */
static void forward_image(ConvJob *job, float *col, int64_t n)
{
    const ConvGeom *g = &job->g;
    const int64_t kb = g->k + g->ones_row;
    const float *x = job->x + n * g->c * g->h * g->w;
    float *out = job->out + n * g->f * g->p;
    const float beta = job->bias && !g->ones_row ? 1.0f : 0.0f;
    int64_t f, q, grp, oh0;
    for (f = 0; beta != 0.0f && f < g->f; f++)
        for (q = 0; q < g->p; q++) out[f * g->p + q] = job->bias[f];
    for (grp = 0; grp < g->groups; grp++) {
        const float *xg = x + grp * g->cg * g->h * g->w, *wg = job->w + grp * g->fg * kb;
        float *og = out + grp * g->fg * g->p;
        for (oh0 = 0; oh0 < g->oh; oh0 += g->band) {
            const int64_t oh1 = min64(oh0 + g->band, g->oh), cols = (oh1 - oh0) * g->ow;
            if (g->in_place) {
                gemm(0, 0, g->fg, cols, g->k, 1.0f, wg, g->k, xg + oh0 * g->ow, g->p, beta,
                     og + oh0 * g->ow, g->p);
            } else {
                im2col(g, xg, oh0, oh1, col, cols, slot_pad(job, col));
                gemm(0, 0, g->fg, cols, kb, 1.0f, wg, kb, col, cols, beta, og + oh0 * g->ow, g->p);
            }
        }
    }
}

/*
 * Images [n0, n1) whole, side by side in col (the bias, if any, rides in its
 * ones row): the product goes to scratch after col, then out per image.
 */
static void forward_images(ConvJob *job, float *col, int64_t n0, int64_t n1)
{
    const ConvGeom *g = &job->g;
    const int64_t kb = g->k + g->ones_row, image = g->c * g->h * g->w, ld = (n1 - n0) * g->p;
    float *product = col + kb * ld;
    int64_t n, grp, f;
    for (grp = 0; grp < g->groups; grp++) {
        for (n = n0; n < n1; n++)
            im2col(g, job->x + n * image + grp * g->cg * g->h * g->w, 0, g->oh,
                   col + (n - n0) * g->p, ld, slot_pad(job, col));
        gemm(0, 0, g->fg, ld, kb, 1.0f, job->w + grp * g->fg * kb, kb, col, ld, 0.0f, product, ld);
        for (n = n0; n < n1; n++)
            for (f = 0; f < g->fg; f++)
                memcpy(job->out + (n * g->f + grp * g->fg + f) * g->p,
                       product + f * ld + (n - n0) * g->p, (size_t)g->p * sizeof(float));
    }
}

/* A block of images by Winograd: job->wt holds the transformed filters. */
static void forward_winograd(ConvJob *job, float *scratch, int64_t block)
{
    const ConvGeom *g = &job->g;
    const int64_t n0 = block * g->tile_images, n1 = min64(n0 + g->tile_images, g->n);
    winograd_conv(job->x + n0 * g->c * g->h * g->w, n1 - n0, g->c, g->h, g->w, job->wt, g->f,
                  job->bias, scratch, job->out + n0 * g->f * g->p);
}

/* The scratch of one Winograd block. */
static int64_t winograd_block_scratch(const ConvGeom *g)
{
    return winograd_scratch(g->tile_images, g->c, g->f, g->h, g->w);
}

static void forward_block(ConvJob *job, float *scratch, int64_t block)
{
    const int64_t n0 = block * job->g.images;
    if (job->g.images == 1)
        forward_image(job, scratch, n0);
    else
        forward_images(job, scratch, n0, min64(n0 + job->g.images, job->g.n));
}

int cpu_conv2d(const ConvShape *s, const float *x, const float *w, const float *bias, float *out)
{
    ConvJob job;
    AcCheckpoint cp;
    int64_t f, r;
    int status;
    if (s->n * s->f * s->oh * s->ow == 0) return AC_OK;
    memset(&job, 0, sizeof job);
    job.g = conv_geom(s);
    job.x = x;
    job.w = w;
    job.bias = bias;
    job.out = out;
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) return ac_last_error_code();
    if (job.g.winograd) {
        float *u = arena_alloc((size_t)(WINOGRAD_POINTS * job.g.f * job.g.c) * sizeof(float));
        if (u) winograd_filters(w, job.g.f, job.g.c, 0, u);
        job.wt = u;
        status = u ? conv_run(&job, (job.g.n + job.g.tile_images - 1) / job.g.tile_images,
                              winograd_block_scratch(&job.g), forward_winograd)
                   : AC_ERR_MEMORY;
        ac_mem_restore(cp);
        return status;
    }
    if (bias && !job.g.in_place) {
        /* [W | b]: the product adds the bias through col's ones row. */
        const int64_t k = job.g.k;
        float *wb = arena_alloc((size_t)(job.g.f * (k + 1)) * sizeof(float));
        if (!wb) {
            ac_mem_restore(cp);
            return AC_ERR_MEMORY;
        }
        for (f = 0; f < job.g.f; f++) {
            for (r = 0; r < k; r++) wb[f * (k + 1) + r] = w[f * k + r];
            wb[f * (k + 1) + k] = bias[f];
        }
        job.w = wb;
        job.g.ones_row = 1;
    }
    status = conv_run(&job, (job.g.n + job.g.images - 1) / job.g.images,
                      job.g.in_place ? 0
                                     : (job.g.k + job.g.ones_row + (job.g.images > 1) * job.g.fg) *
                                               job.g.images * job.g.band * job.g.ow +
                                           job.g.padded_floats,
                      forward_block);
    ac_mem_restore(cp);
    return status;
}

/* ---- backward ------------------------------------------------------------ */

/*
 * One image's dx, and its dW added into the chunk's part (first: set it),
 * which holds dW^T per group (K x F/g, then db as one more row when col has
 * its ones row): col is then the product's left operand, read in place, and
 * only dY is transposed while packing.
 */
static void backward_image(ConvJob *job, float *scratch, int64_t n, float *part, int first)
{
    const ConvGeom *g = &job->g;
    const int64_t kb = g->k + g->ones_row, image = g->c * g->h * g->w;
    float *col = scratch, *dcol = scratch ? scratch + kb * g->band * g->ow : NULL;
    const float *x = job->x + n * image, *gy = job->gy + n * g->f * g->p;
    float *dx = job->dx ? job->dx + n * image : NULL;
    int64_t grp, oh0;
    if (dx && !g->in_place) memset(dx, 0, (size_t)image * sizeof(float));
    for (grp = 0; grp < g->groups; grp++) {
        const float *xg = x + grp * g->cg * g->h * g->w, *gyg = gy + grp * g->fg * g->p;
        const float *wtg = job->wt ? job->wt + grp * g->k * g->fg : NULL;
        float *partg = part ? part + grp * kb * g->fg : NULL;
        float *dxg = dx ? dx + grp * g->cg * g->h * g->w : NULL;
        for (oh0 = 0; oh0 < g->oh; oh0 += g->band) {
            const int64_t oh1 = min64(oh0 + g->band, g->oh), cols = (oh1 - oh0) * g->ow;
            const float *gband = gyg + oh0 * g->ow;
            const float beta = first && oh0 == 0 ? 0.0f : 1.0f;
            if (partg && g->in_place) {
                gemm(0, 1, g->k, g->fg, cols, 1.0f, xg + oh0 * g->ow, g->p, gband, g->p,
                     beta, partg, g->fg);
            } else if (partg) {
                im2col(g, xg, oh0, oh1, col, cols, slot_pad(job, scratch));
                gemm(0, 1, kb, g->fg, cols, 1.0f, col, cols, gband, g->p, beta, partg, g->fg);
            }
            if (dxg && g->in_place) {
                gemm(0, 0, g->k, cols, g->fg, 1.0f, wtg, g->fg, gband, g->p, 0.0f,
                     dxg + oh0 * g->ow, g->p);
            } else if (dxg) {
                gemm(0, 0, g->k, cols, g->fg, 1.0f, wtg, g->fg, gband, g->p, 0.0f, dcol, cols);
                col2im(g, dcol, oh0, oh1, dxg, cols);
            }
        }
    }
}

/*
 * Images [n0, n1) whole, side by side: dY of the block gathered per group
 * (F/g x the block's pixels), then one product each for dW^T and dcol.
 */
static void backward_images(ConvJob *job, float *scratch, int64_t n0, int64_t n1, float *part,
                            int first)
{
    const ConvGeom *g = &job->g;
    const int64_t kb = g->k + g->ones_row, image = g->c * g->h * g->w, ld = (n1 - n0) * g->p;
    float *col = scratch, *dcol = col + kb * ld, *gy = dcol + g->k * ld;
    int64_t n, grp, f;
    for (n = n0; job->dx && n < n1; n++)
        memset(job->dx + n * image, 0, (size_t)image * sizeof(float));
    for (grp = 0; grp < g->groups; grp++) {
        const int64_t channels = grp * g->cg * g->h * g->w;
        for (n = n0; n < n1; n++)
            for (f = 0; f < g->fg; f++)
                memcpy(gy + f * ld + (n - n0) * g->p, job->gy + (n * g->f + grp * g->fg + f) * g->p,
                       (size_t)g->p * sizeof(float));
        if (part) {
            for (n = n0; n < n1; n++)
                im2col(g, job->x + n * image + channels, 0, g->oh, col + (n - n0) * g->p, ld,
                       slot_pad(job, scratch));
            gemm(0, 1, kb, g->fg, ld, 1.0f, col, ld, gy, ld, first ? 0.0f : 1.0f,
                 part + grp * kb * g->fg, g->fg);
        }
        if (job->dx) {
            gemm(0, 0, g->k, ld, g->fg, 1.0f, job->wt + grp * g->k * g->fg, g->fg, gy, ld, 0.0f,
                 dcol, ld);
            for (n = n0; n < n1; n++)
                col2im(g, dcol + (n - n0) * g->p, 0, g->oh, job->dx + n * image + channels, ld);
        }
    }
}

/* dx of a block of images by Winograd: dY convolved with the rotated kernel, U in job->wt. */
static void backward_winograd(ConvJob *job, float *scratch, int64_t block)
{
    const ConvGeom *g = &job->g;
    const int64_t n0 = block * g->tile_images, n1 = min64(n0 + g->tile_images, g->n);
    winograd_conv(job->gy + n0 * g->f * g->p, n1 - n0, g->f, g->h, g->w, job->wt, g->c, NULL,
                  scratch, job->dx + n0 * g->c * g->h * g->w);
}

/* One chunk of images, a block at a time: dx for each, their dW summed into the chunk's part. */
static void backward_chunk(ConvJob *job, float *scratch, int64_t chunk)
{
    const ConvGeom *g = &job->g;
    const int64_t n0 = chunk * job->chunk_images, n1 = min64(n0 + job->chunk_images, g->n);
    float *part = job->dw_parts ? job->dw_parts + chunk * g->f * (g->k + g->ones_row) : NULL;
    int64_t n;
    for (n = n0; n < n1; n += g->images) {
        if (g->images == 1)
            backward_image(job, scratch, n, part, n == n0);
        else
            backward_images(job, scratch, n, min64(n + g->images, n1), part, n == n0);
    }
}

typedef struct {
    const float *gy;
    float *db;
    int64_t n, f, p;
} BiasJob;

static void bias_task(void *ctx, int64_t begin, int64_t end)
{
    const BiasJob *job = ctx;
    int64_t f, n;
    for (f = begin; f < end; f++) {
        float total = 0.0f;
        for (n = 0; n < job->n; n++)
            total += vec_sum(job->gy + (n * job->f + f) * job->p, job->p);
        job->db[f] = total;
    }
}

/* Images per chunk of dW: a count that depends on the shapes only. */
static int64_t dw_chunk_images(const ConvGeom *g)
{
    int64_t wsize = g->f * g->k > 0 ? g->f * g->k : 1;
    int64_t chunks = min64(min64(g->n, DW_CHUNKS), DW_PART_BUDGET / wsize);
    if (chunks < 1) chunks = 1;
    return (g->n + chunks - 1) / chunks;
}

typedef struct {
    float *parts;                /* chunks parts of size floats each, back to back */
    int64_t size, chunks;
} PartsJob;

/* Elements [begin, end) of the parts added into the first, a block at a time. */
static void sum_parts_task(void *ctx, int64_t begin, int64_t end)
{
    const PartsJob *job = ctx;
    int64_t q, c;
    for (q = begin; q < end; q += DW_SUM_BLOCK) {
        const int64_t n = min64(DW_SUM_BLOCK, end - q);
        for (c = 1; c < job->chunks; c++) add_into(job->parts + q, job->parts + c * job->size + q, n);
    }
}

/*
 * The parts added into the first, split among the threads by elements: each
 * element has one writer and adds its chunks in chunk order, so the sum is the
 * same for any thread count.
 */
static void add_parts(float *parts, int64_t size, int64_t chunks)
{
    PartsJob job;
    job.parts = parts;
    job.size = size;
    job.chunks = chunks;
    if (chunks > 1) parallel_for(size, DW_SUM_GRAIN, sum_parts_task, &job);
}

/*
 * dW (and db from the ones row) = the sum of the chunks' parts, in chunk
 * order, added up in the first part, then transposed out of it per group.
 */
static void sum_parts(const ConvGeom *g, float *parts, int64_t chunks, float *dw, float *db)
{
    const int64_t kb = g->k + g->ones_row;
    int64_t grp;
    add_parts(parts, g->f * kb, chunks);
    for (grp = 0; grp < g->groups; grp++) {
        const float *part = parts + grp * kb * g->fg;
        matrix_transpose(dw + grp * g->fg * g->k, g->k, part, g->fg, g->k, g->fg, 0);
        if (db) memcpy(db + grp * g->fg, part + g->k * g->fg, (size_t)g->fg * sizeof(float));
    }
}

/* One chunk of Winograd blocks: their du summed into the chunk's part. */
static void weight_grad_winograd(ConvJob *job, float *scratch, int64_t chunk)
{
    const ConvGeom *g = &job->g;
    const int64_t n0 = chunk * job->chunk_images, n1 = min64(n0 + job->chunk_images, g->n);
    float *part = job->dw_parts + chunk * WINOGRAD_POINTS * g->f * g->c;
    int64_t n;
    for (n = n0; n < n1; n += g->tile_images)
        winograd_weight_grad(job->x + n * g->c * g->h * g->w, job->gy + n * g->f * g->p,
                             min64(n + g->tile_images, n1) - n, g->c, g->f, g->h, g->w, scratch,
                             part, n != n0);
}

/*
 * dW by Winograd: chunks of whole blocks (shapes only) each sum their du, the
 * chunks are added in order, and the sum goes back to 3x3 kernels. Scratch
 * from the caller's scope.
 */
static int winograd_weight_gradient(ConvJob *job, float *dw)
{
    const ConvGeom *g = &job->g;
    const int64_t usize = WINOGRAD_POINTS * g->f * g->c;
    const int64_t blocks = (g->n + g->tile_images - 1) / g->tile_images;
    int64_t chunks = min64(min64(blocks, DW_CHUNKS), DW_PART_BUDGET / usize), per_chunk;
    int status;
    if (chunks < 1) chunks = 1;
    per_chunk = (blocks + chunks - 1) / chunks;
    chunks = (blocks + per_chunk - 1) / per_chunk;
    job->chunk_images = per_chunk * g->tile_images;
    job->dw_parts = arena_alloc((size_t)(chunks * usize) * sizeof(float));
    if (!job->dw_parts) return AC_ERR_MEMORY;
    status = conv_run(job, chunks, winograd_block_scratch(g), weight_grad_winograd);
    if (status != AC_OK) return status;
    add_parts(job->dw_parts, usize, chunks);
    winograd_filters_grad(job->dw_parts, g->f, g->c, dw);
    return AC_OK;
}


int cpu_conv2d_backward(const ConvShape *s, const float *x, const float *w, const float *gy,
                        float *dx, float *dw, float *db)
{
    ConvJob job;
    AcCheckpoint cp;
    int64_t wsize, chunks;
    int status = AC_OK;
    memset(&job, 0, sizeof job);
    job.g = conv_geom(s);
    /* db comes with dW from col's ones row, or else from its own sums. */
    job.g.ones_row = db && dw && !job.g.in_place && !job.g.winograd;
    wsize = job.g.f * (job.g.k + job.g.ones_row);
    job.x = x;
    job.gy = gy;
    job.dx = dx;
    if (dx && (job.g.n == 0 || job.g.f == 0))
        memset(dx, 0, (size_t)(job.g.n * job.g.c * job.g.h * job.g.w) * sizeof(float));
    if (dw) memset(dw, 0, (size_t)(job.g.f * job.g.k) * sizeof(float));
    if (db) memset(db, 0, (size_t)job.g.f * sizeof(float));
    if (db && !job.g.ones_row) {
        BiasJob bias_job;
        bias_job.gy = gy;
        bias_job.db = db;
        bias_job.n = job.g.n;
        bias_job.f = job.g.f;
        bias_job.p = job.g.p;
        parallel_for(job.g.f, BIAS_GRAIN / (job.g.n * job.g.p + 1) + 1, bias_task, &bias_job);
    }
    if ((!dx && !dw) || job.g.n == 0 || job.g.f == 0 || job.g.k == 0) return AC_OK;

    /* Whole blocks per chunk, so that the blocks, like the chunks, depend on the shapes only. */
    job.chunk_images = dw ? dw_chunk_images(&job.g) : 1;
    job.chunk_images = (job.chunk_images + job.g.images - 1) / job.g.images * job.g.images;
    chunks = (job.g.n + job.chunk_images - 1) / job.chunk_images;
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) return ac_last_error_code();
    if (job.g.winograd) {
        if (dx) {
            float *u = arena_alloc((size_t)(WINOGRAD_POINTS * job.g.f * job.g.c) * sizeof(float));
            if (u) winograd_filters(w, job.g.c, job.g.f, 1, u);
            job.wt = u;
            status = u ? conv_run(&job, (job.g.n + job.g.tile_images - 1) / job.g.tile_images,
                                  winograd_block_scratch(&job.g), backward_winograd)
                       : AC_ERR_MEMORY;
        }
        if (dw && status == AC_OK) status = winograd_weight_gradient(&job, dw);
        ac_mem_restore(cp);
        return status;
    }
    if (dx) {
        float *wt = arena_alloc((size_t)(job.g.f * job.g.k) * sizeof(float));
        int64_t grp;
        for (grp = 0; wt && grp < job.g.groups; grp++)   /* W^T per group */
            matrix_transpose(wt + grp * job.g.k * job.g.fg, job.g.fg,
                             w + grp * job.g.fg * job.g.k, job.g.k, job.g.fg, job.g.k, 0);
        job.wt = wt;
        if (!wt) status = AC_ERR_MEMORY;
    }
    if (dw && status == AC_OK) {
        job.dw_parts = arena_alloc((size_t)(chunks * wsize) * sizeof(float));
        if (!job.dw_parts) status = AC_ERR_MEMORY;
    }
    if (status == AC_OK)
        status = conv_run(&job, chunks,
                          job.g.in_place ? 0
                                         : (2 * job.g.k + job.g.ones_row +
                                            (job.g.images > 1) * job.g.fg) *
                                                   job.g.images * job.g.band * job.g.ow +
                                               job.g.padded_floats,
                          backward_chunk);
    if (status == AC_OK && dw) sum_parts(&job.g, job.dw_parts, chunks, dw, job.g.ones_row ? db : NULL);
    ac_mem_restore(cp);
    return status;
}
