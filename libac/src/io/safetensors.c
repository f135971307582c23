/*
 * safetensors.c - reading and writing the safetensors format: an 8-byte
 * little-endian header length N, N bytes of JSON naming each tensor's dtype,
 * shape and data_offsets in the data region, then the raw data.
 *
 * The writer builds the header, writes everything to a temporary file next to
 * the target, syncs it and renames it over the target, so a crash leaves the
 * old file or the new one, never half of one.
 *
 * The reader trusts nothing in the file. Its JSON parser knows the one shape a
 * safetensors header has (an object of tensor records plus an optional
 * "__metadata__" map of strings), decodes strings in place, and checks every
 * index against the header's length. Before any tensor is made, the records
 * must tile the data region exactly: no gaps, no overlaps, nothing past its
 * end. F32, I64, BOOL, U8 and I8 are read and written (aicraft's float32, int64,
 * bool, uint8 and int8). Bytes are (de)coded as little-endian explicitly, so the code is
 * right on big-endian hosts too.
 *
 * Not here: the AcStateDict container (state_dict.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_MAX_BYTES 100000000u   /* the reference implementation's limit */
#define ELEM_CHUNK 1024               /* elements encoded per fwrite */

/* safetensors' names of AcDtype's values, in its order. */
static const char *const FILE_DTYPES[] = {"F32", "I64", "BOOL", "U8", "I8"};
#define N_FILE_DTYPES (int)(sizeof FILE_DTYPES / sizeof FILE_DTYPES[0])

/* A bigger root block holding the first `used` bytes of old, which is freed.
   NULL (and old untouched) on failure. */
static void *root_grow(void *old, size_t used, size_t old_bytes, size_t new_bytes)
{
    void *grown = root_alloc(new_bytes);
    if (!grown) return NULL;
    if (used) memcpy(grown, old, used);
    root_free(old, old_bytes);
    return grown;
}

static int io_error(const char *what, const char *path, int errnum)
{
    char reason[128];
    if (errnum == 0) errnum = EIO;   /* a short fwrite need not set errno */
    if (strerror_r(errnum, reason, sizeof reason) != 0)
        snprintf(reason, sizeof reason, "error %d", errnum);
    return error_set(AC_ERR_IO, "%s '%s': %s", what, path, reason);
}

/* ---- writing ------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} Text;

/* Readers refuse headers past HEADER_MAX_BYTES (a multiple of 8, so padding
   never pushes a header that fits over it): so does the writer. */
static int text_put(Text *t, const char *s, size_t n)
{
    if (n > HEADER_MAX_BYTES - t->len)
        return error_set(AC_ERR_ARG, "save_safetensors: the header would be more than %u bytes",
                         HEADER_MAX_BYTES);
    if (n > t->cap - t->len) {
        size_t cap = t->cap ? t->cap : 256;
        char *grown;
        while (cap - t->len < n) cap *= 2;
        grown = root_grow(t->data, t->len, t->cap, cap);
        if (!grown) return AC_ERR_MEMORY;
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    return AC_OK;
}

static int text_put_str(Text *t, const char *s) { return text_put(t, s, strlen(s)); }

static int text_put_int(Text *t, long long v)
{
    char digits[32];
    return text_put(t, digits, (size_t)snprintf(digits, sizeof digits, "%lld", v));
}

/* s as a JSON string: quotes, backslashes and control characters escaped;
   other bytes (valid UTF-8, checked when the name was set) pass through. */
static int text_put_json_string(Text *t, const char *s)
{
    int rc = text_put(t, "\"", 1);
    while (rc == AC_OK && *s) {
        size_t plain = 0;
        char escaped[8];
        unsigned char c;
        while (s[plain] && s[plain] != '"' && s[plain] != '\\' && (unsigned char)s[plain] >= 0x20)
            plain++;
        rc = text_put(t, s, plain);
        s += plain;
        c = (unsigned char)*s;
        if (rc || !c) break;
        if (c == '"' || c == '\\') snprintf(escaped, sizeof escaped, "\\%c", c);
        else snprintf(escaped, sizeof escaped, "\\u%04x", c);
        rc = text_put(t, escaped, strlen(escaped));
        s++;
    }
    return rc ? rc : text_put(t, "\"", 1);
}

/* The JSON header, tensors in the dict's order, padded with spaces so the data
   starts 8-byte aligned. */
static int build_header(const AcStateDict *dict, Text *t)
{
    int n = ac_state_dict_size(dict), i, d, rc;
    long long offset = 0;
    rc = text_put_str(t, "{");
    for (i = 0; i < n && rc == AC_OK; i++) {
        const AcTensor *tensor = ac_state_dict_tensor(dict, i);
        long long bytes = (long long)tensor->size * (long long)elem_size(tensor);
        if (i) rc = text_put_str(t, ",");
        if (!rc) rc = text_put_json_string(t, ac_state_dict_name(dict, i));
        if (!rc) rc = text_put_str(t, ":{\"dtype\":\"");
        if (!rc) rc = text_put_str(t, FILE_DTYPES[tensor->dtype]);
        if (!rc) rc = text_put_str(t, "\",\"shape\":[");
        for (d = 0; d < tensor->ndim && rc == AC_OK; d++) {
            if (d) rc = text_put_str(t, ",");
            if (!rc) rc = text_put_int(t, (long long)tensor->shape[d]);
        }
        if (!rc) rc = text_put_str(t, "],\"data_offsets\":[");
        if (!rc) rc = text_put_int(t, offset);
        if (!rc) rc = text_put_str(t, ",");
        if (!rc) rc = text_put_int(t, offset + bytes);
        if (!rc) rc = text_put_str(t, "]}");
        offset += bytes;
    }
    if (!rc) rc = text_put_str(t, "}");
    while (rc == AC_OK && t->len % 8 != 0) rc = text_put_str(t, " ");
    return rc;
}

/* n elements of esize bytes (1, 4 or 8), as little-endian bytes. */
static int write_le(FILE *f, const void *data, int64_t n, size_t esize)
{
    unsigned char chunk[8 * ELEM_CHUNK];
    const unsigned char *bytes = data;
    int64_t start = 0;
    while (start < n) {
        int64_t count = n - start < ELEM_CHUNK ? n - start : ELEM_CHUNK, i;
        size_t k;
        for (i = 0; i < count; i++) {
            uint64_t bits = 0;
            uint32_t bits32;
            if (esize == 8) {
                memcpy(&bits, bytes + (start + i) * 8, 8);
            } else if (esize == 4) {
                memcpy(&bits32, bytes + (start + i) * 4, 4);
                bits = bits32;
            } else {
                bits = bytes[start + i];
            }
            for (k = 0; k < esize; k++) chunk[esize * (size_t)i + k] = (unsigned char)(bits >> (8 * k));
        }
        if (fwrite(chunk, esize, (size_t)count, f) != (size_t)count) return -1;
        start += count;
    }
    return 0;
}

/* Everything, flushed to the disk; -1 with errno set on failure. */
static int write_contents(FILE *f, const AcStateDict *dict, const Text *header)
{
    unsigned char length[8];
    int n = ac_state_dict_size(dict), i;
    for (i = 0; i < 8; i++) length[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
    if (fwrite(length, 1, 8, f) != 8 || fwrite(header->data, 1, header->len, f) != header->len)
        return -1;
    for (i = 0; i < n; i++) {
        const AcTensor *t = ac_state_dict_tensor(dict, i);
        if (write_le(f, t->data, t->size, elem_size(t))) return -1;
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) return -1;
    return 0;
}

/* A new file next to path, named into tmp (tmp_bytes long). */
static FILE *open_temp(const char *path, char *tmp, size_t tmp_bytes)
{
    static unsigned counter;
    int attempt;
    for (attempt = 0; attempt < 100; attempt++) {
        unsigned serial = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        int fd;
        snprintf(tmp, tmp_bytes, "%s.tmp-%ld-%u", path, (long)getpid(), serial);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "wb");
            if (!f) {
                int saved = errno;
                close(fd);
                remove(tmp);
                errno = saved;
            }
            return f;
        }
        if (errno != EEXIST) return NULL;
    }
    return NULL;
}

static int write_file(const AcStateDict *dict, const char *path, const Text *header)
{
    size_t tmp_bytes = strlen(path) + 48;
    char *tmp = root_alloc(tmp_bytes);
    FILE *f;
    int rc = AC_OK, failed, saved;
    if (!tmp) return AC_ERR_MEMORY;
    errno = 0;
    f = open_temp(path, tmp, tmp_bytes);
    if (!f) {
        rc = io_error("save_safetensors: cannot create a file next to", path, errno);
    } else {
        errno = 0;
        failed = write_contents(f, dict, header) != 0;
        saved = errno;
        if (fclose(f) != 0 && !failed) {
            failed = 1;
            saved = errno;
        }
        if (!failed && rename(tmp, path) != 0) {
            failed = 1;
            saved = errno;
        }
        if (failed) {
            remove(tmp);
            rc = io_error("save_safetensors: cannot write", path, saved);
        }
    }
    root_free(tmp, tmp_bytes);
    return rc;
}

int ac_save_safetensors(const AcStateDict *dict, const char *path)
{
    Text header = {NULL, 0, 0};
    int rc, i;
    if (!dict) return error_set(AC_ERR_ARG, "save_safetensors: dict is NULL");
    if (!path) return error_set(AC_ERR_ARG, "save_safetensors: path is NULL");
    for (i = 0; i < ac_state_dict_size(dict); i++) {
        const AcTensor *t = ac_state_dict_tensor(dict, i);
        if (cpu_only("save_safetensors", &t, 1)) return AC_ERR_DEVICE;
    }
    rc = build_header(dict, &header);
    if (rc == AC_OK) rc = write_file(dict, path, &header);
    root_free(header.data, header.cap);
    return rc;
}

/* ---- reading: the header ------------------------------------------------- */

typedef struct {
    char *name;                      /* decoded in place inside the header text */
    int ndim;
    int64_t shape[AC_MAX_DIMS];
    int dtype;                       /* AcDtype */
    uint64_t begin, end;             /* data_offsets */
    AcTensor *tensor;
} Record;

typedef struct {
    const char *path;
    char *text;                      /* the header; one extra byte for a final NUL */
    size_t len, pos;
    Record *records;
    size_t count, capacity;
    Record **order;                  /* records sorted by name, then by data offset */
    int has_metadata;
} Header;

static int format_error(const Header *h, const char *fmt, ...)
{
    char detail[400];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    return error_set(AC_ERR_FORMAT, "load_safetensors: '%s': %s", h->path, detail);
}

static int json_error(const Header *h, const char *expected)
{
    return format_error(h, "bad JSON header at byte %zu: expected %s", h->pos, expected);
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static void skip_space(Header *h)
{
    while (h->pos < h->len) {
        char c = h->text[h->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        h->pos++;
    }
}

/* Consume c if it comes next, after any space. */
static int accept(Header *h, char c)
{
    skip_space(h);
    if (h->pos < h->len && h->text[h->pos] == c) {
        h->pos++;
        return 1;
    }
    return 0;
}

static int expect(Header *h, char c, const char *what)
{
    return accept(h, c) ? AC_OK : json_error(h, what);
}

static int hex4(const char *s, uint32_t *out)
{
    int i;
    *out = 0;
    for (i = 0; i < 4; i++) {
        char c = s[i];
        int v = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (v < 0) return 0;
        *out = (*out << 4) | (uint32_t)v;
    }
    return 1;
}

static size_t utf8_encode(uint32_t code, char *out)
{
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (code >> 18));
    out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

/* The \uXXXX escape (or surrogate pair) at text[*r], after its backslash and u. */
static int unicode_escape(Header *h, size_t *r, uint32_t *code)
{
    uint32_t low;
    if (h->len - *r < 4 || !hex4(h->text + *r, code)) return json_error(h, "4 hex digits after \\u");
    *r += 4;
    if (*code >= 0xDC00 && *code <= 0xDFFF) return json_error(h, "a high surrogate before a low one");
    if (*code >= 0xD800 && *code <= 0xDBFF) {
        if (h->len - *r < 6 || h->text[*r] != '\\' || h->text[*r + 1] != 'u' ||
            !hex4(h->text + *r + 2, &low) || low < 0xDC00 || low > 0xDFFF)
            return json_error(h, "a low surrogate after a high one");
        *code = 0x10000 + ((*code - 0xD800) << 10) + (low - 0xDC00);
        *r += 6;
    }
    if (*code == 0) return json_error(h, "no \\u0000 in a string");
    return AC_OK;
}

/* A JSON string, decoded in place (its UTF-8 never outgrows its escapes) and
   NUL-terminated where its closing quote was at the latest. */
static int parse_string(Header *h, char **out)
{
    char *text = h->text;
    size_t r, w, start;
    skip_space(h);
    if (h->pos >= h->len || text[h->pos] != '"') return json_error(h, "a string");
    start = r = w = h->pos + 1;
    for (;;) {
        unsigned char c;
        uint32_t code = 0;
        h->pos = r;
        if (r >= h->len) return json_error(h, "a closing '\"'");
        c = (unsigned char)text[r];
        if (c == '"') break;
        if (c < 0x20) return json_error(h, "no control characters in a string");
        if (c != '\\') {
            text[w++] = (char)c;
            r++;
            continue;
        }
        if (r + 1 >= h->len) return json_error(h, "an escape after '\\'");
        c = (unsigned char)text[r + 1];
        r += 2;
        switch (c) {
        case '"': case '\\': case '/': text[w++] = (char)c; break;
        case 'b': text[w++] = '\b'; break;
        case 'f': text[w++] = '\f'; break;
        case 'n': text[w++] = '\n'; break;
        case 'r': text[w++] = '\r'; break;
        case 't': text[w++] = '\t'; break;
        case 'u':
            if (unicode_escape(h, &r, &code)) return AC_ERR_FORMAT;
            w += utf8_encode(code, text + w);
            break;
        default: return json_error(h, "an escape among \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
        }
    }
    text[w] = '\0';
    h->pos = r + 1;
    if (!utf8_valid(text + start, w - start))
        return format_error(h, "the string ending at header byte %zu is not valid UTF-8", r);
    *out = text + start;
    return AC_OK;
}

static int parse_count(Header *h, const char *name, const char *field, uint64_t *out)
{
    uint64_t v = 0;
    skip_space(h);
    if (h->pos < h->len && h->text[h->pos] == '-')
        return format_error(h, "tensor '%s': %s holds a negative number", name, field);
    if (h->pos >= h->len || !is_digit(h->text[h->pos])) return json_error(h, "a number");
    if (h->text[h->pos] == '0' && h->pos + 1 < h->len && is_digit(h->text[h->pos + 1]))
        return json_error(h, "a number without leading zeros");
    while (h->pos < h->len && is_digit(h->text[h->pos])) {
        unsigned digit = (unsigned)(h->text[h->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - digit) / 10)
            return format_error(h, "tensor '%s': %s holds a number past 2^63 - 1", name, field);
        v = v * 10 + digit;
        h->pos++;
    }
    if (h->pos < h->len && (h->text[h->pos] == '.' || h->text[h->pos] == 'e' || h->text[h->pos] == 'E'))
        return format_error(h, "tensor '%s': %s holds a number that is not a whole one", name, field);
    *out = v;
    return AC_OK;
}

/* A JSON array of at most max non-negative integers. */
static int parse_counts(Header *h, const char *name, const char *field, uint64_t *values, int max,
                        int *count)
{
    *count = 0;
    if (expect(h, '[', "'['")) return AC_ERR_FORMAT;
    if (accept(h, ']')) return AC_OK;
    for (;;) {
        if (*count == max)
            return format_error(h, "tensor '%s': %s has more than %d entries", name, field, max);
        if (parse_count(h, name, field, &values[(*count)++])) return AC_ERR_FORMAT;
        if (accept(h, ']')) return AC_OK;
        if (expect(h, ',', "',' or ']'")) return AC_ERR_FORMAT;
    }
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, in any order. */
static int parse_record(Header *h, Record *rec)
{
    int seen_dtype = 0, seen_shape = 0, seen_offsets = 0, n, d;
    uint64_t values[AC_MAX_DIMS];
    char *field, *dtype;
    if (expect(h, '{', "'{' opening a tensor's record")) return AC_ERR_FORMAT;
    if (!accept(h, '}')) {
        for (;;) {
            if (parse_string(h, &field) || expect(h, ':', "':'")) return AC_ERR_FORMAT;
            if (strcmp(field, "dtype") == 0 && !seen_dtype) {
                seen_dtype = 1;
                if (parse_string(h, &dtype)) return AC_ERR_FORMAT;
                for (rec->dtype = 0; rec->dtype < N_FILE_DTYPES; rec->dtype++)
                    if (strcmp(dtype, FILE_DTYPES[rec->dtype]) == 0) break;
                if (rec->dtype == N_FILE_DTYPES)
                    return format_error(h, "tensor '%s' has dtype %s; only F32, I64, BOOL, U8 and I8 "
                                        "are supported", rec->name, dtype);
            } else if (strcmp(field, "shape") == 0 && !seen_shape) {
                seen_shape = 1;
                if (parse_counts(h, rec->name, "shape", values, AC_MAX_DIMS, &rec->ndim))
                    return AC_ERR_FORMAT;
                for (d = 0; d < rec->ndim; d++) rec->shape[d] = (int64_t)values[d];
            } else if (strcmp(field, "data_offsets") == 0 && !seen_offsets) {
                seen_offsets = 1;
                if (parse_counts(h, rec->name, "data_offsets", values, 2, &n)) return AC_ERR_FORMAT;
                if (n != 2)
                    return format_error(h, "tensor '%s': data_offsets has %d entries, not 2",
                                        rec->name, n);
                rec->begin = values[0];
                rec->end = values[1];
            } else if (strcmp(field, "dtype") == 0 || strcmp(field, "shape") == 0 ||
                       strcmp(field, "data_offsets") == 0) {
                return format_error(h, "tensor '%s' has %s twice", rec->name, field);
            } else {
                return format_error(h, "tensor '%s' has an unknown field '%s'", rec->name, field);
            }
            if (accept(h, '}')) break;
            if (expect(h, ',', "',' or '}'")) return AC_ERR_FORMAT;
        }
    }
    if (!seen_dtype || !seen_shape || !seen_offsets)
        return format_error(h, "tensor '%s' has no %s", rec->name,
                            !seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets");
    return AC_OK;
}

/* "__metadata__": an object of strings, checked and dropped. */
static int parse_metadata(Header *h)
{
    char *key, *value;
    if (h->has_metadata) return format_error(h, "__metadata__ appears twice");
    h->has_metadata = 1;
    if (expect(h, '{', "'{' opening __metadata__")) return AC_ERR_FORMAT;
    if (accept(h, '}')) return AC_OK;
    for (;;) {
        if (parse_string(h, &key) || expect(h, ':', "':'")) return AC_ERR_FORMAT;
        skip_space(h);
        if (h->pos >= h->len || h->text[h->pos] != '"')
            return format_error(h, "__metadata__ entry '%s' is not a string", key);
        if (parse_string(h, &value)) return AC_ERR_FORMAT;
        if (accept(h, '}')) return AC_OK;
        if (expect(h, ',', "',' or '}'")) return AC_ERR_FORMAT;
    }
}

static Record *new_record(Header *h)
{
    Record *rec;
    if (h->count == h->capacity) {
        size_t capacity = h->capacity ? h->capacity * 2 : 16;
        Record *grown = root_grow(h->records, h->count * sizeof *grown,
                                  h->capacity * sizeof *grown, capacity * sizeof *grown);
        if (!grown) return NULL;
        h->records = grown;
        h->capacity = capacity;
    }
    rec = &h->records[h->count++];
    memset(rec, 0, sizeof *rec);
    return rec;
}

static int parse_header(Header *h)
{
    char *key;
    Record *rec;
    if (expect(h, '{', "'{' opening the header")) return AC_ERR_FORMAT;
    if (!accept(h, '}')) {
        for (;;) {
            if (parse_string(h, &key) || expect(h, ':', "':'")) return AC_ERR_FORMAT;
            if (strcmp(key, "__metadata__") == 0) {
                if (parse_metadata(h)) return AC_ERR_FORMAT;
            } else {
                if (!(rec = new_record(h))) return AC_ERR_MEMORY;
                rec->name = key;
                if (parse_record(h, rec)) return AC_ERR_FORMAT;
            }
            if (accept(h, '}')) break;
            if (expect(h, ',', "',' or '}'")) return AC_ERR_FORMAT;
        }
    }
    skip_space(h);
    if (h->pos != h->len) return json_error(h, "only spaces after the header's closing '}'");
    return AC_OK;
}

/* ---- reading: the layout of the data ------------------------------------- */

static int by_name(const void *a, const void *b)
{
    return strcmp((*(Record *const *)a)->name, (*(Record *const *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
    const Record *x = *(Record *const *)a, *y = *(Record *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int check_record(const Header *h, const Record *rec, uint64_t data_bytes)
{
    int64_t count = 1, nonzero = 1;   /* the dims other than 0 must fit too: (0, 2^40, 2^40) */
    int d;
    for (d = 0; d < rec->ndim; d++) {
        if (rec->shape[d] > 0 && nonzero > (INT64_MAX / 8) / rec->shape[d])
            return format_error(h, "tensor '%s': shape %s has too many elements", rec->name,
                                shape_str(rec->shape, rec->ndim));
        if (rec->shape[d] > 0) nonzero *= rec->shape[d];
        count *= rec->shape[d];
    }
    if (rec->end < rec->begin || rec->end > data_bytes)
        return format_error(h, "tensor '%s': data_offsets [%llu, %llu] are not a range inside "
                            "the data region of %llu bytes", rec->name,
                            (unsigned long long)rec->begin, (unsigned long long)rec->end,
                            (unsigned long long)data_bytes);
    if (rec->end - rec->begin != (uint64_t)count * (uint64_t)ac_dtype_size(rec->dtype))
        return format_error(h, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but "
                            "%s shape %s needs %llu", rec->name,
                            (unsigned long long)rec->begin, (unsigned long long)rec->end,
                            (unsigned long long)(rec->end - rec->begin), FILE_DTYPES[rec->dtype],
                            shape_str(rec->shape, rec->ndim),
                            (unsigned long long)count * (unsigned long long)ac_dtype_size(rec->dtype));
    return AC_OK;
}

/* Each record fits its shape, names are unique, and the records' data ranges
   tile [0, data_bytes) exactly. Leaves h->order sorted by offset. */
static int check_layout(Header *h, uint64_t data_bytes)
{
    uint64_t covered = 0;
    size_t i, bytes = h->count * sizeof *h->order;
    for (i = 0; i < h->count; i++)
        if (check_record(h, &h->records[i], data_bytes)) return AC_ERR_FORMAT;
    if (h->count == 0) return data_bytes == 0 ? AC_OK
        : format_error(h, "the data region holds %llu bytes but no tensors",
                       (unsigned long long)data_bytes);
    h->order = root_alloc(bytes);
    if (!h->order) return AC_ERR_MEMORY;
    for (i = 0; i < h->count; i++) h->order[i] = &h->records[i];
    qsort(h->order, h->count, sizeof *h->order, by_name);
    for (i = 1; i < h->count; i++)
        if (strcmp(h->order[i - 1]->name, h->order[i]->name) == 0)
            return format_error(h, "tensor '%s' appears twice", h->order[i]->name);
    qsort(h->order, h->count, sizeof *h->order, by_offset);
    for (i = 0; i < h->count; i++) {
        const Record *rec = h->order[i];
        if (rec->begin < covered)
            return format_error(h, "the data of tensor '%s' overlaps that of tensor '%s'",
                                rec->name, h->order[i - 1]->name);
        if (rec->begin > covered)
            return format_error(h, "bytes %llu to %llu of the data region, before tensor '%s', "
                                "belong to no tensor", (unsigned long long)covered,
                                (unsigned long long)rec->begin, rec->name);
        covered = rec->end;
    }
    if (covered != data_bytes)
        return format_error(h, "bytes %llu to %llu at the end of the data region belong to no tensor",
                            (unsigned long long)covered, (unsigned long long)data_bytes);
    return AC_OK;
}

/* ---- reading: the file --------------------------------------------------- */

static int read_exact(Header *h, FILE *f, void *buf, size_t n)
{
    if (n == 0 || fread(buf, 1, n, f) == n) return AC_OK;
    if (ferror(f)) return io_error("load_safetensors: cannot read", h->path, errno);
    return format_error(h, "the file ends early (it changed while being read?)");
}

/* t's elements, read as little-endian bytes, in the host's order; a bool byte
   that is not 0 or 1 is a format error. */
static int from_le(const Header *h, const char *name, AcTensor *t)
{
    unsigned char *bytes = (unsigned char *)t->data;
    size_t esize = elem_size(t), k;
    int64_t i;
    if (t->dtype == AC_BOOL) {
        for (i = 0; i < t->size; i++)
            if (bytes[i] > 1)
                return format_error(h, "tensor '%s': BOOL element %lld is %u, not 0 or 1", name,
                                    (long long)i, bytes[i]);
        return AC_OK;
    }
    if (esize == 1) return AC_OK;   /* U8, I8: bytes are bytes */
    for (i = 0; i < t->size; i++) {
        unsigned char *b = bytes + esize * (size_t)i;
        uint64_t bits = 0;
        uint32_t bits32;
        for (k = 0; k < esize; k++) bits |= (uint64_t)b[k] << (8 * k);
        if (esize == 8) {
            memcpy(b, &bits, 8);
        } else {
            bits32 = (uint32_t)bits;
            memcpy(b, &bits32, 4);
        }
    }
    return AC_OK;
}

/* Make the tensors (at root), fill them in file order, and hand them to a new
   dict in header order. */
static int read_tensors(Header *h, FILE *f, AcStateDict **out)
{
    AcStateDict *dict;
    size_t i;
    for (i = 0; i < h->count; i++) {
        Record *rec = &h->records[i];
        rec->tensor = tensor_create("load_safetensors", rec->shape, rec->ndim, rec->dtype, NULL, 0, 1);
        if (!rec->tensor) return ac_last_error_code();
    }
    for (i = 0; i < h->count; i++) {
        AcTensor *t = h->order[i]->tensor;
        int rc = read_exact(h, f, t->data, (size_t)t->size * elem_size(t));
        if (!rc) rc = from_le(h, h->order[i]->name, t);
        if (rc) return rc;
    }
    dict = ac_state_dict_new();
    if (!dict) return AC_ERR_MEMORY;
    for (i = 0; i < h->count; i++) {
        Record *rec = &h->records[i];
        if (state_dict_append(dict, rec->name, rec->tensor)) {
            ac_state_dict_free(dict);
            return AC_ERR_MEMORY;
        }
        rec->tensor = NULL;   /* the dict owns it now */
    }
    *out = dict;
    return AC_OK;
}

static int load_file(Header *h, FILE *f, AcStateDict **out)
{
    struct stat st;
    unsigned char length[8];
    uint64_t header_len = 0, file_bytes;
    int i, rc;
    if (fstat(fileno(f), &st) != 0) return io_error("load_safetensors: cannot read", h->path, errno);
    if (!S_ISREG(st.st_mode))
        return error_set(AC_ERR_IO, "load_safetensors: '%s' is not a regular file", h->path);
    file_bytes = (uint64_t)st.st_size;
    if (file_bytes < 8)
        return format_error(h, "the file has %llu bytes, fewer than the 8 of the header length",
                            (unsigned long long)file_bytes);
    if ((rc = read_exact(h, f, length, 8))) return rc;
    for (i = 0; i < 8; i++) header_len |= (uint64_t)length[i] << (8 * i);
    if (header_len > HEADER_MAX_BYTES)
        return format_error(h, "the header length %llu is more than the limit of %u bytes",
                            (unsigned long long)header_len, HEADER_MAX_BYTES);
    if (header_len > file_bytes - 8)
        return format_error(h, "the header length %llu runs past the end of the file (%llu bytes)",
                            (unsigned long long)header_len, (unsigned long long)file_bytes);
    h->len = (size_t)header_len;
    h->text = root_alloc(h->len + 1);
    if (!h->text) return AC_ERR_MEMORY;
    if ((rc = read_exact(h, f, h->text, h->len))) return rc;
    h->text[h->len] = '\0';
    if ((rc = parse_header(h)) || (rc = check_layout(h, file_bytes - 8 - header_len))) return rc;
    return read_tensors(h, f, out);
}

AcStateDict *ac_load_safetensors(const char *path)
{
    Header h;
    AcStateDict *dict;
    FILE *f;
    size_t i;
    if (!path) return error_null(AC_ERR_ARG, "load_safetensors: path is NULL");
    f = fopen(path, "rb");
    if (!f) {
        io_error("load_safetensors: cannot open", path, errno);
        return NULL;
    }
    memset(&h, 0, sizeof h);
    h.path = path;
    dict = NULL;
    load_file(&h, f, &dict);
    fclose(f);
    for (i = 0; i < h.count; i++) ac_tensor_free(h.records[i].tensor);
    root_free(h.order, h.count * sizeof *h.order);
    root_free(h.records, h.capacity * sizeof *h.records);
    root_free(h.text, h.len + 1);
    return dict;
}
