/*
 * error.c - the calling thread's last error: a code and a message.
 *
 * The library never prints or aborts; a failing call sets the error here and
 * returns NULL or a negative status. Messages start with the op's name.
 */
#include "internal.h"

#include <stdio.h>

#define ERROR_MESSAGE_CAP 512
#define SHAPE_BUFFERS 8
#define SHAPE_CAP 200

static AC_THREAD_LOCAL int last_code = AC_OK;
static AC_THREAD_LOCAL char last_message[ERROR_MESSAGE_CAP];
static AC_THREAD_LOCAL char shape_buffers[SHAPE_BUFFERS][SHAPE_CAP];
static AC_THREAD_LOCAL int shape_next;

static void error_vset(int code, const char *fmt, va_list args)
{
    last_code = code;
    vsnprintf(last_message, sizeof last_message, fmt, args);
}

int error_set(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    error_vset(code, fmt, args);
    va_end(args);
    return code;
}

void *error_null(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    error_vset(code, fmt, args);
    va_end(args);
    return NULL;
}

int ac_last_error_code(void) { return last_code; }

const char *ac_last_error(void) { return last_code == AC_OK ? "" : last_message; }

void ac_clear_error(void)
{
    last_code = AC_OK;
    last_message[0] = '\0';
}

const char *shape_str(const int64_t *shape, int ndim)
{
    char *buf = shape_buffers[shape_next];
    size_t used = 0;
    int i;
    shape_next = (shape_next + 1) % SHAPE_BUFFERS;
    if (ndim < 0 || ndim > AC_MAX_DIMS) {
        snprintf(buf, SHAPE_CAP, "(ndim %d)", ndim);
        return buf;
    }
    used += (size_t)snprintf(buf, SHAPE_CAP, "(");
    for (i = 0; i < ndim && used < SHAPE_CAP; i++)
        used += (size_t)snprintf(buf + used, SHAPE_CAP - used, "%s%lld",
                                 i ? ", " : "", (long long)shape[i]);
    if (used < SHAPE_CAP)
        snprintf(buf + used, SHAPE_CAP - used, ndim == 1 ? ",)" : ")");
    return buf;
}

const char *tensor_shape_str(const AcTensor *t)
{
    return t ? shape_str(t->shape, t->ndim) : "(null)";
}
