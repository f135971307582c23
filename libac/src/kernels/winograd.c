/*
 * winograd.c - Winograd's F(2x2, 3x3) for 3x3 convolutions with stride 1 and
 * padding 1 (Lavin and Gray, "Fast Algorithms for Convolutional Neural
 * Networks", 2016): Y = A^T [ (G g G^T) . (B^T d B) ] A per 4x4 input tile d
 * (stride 2) and 2x2 output tile Y, the elementwise product summed over
 * channels as 16 GEMMs. The weight gradient follows from the same formula:
 * dg = G^T [ sum over tiles of (A dY A^T) . (B^T d B) ] G, 16 GEMMs over the
 * tiles. The transforms use only 1, -1 and 1/2, so the results stay within a
 * few float roundings of the direct sums.
 *
 * The transforms split their images and tile rows (planes on wide maps;
 * channels or filters for the kernels' transforms) among the pool's threads;
 * each output element has one writer and the same sums, so the bits do not
 * depend on the thread count. Called from a task that already shares
 * images among threads (ops/conv.c), they run in it.
 *
 * Not here: choosing when to use it and sharing images among threads
 * (ops/conv.c), the GEMM (gemm.c).
 */
#include "internal.h"
#include "cpu.h"
#include "transpose.h"
#include "winograd.h"

#include <string.h>

/*
 * The transforms run over CHUNK channels (filters) at a time, in loops over
 * contiguous arrays that the compiler vectorizes.
 */
#define CHUNK 32
/* Elements a transform task reads or writes, at least. */
#define TRANSFORM_GRAIN 16384

/* What the kernels' transforms work on; each task takes a range of channels
   (winograd_filters) or of filters (winograd_filters_grad). */
typedef struct {
    const float *in;
    float *out;
    int64_t filters, channels;
    int adjoint;
    int stream;              /* winograd_filters: u's rows by streaming stores */
} TransformJob;

static int64_t plane_grain(int64_t elements) { return TRANSFORM_GRAIN / (elements + 1) + 1; }

/*
 * u of at least this many floats (16 MB, as for 512x512 kernels) is written by
 * streaming stores, past the caches, where AVX-512 runs and its rows are
 * aligned: writing it through them cost twice as long (one thread, 512x512:
 * 2.9 -> 1.5 ms), and its GEMMs read each point's matrix once.
 */
#define STREAM_FLOATS (1 << 22)

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* rows[k][0:CHUNK] to out[k * plane] for the 16 points, by streaming stores: out and
   plane aligned to 16 floats. */
__attribute__((target("avx512f"))) static void stream_points(float rows[16][CHUNK],
                                                               int64_t plane, float *out)
{
    int k, h;
    for (k = 0; k < 16; k++)
        for (h = 0; h < CHUNK; h += 16)
            _mm512_stream_ps(out + k * plane + h, _mm512_loadu_ps(rows[k] + h));
}

/* The streaming stores made visible to the threads that read u next. */
static void stream_fence(void) { _mm_sfence(); }
#else
static void stream_points(float rows[16][CHUNK], int64_t plane, float *out)
{
    (void)rows, (void)plane, (void)out;
}
static void stream_fence(void) {}
#endif

int64_t winograd_tiles(int64_t h, int64_t w)
{
    return ((h + 1) / 2) * ((w + 1) / 2);
}

/* The kernels' transform gathers w (filters, channels, 3, 3) in blocks of FILTER_CHANNELS
   channels by FILTER_FILTERS filters: a filter's 9 taps of 16 channels are 9 whole cache
   lines. */
#define FILTER_CHANNELS 16
#define FILTER_FILTERS 64

/* count floats from src to dst: a whole CHUNK, the usual case, as a copy of constant size
   that the compiler inlines. */
static void copy_chunk(float *dst, const float *src, int64_t count)
{
    if (count == CHUNK)
        memcpy(dst, src, CHUNK * sizeof(float));
    else
        memcpy(dst, src, (size_t)count * sizeof(float));
}

/* u's points of count kernels gathered tap-major (tap a of kernel f at g[a * ld + f]): point
   k to row[k * plane + f]; whole CHUNKs by stream_points when stream. */
CPU_CLONES static void filter_points(const float *g, int64_t ld, int64_t count,
                                           int64_t plane, int stream, float *row)
{
    float gg[4][3][CHUNK], o[16][CHUNK];
    int64_t f0, f, n;
    int a, b, k;
    for (f0 = 0; f0 < count; f0 += n) {
        n = count - f0 < CHUNK ? count - f0 : CHUNK;
        for (b = 0; b < 3; b++) {   /* G g: G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1] */
            const float *k0 = g + b * ld + f0, *k1 = g + (3 + b) * ld + f0;
            const float *k2 = g + (6 + b) * ld + f0;
            for (f = 0; f < n; f++) {
                gg[0][b][f] = k0[f];
                gg[1][b][f] = 0.5f * (k0[f] + k1[f] + k2[f]);
                gg[2][b][f] = 0.5f * (k0[f] - k1[f] + k2[f]);
                gg[3][b][f] = k2[f];
            }
        }
        for (a = 0; a < 4; a++) {   /* (G g) G^T */
            for (f = 0; f < n; f++) {
                o[4 * a][f] = gg[a][0][f];
                o[4 * a + 1][f] = 0.5f * (gg[a][0][f] + gg[a][1][f] + gg[a][2][f]);
                o[4 * a + 2][f] = 0.5f * (gg[a][0][f] - gg[a][1][f] + gg[a][2][f]);
                o[4 * a + 3][f] = gg[a][2][f];
            }
        }
        if (stream && n == CHUNK) {
            stream_points(o, plane, row + f0);
            continue;
        }
        for (k = 0; k < 16; k++) copy_chunk(row + k * plane + f0, o[k], n);
    }
}

/*
 * u's points (16 x channels x filters) of channels [c0, c1). w is gathered tap-major by
 * transposes of blocks of channels and filters, which read it in whole lines (its rows
 * one cache line longer than the block, so that they do not share L1 sets). The
 * adjoint's w (channels, filters, 3, 3) lies channel by channel: it is read CHUNK
 * kernels at a time, rotated by 180 degrees.
 */
static void filters_range(const float *w, int64_t filters, int64_t channels, int adjoint,
                          int stream, float *u, int64_t c0, int64_t c1)
{
    const int64_t plane = filters * channels, ld = FILTER_FILTERS + 16;
    float g[9 * FILTER_CHANNELS * (FILTER_FILTERS + 16)];
    int64_t cb, c, cc, f0, f, count;
    int a;
    for (cb = c0; cb < c1 && adjoint; cb++) {
        for (f0 = 0; f0 < filters; f0 += count) {
            const float *src = w + (cb * filters + f0) * 9;
            count = filters - f0 < CHUNK ? filters - f0 : CHUNK;
            for (f = 0; f < count; f++)
                for (a = 0; a < 9; a++) g[a * CHUNK + f] = src[f * 9 + 8 - a];
            filter_points(g, CHUNK, count, plane, stream, u + cb * filters + f0);
        }
    }
    for (cb = c0; cb < c1 && !adjoint; cb += cc) {
        cc = c1 - cb < FILTER_CHANNELS ? c1 - cb : FILTER_CHANNELS;
        for (f0 = 0; f0 < filters; f0 += count) {
            count = filters - f0 < FILTER_FILTERS ? filters - f0 : FILTER_FILTERS;
            matrix_transpose(g, ld, w + (f0 * channels + cb) * 9, channels * 9, count, cc * 9, 0);
            for (c = 0; c < cc; c++)
                filter_points(g + 9 * c * ld, ld, count, plane, stream,
                              u + (cb + c) * filters + f0);
        }
    }
}

static void filters_task(void *ctx, int64_t begin, int64_t end)
{
    const TransformJob *j = ctx;
    filters_range(j->in, j->filters, j->channels, j->adjoint, j->stream, j->out, begin, end);
    if (j->stream) stream_fence();
}

void winograd_filters(const float *w, int64_t filters, int64_t channels, int adjoint, float *u)
{
    TransformJob job = {0};
    job.in = w;
    job.out = u;
    job.filters = filters;
    job.channels = channels;
    job.adjoint = adjoint;
    job.stream = WINOGRAD_POINTS * filters * channels >= STREAM_FLOATS && filters % 16 == 0 &&
                 (uintptr_t)u % 64 == 0 && cpu_uses_avx512();
    parallel_for(channels, plane_grain(WINOGRAD_POINTS * filters), filters_task, &job);
}


/*
 * The transforms of the tiles run on the planes transposed, pixel-major (an
 * image's h*w x channels, scratch t): each tile's 16 points are sums of
 * whole rows of channels, loops the compiler vectorizes however small the
 * plane (a 4x4 map has 4 tiles, too few to vectorize over). The points go
 * to v[point][tile][channel], which the GEMMs read as tiles x channels;
 * each tile row's output rows go back to channel-major while still in cache.
 * A tap outside the plane reads zeros; an output pixel past it is dropped.
 */

/* The tiles of an h x w plane: th rows of tw. */
typedef struct {
    int64_t h, w, th, tw;
} TileGrid;

static TileGrid tile_grid(int64_t h, int64_t w)
{
    TileGrid g;
    g.h = h;
    g.w = w;
    g.th = (h + 1) / 2;
    g.tw = (w + 1) / 2;
    return g;
}

/* Pixel (y, x) of a transposed plane of `width` channels, or NULL outside it. */
static float *pixel(const TileGrid *g, float *t, int64_t width, int64_t y, int64_t x)
{
    return y < 0 || y >= g->h || x < 0 || x >= g->w ? NULL : t + (y * g->w + x) * width;
}

/* Channels [c0, c0 + count) of the taps (NULL: zeros) into rows of d. */
static void load_taps(float *const *taps, int ntaps, int64_t c0, int64_t count, float d[][CHUNK])
{
    int k;
    for (k = 0; k < ntaps; k++) {
        if (taps[k])
            copy_chunk(d[k], taps[k] + c0, count);
        else
            memset(d[k], 0, (size_t)count * sizeof(float));
    }
}

/* B^T d B of one tile: taps[4a+b] is input pixel (2ty-1+a, 2tx-1+b); point k to v[k * stride]. */
CPU_CLONES static void input_tile(float *const taps[16], int64_t channels, float *v,
                                        int64_t stride)
{
    float d[16][CHUNK], o[16][CHUNK];
    int64_t c0, c, count;
    int k;
    for (c0 = 0; c0 < channels; c0 += count) {
        count = channels - c0 < CHUNK ? channels - c0 : CHUNK;
        load_taps(taps, 16, c0, count, d);
        for (c = 0; c < count; c++) {
            float t[4][4];   /* B^T d: B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
            int a, b;
            for (b = 0; b < 4; b++) {
                t[0][b] = d[b][c] - d[8 + b][c];
                t[1][b] = d[4 + b][c] + d[8 + b][c];
                t[2][b] = d[8 + b][c] - d[4 + b][c];
                t[3][b] = d[4 + b][c] - d[12 + b][c];
            }
            for (a = 0; a < 4; a++) {   /* (B^T d) B */
                o[4 * a][c] = t[a][0] - t[a][2];
                o[4 * a + 1][c] = t[a][1] + t[a][2];
                o[4 * a + 2][c] = t[a][2] - t[a][1];
                o[4 * a + 3][c] = t[a][1] - t[a][3];
            }
        }
        for (k = 0; k < 16; k++) copy_chunk(v + k * stride + c0, o[k], count);
    }
}

/* A dy A^T of one tile (output_tile's adjoint): taps[2r+s] is pixel (2ty+r, 2tx+s) of dy,
   A = [1 0; 1 1; 1 -1; 0 -1]; point k to m[k * stride]. */
CPU_CLONES static void grad_tile(float *const taps[4], int64_t filters, float *m,
                                       int64_t stride)
{
    float y[4][CHUNK], o[16][CHUNK];
    int64_t c0, c, count;
    int k;
    for (c0 = 0; c0 < filters; c0 += count) {
        count = filters - c0 < CHUNK ? filters - c0 : CHUNK;
        load_taps(taps, 4, c0, count, y);
        for (c = 0; c < count; c++) {
            float e[2][4];   /* dy A^T, row by row */
            int r, j;
            for (r = 0; r < 2; r++) {
                e[r][0] = y[2 * r][c];
                e[r][1] = y[2 * r][c] + y[2 * r + 1][c];
                e[r][2] = y[2 * r][c] - y[2 * r + 1][c];
                e[r][3] = -y[2 * r + 1][c];
            }
            for (j = 0; j < 4; j++) {   /* A (dy A^T) */
                o[j][c] = e[0][j];
                o[4 + j][c] = e[0][j] + e[1][j];
                o[8 + j][c] = e[0][j] - e[1][j];
                o[12 + j][c] = -e[1][j];
            }
        }
        for (k = 0; k < 16; k++) copy_chunk(m + k * stride + c0, o[k], count);
    }
}

/* A^T m A + bias of one tile, A^T = [1 1 1 0; 0 1 -1 -1]: point k at m[k * stride], output
   pixel (2ty+r, 2tx+s) to out[2r+s] unless NULL (past the plane). */
CPU_CLONES static void output_tile(const float *m, int64_t stride, int64_t filters,
                                         const float *bias, float *const out[4])
{
    float y[4][CHUNK];
    int64_t c0, c, count;
    int k;
    for (c0 = 0; c0 < filters; c0 += count) {
        count = filters - c0 < CHUNK ? filters - c0 : CHUNK;
        for (c = 0; c < count; c++) {
            const float *p = m + c0 + c;
            const float add = bias ? bias[c0 + c] : 0.0f;
            float s[2][4];   /* A^T m */
            int b, r;
            for (b = 0; b < 4; b++) {
                s[0][b] = p[b * stride] + p[(4 + b) * stride] + p[(8 + b) * stride];
                s[1][b] = p[(4 + b) * stride] - p[(8 + b) * stride] - p[(12 + b) * stride];
            }
            for (r = 0; r < 2; r++) {   /* (A^T m) A */
                y[2 * r][c] = s[r][0] + s[r][1] + s[r][2] + add;
                y[2 * r + 1][c] = s[r][1] - s[r][2] - s[r][3] + add;
            }
        }
        for (k = 0; k < 4; k++)
            if (out[k]) copy_chunk(out[k] + c0, y[k], count);
    }
}

/*
 * Floats from one point's matrix (tiles x width) to the next: one cache line
 * more than its size, which is often a multiple of 4 KB, so that the 16
 * points of a tile do not all fall into the same sets of the L1 cache.
 */
static int64_t point_stride(int64_t tiles, int64_t width)
{
    return tiles * width + 16;
}

/* What one transform's tasks share. */
typedef struct {
    const float *in, *bias;
    float *t, *out;
    int64_t images, width;   /* width: channels (filters) of a transposed plane */
    TileGrid grid;
    int grad;                /* to_points: dy's tiles (grad_tile), not x's (input_tile) */
} TilesJob;

/* Images [begin, end) of in (width x h*w each) transposed into t (h*w x width each). */
static void transpose_in_task(void *ctx, int64_t begin, int64_t end)
{
    const TilesJob *j = ctx;
    const int64_t hw = j->grid.h * j->grid.w;
    int64_t n;
    for (n = begin; n < end; n++)
        matrix_transpose(j->t + n * hw * j->width, j->width, j->in + n * j->width * hw, hw,
                         j->width, hw, 0);
}

/* Tile rows [begin, end) (row ty of image n is n * th + ty) of t into the points at out. */
static void to_points_task(void *ctx, int64_t begin, int64_t end)
{
    const TilesJob *j = ctx;
    const TileGrid *g = &j->grid;
    const int64_t hw = g->h * g->w, stride = point_stride(j->images * g->th * g->tw, j->width);
    int64_t row, tx;
    for (row = begin; row < end; row++) {
        const int64_t n = row / g->th, ty = row % g->th;
        float *plane = j->t + n * hw * j->width;
        for (tx = 0; tx < g->tw; tx++) {
            float *points = j->out + (row * g->tw + tx) * j->width, *taps[16];
            int a, b;
            if (j->grad) {
                for (a = 0; a < 2; a++)
                    for (b = 0; b < 2; b++)
                        taps[2 * a + b] = pixel(g, plane, j->width, 2 * ty + a, 2 * tx + b);
                grad_tile(taps, j->width, points, stride);
                continue;
            }
            for (a = 0; a < 4; a++)
                for (b = 0; b < 4; b++)
                    taps[4 * a + b] = pixel(g, plane, j->width, 2 * ty - 1 + a, 2 * tx - 1 + b);
            input_tile(taps, j->width, points, stride);
        }
    }
}

/*
 * Wide maps (ROW_TILES tiles a row or more) skip the transposes: the
 * transforms run along tile rows of each channel-major plane, CHUNK tiles at
 * a time, and the points go to v[point][channel][tile]; the GEMMs take them
 * as channels x tiles and give m as filters x tiles, whose tile rows go back
 * into the output planes directly. On 32x32 maps of 64 channels the
 * transposes cost more than transforms across channels save (one thread,
 * batch 32: forward 15.6 -> 13.8 ms, forward + dx + dW 48.1 -> 44.4 ms); on
 * 16x16 maps of 128 (8 tiles a row) this way lost 6% of forward + backward.
 */
#define ROW_TILES 16

static int rows_layout(int64_t w)
{
    return (w + 1) / 2 >= ROW_TILES;
}

/* B^T d B of count tiles of row ty from column t0 of one plane: point k of tile i to
   v[k * stride + i]. */
CPU_CLONES static void input_row(const float *plane, const TileGrid *g, int64_t ty,
                                       int64_t t0, int64_t count, float *v, int64_t stride)
{
    static const float zeros[2 * CHUNK + 2];
    float t[4][2 * CHUNK + 2];
    const float *d[4];   /* d[a][j - lo]: row 2ty-1+a, column col0 + j */
    const int64_t width = 2 * count + 2, col0 = 2 * t0 - 1;
    const int64_t lo = col0 < 0 ? -col0 : 0, hi = col0 + width > g->w ? g->w - col0 : width;
    int64_t a, j, k;
    for (a = 0; a < 4; a++) {
        const int64_t y = 2 * ty - 1 + a;
        d[a] = y < 0 || y >= g->h ? zeros : plane + y * g->w + col0 + lo;
    }
    for (j = 0; j < lo; j++) t[0][j] = t[1][j] = t[2][j] = t[3][j] = 0.0f;
    for (j = lo; j < hi; j++) {   /* B^T d */
        t[0][j] = d[0][j - lo] - d[2][j - lo];
        t[1][j] = d[1][j - lo] + d[2][j - lo];
        t[2][j] = d[2][j - lo] - d[1][j - lo];
        t[3][j] = d[1][j - lo] - d[3][j - lo];
    }
    for (j = hi; j < width; j++) t[0][j] = t[1][j] = t[2][j] = t[3][j] = 0.0f;
    for (a = 0; a < 4; a++) {     /* (B^T d) B, tile k reading columns 2k .. 2k+3 */
        float *o = v + a * 4 * stride;
        for (k = 0; k < count; k++) {
            const float c0 = t[a][2 * k], c1 = t[a][2 * k + 1];
            const float c2 = t[a][2 * k + 2], c3 = t[a][2 * k + 3];
            o[k] = c0 - c2;
            o[stride + k] = c1 + c2;
            o[2 * stride + k] = c2 - c1;
            o[3 * stride + k] = c1 - c3;
        }
    }
}

/* A dy A^T of count tiles of row ty from column t0 of one plane of dy (input_row's layout). */
CPU_CLONES static void grad_row(const float *plane, const TileGrid *g, int64_t ty,
                                      int64_t t0, int64_t count, float *m, int64_t stride)
{
    float y[2][2 * CHUNK], e[2][4][CHUNK];
    const int64_t cols = 2 * count < g->w - 2 * t0 ? 2 * count : g->w - 2 * t0;
    int64_t r, k, j;
    for (r = 0; r < 2; r++) {
        const int inside = 2 * ty + r < g->h;
        if (inside)
            memcpy(y[r], plane + (2 * ty + r) * g->w + 2 * t0, (size_t)cols * sizeof(float));
        for (j = inside ? cols : 0; j < 2 * count; j++) y[r][j] = 0.0f;
        for (k = 0; k < count; k++) {   /* dy A^T, row r */
            const float y0 = y[r][2 * k], y1 = y[r][2 * k + 1];
            e[r][0][k] = y0;
            e[r][1][k] = y0 + y1;
            e[r][2][k] = y0 - y1;
            e[r][3][k] = -y1;
        }
    }
    for (j = 0; j < 4; j++) {           /* A (dy A^T) */
        for (k = 0; k < count; k++) {
            m[j * stride + k] = e[0][j][k];
            m[(4 + j) * stride + k] = e[0][j][k] + e[1][j][k];
            m[(8 + j) * stride + k] = e[0][j][k] - e[1][j][k];
            m[(12 + j) * stride + k] = -e[1][j][k];
        }
    }
}

/* A^T m A + bias of count tiles (input_row's layout) into row ty from column t0 of a plane. */
CPU_CLONES static void output_row(const float *m, int64_t stride, const TileGrid *g,
                                        int64_t ty, int64_t t0, int64_t count, float bias,
                                        float *plane)
{
    float s[2][4][CHUNK], y[2 * CHUNK];
    const int64_t cols = 2 * count < g->w - 2 * t0 ? 2 * count : g->w - 2 * t0;
    int64_t b, k, r;
    for (b = 0; b < 4; b++) {       /* A^T m */
        const float *m0 = m + b * stride, *m1 = m + (4 + b) * stride;
        const float *m2 = m + (8 + b) * stride, *m3 = m + (12 + b) * stride;
        for (k = 0; k < count; k++) {
            s[0][b][k] = m0[k] + m1[k] + m2[k];
            s[1][b][k] = m1[k] - m2[k] - m3[k];
        }
    }
    for (r = 0; r < 2 && 2 * ty + r < g->h; r++) {   /* (A^T m) A, the columns past w dropped */
        float *row = plane + (2 * ty + r) * g->w + 2 * t0, *dst = cols == 2 * count ? row : y;
        for (k = 0; k < count; k++) {
            dst[2 * k] = s[r][0][k] + s[r][1][k] + s[r][2][k] + bias;
            dst[2 * k + 1] = s[r][1][k] - s[r][2][k] - s[r][3][k] + bias;
        }
        if (dst == y) memcpy(row, y, (size_t)cols * sizeof(float));
    }
}

/* Planes [begin, end) (plane p: image p / width's channel p % width) into the points. */
static void plane_points_task(void *ctx, int64_t begin, int64_t end)
{
    const TilesJob *j = ctx;
    const TileGrid *g = &j->grid;
    const int64_t tiles = j->images * g->th * g->tw, stride = point_stride(tiles, j->width);
    int64_t p, ty, t0;
    for (p = begin; p < end; p++) {
        const int64_t n = p / j->width, c = p % j->width;
        const float *plane = j->in + p * g->h * g->w;
        for (ty = 0; ty < g->th; ty++) {
            for (t0 = 0; t0 < g->tw; t0 += CHUNK) {
                const int64_t count = g->tw - t0 < CHUNK ? g->tw - t0 : CHUNK;
                float *points = j->out + c * tiles + (n * g->th + ty) * g->tw + t0;
                if (j->grad)
                    grad_row(plane, g, ty, t0, count, points, stride);
                else
                    input_row(plane, g, ty, t0, count, points, stride);
            }
        }
    }
}

/* Planes [begin, end) of the output from the points (plane_points_task's layout). */
static void plane_output_task(void *ctx, int64_t begin, int64_t end)
{
    const TilesJob *j = ctx;
    const TileGrid *g = &j->grid;
    const int64_t tiles = j->images * g->th * g->tw, stride = point_stride(tiles, j->width);
    int64_t p, ty, t0;
    for (p = begin; p < end; p++) {
        const int64_t n = p / j->width, f = p % j->width;
        for (ty = 0; ty < g->th; ty++)
            for (t0 = 0; t0 < g->tw; t0 += CHUNK)
                output_row(j->in + f * tiles + (n * g->th + ty) * g->tw + t0, stride, g, ty, t0,
                           g->tw - t0 < CHUNK ? g->tw - t0 : CHUNK, j->bias ? j->bias[f] : 0.0f,
                           j->out + p * g->h * g->w);
    }
}

/* Images a task takes, at least. */
static int64_t image_grain(const TileGrid *g, int64_t width)
{
    return TRANSFORM_GRAIN / (g->h * g->w * width + 1) + 1;
}

/* out[point][tile][c]: the tiles of in (images x width x h x w) transformed, t scratch. */
static void to_points(const float *in, int64_t images, int64_t width, int64_t h, int64_t w,
                      int grad, float *t, float *out)
{
    TilesJob job = {0};
    job.in = in;
    job.t = t;
    job.out = out;
    job.images = images;
    job.width = width;
    job.grid = tile_grid(h, w);
    job.grad = grad;
    if (rows_layout(w)) {
        parallel_for(images * width, plane_grain(WINOGRAD_POINTS * h * w), plane_points_task, &job);
        return;
    }
    parallel_for(images, image_grain(&job.grid, width), transpose_in_task, &job);
    parallel_for(images * job.grid.th, image_grain(&job.grid, width) * job.grid.th,
                 to_points_task, &job);
}

/*
 * Tile rows [begin, end) of the points in job->in into out: each row's two
 * output rows into t (pixel-major, as the image's h*w x filters), then
 * transposed out while they are still in cache.
 */
static void output_task(void *ctx, int64_t begin, int64_t end)
{
    const TilesJob *j = ctx;
    const TileGrid *g = &j->grid;
    const int64_t hw = g->h * g->w, stride = point_stride(j->images * g->th * g->tw, j->width);
    int64_t row, tx;
    for (row = begin; row < end; row++) {
        const int64_t n = row / g->th, ty = row % g->th, rows = 2 * ty + 1 < g->h ? 2 : 1;
        float *plane = j->t + n * hw * j->width;
        for (tx = 0; tx < g->tw; tx++) {
            float *out[4];
            int r, s;
            for (r = 0; r < 2; r++)
                for (s = 0; s < 2; s++)
                    out[2 * r + s] = pixel(g, plane, j->width, 2 * ty + r, 2 * tx + s);
            output_tile(j->in + (row * g->tw + tx) * j->width, stride, j->width, j->bias, out);
        }
        matrix_transpose(j->out + n * j->width * hw + 2 * ty * g->w, hw,
                         plane + 2 * ty * g->w * j->width, j->width, rows * g->w, j->width, 0);
    }
}

/* out (images x filters x h x w) = A^T m A (+ bias) of the points m, t scratch. */
static void transform_output(const float *m, int64_t images, int64_t filters, int64_t h,
                             int64_t w, const float *bias, float *t, float *out)
{
    TilesJob job = {0};
    job.in = m;
    job.bias = bias;
    job.t = t;
    job.out = out;
    job.images = images;
    job.width = filters;
    job.grid = tile_grid(h, w);
    if (rows_layout(w))
        parallel_for(images * filters, plane_grain(WINOGRAD_POINTS * h * w), plane_output_task,
                     &job);
    else
        parallel_for(images * job.grid.th, image_grain(&job.grid, filters) * job.grid.th,
                     output_task, &job);
}

int64_t winograd_scratch(int64_t images, int64_t channels, int64_t filters, int64_t h, int64_t w)
{
    const int64_t tiles = images * winograd_tiles(h, w);
    return WINOGRAD_POINTS * (point_stride(tiles, channels) + point_stride(tiles, filters)) +
           images * h * w * (channels > filters ? channels : filters);
}

/* The scratch's parts: v (16 x tiles x channels), m (16 x tiles x filters), t. */
static void split_scratch(float *scratch, int64_t tiles, int64_t channels, int64_t filters,
                          float **v, float **m, float **t)
{
    *v = scratch;
    *m = *v + WINOGRAD_POINTS * point_stride(tiles, channels);
    *t = *m + WINOGRAD_POINTS * point_stride(tiles, filters);
}

void winograd_conv(const float *x, int64_t images, int64_t channels, int64_t h, int64_t w,
                   const float *u, int64_t filters, const float *bias, float *scratch, float *out)
{
    const int64_t tiles = images * winograd_tiles(h, w);
    float *v, *m, *t;
    int point;
    split_scratch(scratch, tiles, channels, filters, &v, &m, &t);
    to_points(x, images, channels, h, w, 0, t, v);
    for (point = 0; point < WINOGRAD_POINTS; point++) {
        float *vp = v + point * point_stride(tiles, channels);
        float *mp = m + point * point_stride(tiles, filters);
        const float *up = u + point * channels * filters;
        if (rows_layout(w))   /* m = u^T v, filters x tiles */
            gemm(1, 0, filters, tiles, channels, 1.0f, up, filters, vp, tiles, 0.0f, mp, tiles);
        else                  /* m = v u, tiles x filters */
            gemm(0, 0, tiles, filters, channels, 1.0f, vp, channels, up, filters, 0.0f, mp,
                 filters);
    }
    transform_output(m, images, filters, h, w, bias, t, out);
}

void winograd_weight_grad(const float *x, const float *dy, int64_t images, int64_t channels,
                          int64_t filters, int64_t h, int64_t w, float *scratch, float *du,
                          int accumulate)
{
    const int64_t tiles = images * winograd_tiles(h, w);
    float *v, *m, *t;
    int point;
    split_scratch(scratch, tiles, channels, filters, &v, &m, &t);
    to_points(x, images, channels, h, w, 0, t, v);
    to_points(dy, images, filters, h, w, 1, t, m);   /* m's points: A dy A^T */
    for (point = 0; point < WINOGRAD_POINTS; point++) {   /* du, filters x channels */
        const float *mp = m + point * point_stride(tiles, filters);
        const float *vp = v + point * point_stride(tiles, channels);
        float *dup = du + point * filters * channels;
        if (rows_layout(w))   /* m v^T */
            gemm(0, 1, filters, channels, tiles, 1.0f, mp, tiles, vp, tiles,
                 accumulate ? 1.0f : 0.0f, dup, channels);
        else                  /* m^T v */
            gemm(1, 0, filters, channels, tiles, 1.0f, mp, filters, vp, channels,
                 accumulate ? 1.0f : 0.0f, dup, channels);
    }
}

/* dw's kernels of filters [f0, f1). */
CPU_CLONES static void filters_grad_range(const float *du, int64_t filters, int64_t channels,
                                                float *dw, int64_t f0, int64_t f1)
{
    const int64_t plane = filters * channels;
    float z[4][3][CHUNK], g[3][3][CHUNK];
    int64_t f, c0, c, count;
    int i, a, b;
    for (f = f0; f < f1; f++) {
        for (c0 = 0; c0 < channels; c0 += count) {
            count = channels - c0 < CHUNK ? channels - c0 : CHUNK;
            for (i = 0; i < 4; i++) {   /* Z = X G, X row i the points (i, 0..3) */
                const float *x0 = du + (int64_t)i * 4 * plane + f * channels + c0;
                for (c = 0; c < count; c++) {
                    const float p0 = x0[c], p1 = x0[plane + c], p2 = x0[2 * plane + c];
                    const float p3 = x0[3 * plane + c];
                    z[i][0][c] = p0 + 0.5f * (p1 + p2);
                    z[i][1][c] = 0.5f * (p1 - p2);
                    z[i][2][c] = 0.5f * (p1 + p2) + p3;
                }
            }
            for (b = 0; b < 3; b++) {   /* G^T Z */
                for (c = 0; c < count; c++) {
                    g[0][b][c] = z[0][b][c] + 0.5f * (z[1][b][c] + z[2][b][c]);
                    g[1][b][c] = 0.5f * (z[1][b][c] - z[2][b][c]);
                    g[2][b][c] = 0.5f * (z[1][b][c] + z[2][b][c]) + z[3][b][c];
                }
            }
            for (c = 0; c < count; c++)
                for (a = 0; a < 3; a++)
                    for (b = 0; b < 3; b++)
                        dw[(f * channels + c0 + c) * 9 + a * 3 + b] = g[a][b][c];
        }
    }
}

static void filters_grad_task(void *ctx, int64_t begin, int64_t end)
{
    const TransformJob *j = ctx;
    filters_grad_range(j->in, j->filters, j->channels, j->out, begin, end);
}

void winograd_filters_grad(const float *du, int64_t filters, int64_t channels, float *dw)
{
    TransformJob job = {0};
    job.in = du;
    job.out = dw;
    job.filters = filters;
    job.channels = channels;
    parallel_for(filters, plane_grain(WINOGRAD_POINTS * channels), filters_grad_task, &job);
}
