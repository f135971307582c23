/*
 * shared_mem.c - tensors whose data lives in POSIX shared memory, so several
 * processes read and write one copy (Hogwild training: Module.share_memory(),
 * then processes that each update the same parameters).
 *
 * Each shared object is one mapping: a 64-byte header (magic, the object's
 * size, the creating process, its name), then the data, 64-byte aligned. The
 * mapping is MAP_SHARED, made here with mmap, outside the arena, and a tensor
 * over it is an external tensor (ac_tensor_from_external) whose release unmaps
 * it when the last reference goes; the creating process also unlinks the name
 * then. A process that opens the name (a spawned child rebuilding a pickled
 * tensor) maps it again; a forked child inherits the mapping itself. Both see
 * every write. This process's mappings are kept in a short list, under a
 * mutex, so ac_tensor_shared_name can tell whether a tensor's data is in one.
 *
 * Names are "/aicraft-<pid>-<counter>-<random>"; a process killed before its
 * tensors are freed leaves its objects in /dev/shm.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS */

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x6163736865646d31ull   /* "acshedm1" */
#define DATA_OFFSET 128                   /* the header, padded; data 64-byte aligned after it */

typedef struct {
    uint64_t magic;
    uint64_t bytes;          /* data bytes after the header */
    int64_t owner;           /* the pid that created (and unlinks) it */
    char name[AC_SHARED_NAME_MAX];
} ShmHeader;

typedef struct Mapping {
    unsigned char *base;     /* the header; data at base + SHM_HEADER */
    size_t length;           /* of the whole mapping */
    struct Mapping *next;
} Mapping;

/* This process's live mappings (each record in a private page of its own: the
   header is shared with other processes, so it cannot hold this process's list). */
static Mapping *mappings;
static pthread_mutex_t mappings_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long serial;

typedef char header_fits[(sizeof(ShmHeader) <= DATA_OFFSET) ? 1 : -1];

static void shm_release(void *ctx)
{
    unsigned char *base = ctx;
    const ShmHeader *h = (const ShmHeader *)(void *)base;
    Mapping **at, *record = NULL;
    pthread_mutex_lock(&mappings_lock);
    for (at = &mappings; *at; at = &(*at)->next)
        if ((*at)->base == base) {
            record = *at;
            *at = record->next;
            break;
        }
    pthread_mutex_unlock(&mappings_lock);
    if (h->owner == (int64_t)getpid()) shm_unlink(h->name);
    if (record) {
        munmap(base, record->length);
        munmap(record, sizeof *record);
    }
}

/* Record base in this process's list. */
static int remember(unsigned char *base, size_t length)
{
    Mapping *m = mmap(NULL, sizeof(Mapping), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return error_set(AC_ERR_MEMORY, "share_memory: no memory for a mapping's record");
    m->base = base;
    m->length = length;
    pthread_mutex_lock(&mappings_lock);
    m->next = mappings;
    mappings = m;
    pthread_mutex_unlock(&mappings_lock);
    return AC_OK;
}

static AcTensor *over_mapping(unsigned char *base, size_t length, const int64_t *shape, int ndim, int dtype,
                              int64_t offset)
{
    AcTensor *t;
    if (remember(base, length) < 0) {
        munmap(base, length);
        return NULL;
    }
    t = ac_tensor_from_external(base + DATA_OFFSET + offset, shape, ndim, dtype, shm_release, base);
    if (!t) {
        shm_release(base);
        return NULL;
    }
    return t;
}

AcTensor *ac_tensor_share(const AcTensor *t)
{
    const char *op = "share_memory_";
    char name[AC_SHARED_NAME_MAX];
    size_t bytes, length;
    unsigned char *base;
    ShmHeader *h;
    AcTensor *out;
    struct timespec now;
    int fd, attempt;
    if (tensor_check_any(op, t, "tensor")) return NULL;
    if (t->device != AC_CPU)
        return error_null(AC_ERR_DEVICE, "%s: only CPU tensors can be put in shared memory", op);
    bytes = (size_t)t->size * elem_size(t);
    length = DATA_OFFSET + (bytes ? bytes : 1);
    for (attempt = 0;; attempt++) {
        clock_gettime(CLOCK_REALTIME, &now);
        pthread_mutex_lock(&mappings_lock);
        serial++;
        snprintf(name, sizeof name, "/aicraft-%ld-%lu-%lx", (long)getpid(), serial,
                 (unsigned long)(now.tv_nsec ^ (long)attempt * 7919));
        pthread_mutex_unlock(&mappings_lock);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 || errno != EEXIST || attempt >= 16) break;
    }
    if (fd < 0) return error_null(AC_ERR_MEMORY, "%s: shm_open(%s) failed: %s", op, name, strerror(errno));
    if (ftruncate(fd, (off_t)length) < 0) {
        const int err = errno;
        close(fd);
        shm_unlink(name);
        return error_null(AC_ERR_MEMORY, "%s: cannot size shared memory to %zu bytes: %s", op, length, strerror(err));
    }
    base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        shm_unlink(name);
        return error_null(AC_ERR_MEMORY, "%s: mmap of %zu shared bytes failed", op, length);
    }
    h = (ShmHeader *)(void *)base;
    h->magic = SHM_MAGIC;
    h->bytes = bytes;
    h->owner = (int64_t)getpid();
    memcpy(h->name, name, sizeof name);
    if (bytes) memcpy(base + DATA_OFFSET, t->data, bytes);
    out = over_mapping(base, length, t->shape, t->ndim, t->dtype, 0);
    return out;
}

AcTensor *ac_tensor_open_shared(const char *name, int64_t offset, const int64_t *shape, int ndim, int dtype)
{
    const char *op = "open_shared";
    int64_t size = 0, elem;
    struct stat st;
    unsigned char *base;
    const ShmHeader *h;
    int fd;
    if (!name || name[0] != '/' || strlen(name) >= AC_SHARED_NAME_MAX || strchr(name + 1, '/'))
        return error_null(AC_ERR_ARG, "%s: bad shared memory name", op);
    if (shape_check(op, shape, ndim, &size)) return NULL;
    elem = ac_dtype_size(dtype);
    if (elem < 0) return error_null(AC_ERR_ARG, "%s: unknown dtype %d", op, dtype);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) return error_null(AC_ERR_ARG, "%s: cannot open shared memory %s: %s (was its tensor freed, "
                                  "or its process ended?)", op, name, strerror(errno));
    if (fstat(fd, &st) < 0 || st.st_size < DATA_OFFSET) {
        close(fd);
        return error_null(AC_ERR_FORMAT, "%s: %s is not aicraft shared memory", op, name);
    }
    base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return error_null(AC_ERR_MEMORY, "%s: mmap of %s failed", op, name);
    h = (const ShmHeader *)(void *)base;
    if (h->magic != SHM_MAGIC || h->bytes > (uint64_t)st.st_size - DATA_OFFSET || offset < 0 ||
        (uint64_t)offset > h->bytes || (uint64_t)(size * elem) > h->bytes - (uint64_t)offset ||
        offset % elem) {
        munmap(base, (size_t)st.st_size);
        return error_null(AC_ERR_FORMAT, "%s: %s does not hold %lld elements of %s at byte %lld", op, name,
                          (long long)size, ac_dtype_name(dtype), (long long)offset);
    }
    return over_mapping(base, (size_t)st.st_size, shape, ndim, dtype, offset);
}

int ac_tensor_shared_name(const AcTensor *t, char *name, size_t name_size, int64_t *offset)
{
    const Mapping *m;
    int found = 0;
    if (!t) return error_set(AC_ERR_ARG, "shared_name: tensor is NULL");
    pthread_mutex_lock(&mappings_lock);
    for (m = mappings; m; m = m->next) {
        const unsigned char *data = (const unsigned char *)t->data;
        if (data >= m->base + DATA_OFFSET && data < m->base + m->length) {
            const ShmHeader *h = (const ShmHeader *)(void *)m->base;
            if (name && name_size) {
                strncpy(name, h->name, name_size - 1);
                name[name_size - 1] = '\0';
            }
            if (offset) *offset = (int64_t)(data - (m->base + DATA_OFFSET));
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mappings_lock);
    return found;
}
