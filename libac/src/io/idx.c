/*
 * idx.c - ac_read_idx: the IDX files MNIST and Fashion-MNIST come in, read
 * into a float tensor so that a C program can train on them.
 *
 * An IDX file is a big-endian header, then the values in row-major order:
 *   bytes 0-1: zero; byte 2: value type (0x08 = unsigned byte); byte 3: ndim;
 *   then ndim uint32 dimensions; then the data.
 * Only unsigned bytes are read (that is what the image and label files hold),
 * and only uncompressed files: gzip belongs to the Python side. The header is
 * checked against the file's size before anything is allocated, so a corrupt
 * or hostile header cannot make us allocate more than the file could hold.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define IDX_TYPE_UBYTE 0x08

/* Read exactly n bytes, or say why not: AC_ERR_IO for a failing read,
   AC_ERR_FORMAT when the file simply ends early (what names the part). */
static int read_exact(FILE *f, unsigned char *buf, size_t n, const char *path, const char *what)
{
    if (fread(buf, 1, n, f) == n) return AC_OK;
    if (ferror(f))
        return error_set(AC_ERR_IO, "read_idx: cannot read '%s': %s", path, strerror(errno));
    return error_set(AC_ERR_FORMAT, "read_idx: '%s' ends inside its %s", path, what);
}

static int64_t file_size(FILE *f, const char *path)
{
    long size;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        error_set(AC_ERR_IO, "read_idx: cannot find the size of '%s': %s", path, strerror(errno));
        return -1;
    }
    return (int64_t)size;
}

/* Parse the header; fill shape/ndim and the number of values it announces,
   checked against payload, the bytes the file holds after the header. */
static int read_header(FILE *f, const char *path, int64_t size, int64_t *shape, int *ndim)
{
    unsigned char magic[4], dims[4 * AC_MAX_DIMS];
    int64_t payload, count = 1;
    int i, has_zero = 0;
    if (size < 4)
        return error_set(AC_ERR_FORMAT, "read_idx: '%s' has %lld bytes, too few for an IDX header",
                         path, (long long)size);
    if (read_exact(f, magic, 4, path, "header")) return -1;
    if (magic[0] != 0 || magic[1] != 0)
        return error_set(AC_ERR_FORMAT,
                         "read_idx: '%s' is not an IDX file (magic 0x%02x%02x%02x%02x)", path,
                         magic[0], magic[1], magic[2], magic[3]);
    if (magic[2] != IDX_TYPE_UBYTE)
        return error_set(AC_ERR_FORMAT,
                         "read_idx: '%s' holds IDX type 0x%02x; only unsigned bytes (0x08) are supported",
                         path, magic[2]);
    *ndim = magic[3];
    if (*ndim > AC_MAX_DIMS)
        return error_set(AC_ERR_FORMAT, "read_idx: '%s' has %d dimensions, more than %d", path,
                         *ndim, AC_MAX_DIMS);
    if (read_exact(f, dims, 4 * (size_t)*ndim, path, "dimensions")) return -1;
    for (i = 0; i < *ndim; i++) {
        const unsigned char *d = dims + 4 * i;
        shape[i] = ((int64_t)d[0] << 24) | ((int64_t)d[1] << 16) | ((int64_t)d[2] << 8) | d[3];
        if (shape[i] == 0) has_zero = 1;
    }
    payload = size - 4 - 4 * (int64_t)*ndim;
    /* Multiply step by step, stopping as soon as the count exceeds what the
       file holds: dimensions of up to 2^32 - 1 each would overflow int64. */
    for (i = 0; i < *ndim && !has_zero; i++) {
        if (count > payload / shape[i])
            return error_set(AC_ERR_FORMAT,
                             "read_idx: '%s' is truncated: shape %s needs more than the %lld data bytes it has",
                             path, shape_str(shape, *ndim), (long long)payload);
        count *= shape[i];
    }
    if (has_zero) count = 0;
    if (count < payload)
        return error_set(AC_ERR_FORMAT,
                         "read_idx: '%s' has %lld bytes after the %lld values of shape %s", path,
                         (long long)(payload - count), (long long)count, shape_str(shape, *ndim));
    if (count > payload)
        return error_set(AC_ERR_FORMAT,
                         "read_idx: '%s' is truncated: shape %s needs %lld data bytes, it has %lld",
                         path, shape_str(shape, *ndim), (long long)count, (long long)payload);
    return AC_OK;
}

/* Convert the values to floats, a chunk at a time through a small buffer. */
static int read_values(FILE *f, const char *path, AcTensor *t)
{
    unsigned char chunk[1 << 14];
    int64_t done = 0;
    while (done < t->size) {
        size_t n = (size_t)(t->size - done < (int64_t)sizeof chunk ? t->size - done
                                                                     : (int64_t)sizeof chunk);
        size_t i;
        if (read_exact(f, chunk, n, path, "data")) return -1;
        for (i = 0; i < n; i++) t->data[done + (int64_t)i] = (float)chunk[i];
        done += (int64_t)n;
    }
    return AC_OK;
}

AcTensor *ac_read_idx(const char *path)
{
    int64_t shape[AC_MAX_DIMS], size;
    int ndim = 0;
    AcTensor *t = NULL;
    FILE *f;
    if (!path) return error_null(AC_ERR_ARG, "read_idx: path is NULL");
    f = fopen(path, "rb");
    if (!f) return error_null(AC_ERR_IO, "read_idx: cannot open '%s': %s", path, strerror(errno));
    size = file_size(f, path);
    if (size >= 0 && read_header(f, path, size, shape, &ndim) == AC_OK) {
        t = tensor_alloc("read_idx", shape, ndim);
        if (t && read_values(f, path, t)) {
            ac_tensor_free(t);   /* a scoped tensor stays in the arena until its scope ends */
            t = NULL;
        }
    }
    fclose(f);
    return t;
}
