/*
 * state_dict.c - AcStateDict, an ordered list of (name, root tensor) pairs:
 * what ac_save_safetensors writes and ac_load_safetensors returns.
 *
 * The dict owns a copy of every name and one root reference of every tensor;
 * a scoped tensor is stored as a root copy (ac_tensor_keep), so the dict
 * outlives whatever scope it was filled in. Entries keep insertion order.
 *
 * Not here: the file format (safetensors.c).
 */
#include "internal.h"

#include <limits.h>
#include <string.h>

typedef struct {
    char *name;
    size_t name_bytes;   /* strlen(name) + 1, for root_free */
    AcTensor *tensor;    /* a root tensor; the dict holds one reference */
} StateEntry;

struct AcStateDict {
    StateEntry *entries;
    int count;
    int capacity;
};

int utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p;
        uint32_t code;
        int extra, i;
        if (c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) extra = 1;
        else if (c >= 0xE0 && c <= 0xEF) extra = 2;
        else if (c >= 0xF0 && c <= 0xF4) extra = 3;
        else return 0;
        code = c & (0x3Fu >> extra);
        if (end - p <= extra) return 0;
        for (i = 1; i <= extra; i++) {
            if ((p[i] & 0xC0) != 0x80) return 0;
            code = (code << 6) | (p[i] & 0x3F);
        }
        /* Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8. */
        if ((extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000) ||
            (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF)
            return 0;
        p += extra + 1;
    }
    return 1;
}

static int name_check(const char *op, const char *name)
{
    if (!name) return error_set(AC_ERR_ARG, "%s: name is NULL", op);
    if (!utf8_valid(name, strlen(name)))
        return error_set(AC_ERR_ARG, "%s: name is not valid UTF-8", op);
    /* safetensors keeps this key for the file's own metadata. */
    if (strcmp(name, "__metadata__") == 0)
        return error_set(AC_ERR_ARG, "%s: the name \"__metadata__\" is reserved", op);
    return AC_OK;
}

static int find_index(const AcStateDict *dict, const char *name)
{
    int i;
    for (i = 0; i < dict->count; i++)
        if (strcmp(dict->entries[i].name, name) == 0) return i;
    return -1;
}

static int grow(AcStateDict *dict)
{
    int capacity;
    StateEntry *entries;
    if (dict->count < dict->capacity) return AC_OK;
    if (dict->capacity > INT_MAX / 2)
        return error_set(AC_ERR_MEMORY, "state_dict: more than %d entries", dict->capacity);
    capacity = dict->capacity ? dict->capacity * 2 : 16;
    entries = root_alloc((size_t)capacity * sizeof *entries);
    if (!entries) return AC_ERR_MEMORY;
    if (dict->count) memcpy(entries, dict->entries, (size_t)dict->count * sizeof *entries);
    root_free(dict->entries, (size_t)dict->capacity * sizeof *entries);
    dict->entries = entries;
    dict->capacity = capacity;
    return AC_OK;
}

static char *copy_name(const char *name, size_t *bytes)
{
    size_t n = strlen(name) + 1;
    char *copy = root_alloc(n);
    if (!copy) return NULL;
    memcpy(copy, name, n);
    *bytes = n;
    return copy;
}

int state_dict_append(AcStateDict *dict, const char *name, AcTensor *tensor)
{
    StateEntry *e;
    size_t bytes = 0;
    char *copy;
    if (grow(dict)) return AC_ERR_MEMORY;
    copy = copy_name(name, &bytes);
    if (!copy) return AC_ERR_MEMORY;
    e = &dict->entries[dict->count++];
    e->name = copy;
    e->name_bytes = bytes;
    e->tensor = tensor;
    return AC_OK;
}

AcStateDict *ac_state_dict_new(void)
{
    AcStateDict *dict = root_alloc(sizeof *dict);
    if (!dict) return NULL;
    memset(dict, 0, sizeof *dict);
    return dict;
}

int ac_state_dict_set(AcStateDict *dict, const char *name, AcTensor *tensor)
{
    AcTensor *held;
    int i;
    if (!dict) return error_set(AC_ERR_ARG, "state_dict_set: dict is NULL");
    if (name_check("state_dict_set", name)) return AC_ERR_ARG;
    if (!tensor) return error_set(AC_ERR_ARG, "state_dict_set: tensor '%s' is NULL", name);
    if (tensor->scope_depth == 0) {
        held = tensor;
        ac_tensor_retain(held);
    } else {
        held = ac_tensor_keep(tensor);
        if (!held) return ac_last_error_code();
    }
    i = find_index(dict, name);
    if (i >= 0) {
        ac_tensor_free(dict->entries[i].tensor);
        dict->entries[i].tensor = held;
        return AC_OK;
    }
    if (state_dict_append(dict, name, held)) {
        ac_tensor_free(held);
        return AC_ERR_MEMORY;
    }
    return AC_OK;
}

int ac_state_dict_size(const AcStateDict *dict)
{
    if (!dict) return error_set(AC_ERR_ARG, "state_dict_size: dict is NULL");
    return dict->count;
}

static const StateEntry *entry_at(const char *op, const AcStateDict *dict, int index)
{
    if (!dict) return error_null(AC_ERR_ARG, "%s: dict is NULL", op);
    if (index < 0 || index >= dict->count)
        return error_null(AC_ERR_INDEX, "%s: index %d is out of range [0, %d)", op, index,
                          dict->count);
    return &dict->entries[index];
}

const char *ac_state_dict_name(const AcStateDict *dict, int index)
{
    const StateEntry *e = entry_at("state_dict_name", dict, index);
    return e ? e->name : NULL;
}

AcTensor *ac_state_dict_tensor(const AcStateDict *dict, int index)
{
    const StateEntry *e = entry_at("state_dict_tensor", dict, index);
    return e ? e->tensor : NULL;
}

AcTensor *ac_state_dict_get(const AcStateDict *dict, const char *name)
{
    int i;
    if (!dict) return error_null(AC_ERR_ARG, "state_dict_get: dict is NULL");
    if (!name) return error_null(AC_ERR_ARG, "state_dict_get: name is NULL");
    i = find_index(dict, name);
    if (i < 0) return error_null(AC_ERR_INDEX, "state_dict_get: no tensor named '%s'", name);
    return dict->entries[i].tensor;
}

int ac_state_dict_free(AcStateDict *dict)
{
    int i;
    if (!dict) return AC_OK;
    for (i = 0; i < dict->count; i++) {
        ac_tensor_free(dict->entries[i].tensor);
        root_free(dict->entries[i].name, dict->entries[i].name_bytes);
    }
    root_free(dict->entries, (size_t)dict->capacity * sizeof *dict->entries);
    root_free(dict, sizeof *dict);
    return AC_OK;
}
