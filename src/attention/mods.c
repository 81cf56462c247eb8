/* Programmable attention: clattn_mods_create checks the caller's source, its defines and auxiliary
 * tensors, and compiles a probe kernel that calls each function with the declared arguments; the text it
 * keeps is what program.c puts before the kernels of a call with these mods (cl/masks.cl calls the
 * functions through CLATTN_MOD_ARGS). */
#include "mods.h"

#include "context.h"
#include "error.h"
#include "program.h"
#include "sha256.h"
#include "versioned.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUX_NAME_MAX 64

typedef struct mod_aux {
    char name[AUX_NAME_MAX];
    clattn_aux_type type;
    cl_mem buffer; /* retained */
    clattn_aux_index index;
    size_t length;
} mod_aux;

struct clattn_mods_s {
    clattn_context *ctx;
    /* Copies on other contexts (device groups' members, mods_on_context), made once each, under `lock`. */
    struct clattn_mods_s *peers, *next_peer;
    pthread_mutex_t lock;
    char *head;   /* before the kernels: which functions exist, their prototypes, CLATTN_MOD_ARGS */
    char *tail;   /* after the kernels: the defines and the caller's source (behind #line 1 "mods") */
    char id[17];  /* the first 64 bits of SHA-256(head, tail), in hex: the kernel cache's key */
    program_mods program; /* the three as program_get takes them (mods_program) */
    bool mask;    /* the source defines mask_mod */
    bool score;   /* … score_mod */
    bool grad;    /* … and score_mod_grad, its derivative (for the backward pass) */
    size_t naux;
    mod_aux aux[CLATTN_MODS_MAX_AUX];
};

/* Each auxiliary type's OpenCL C spelling and element size. */
static const struct {
    const char *cl;
    size_t size;
} aux_types[] = {
    [CLATTN_AUX_FLOAT] = {"float", 4}, [CLATTN_AUX_HALF] = {"half", 2},    [CLATTN_AUX_INT] = {"int", 4},
    [CLATTN_AUX_UINT] = {"uint", 4},   [CLATTN_AUX_LONG] = {"long", 8},    [CLATTN_AUX_ULONG] = {"ulong", 8},
    [CLATTN_AUX_SHORT] = {"short", 2}, [CLATTN_AUX_USHORT] = {"ushort", 2}, [CLATTN_AUX_CHAR] = {"char", 1},
    [CLATTN_AUX_UCHAR] = {"uchar", 1},
};
#define AUX_TYPES (sizeof aux_types / sizeof aux_types[0])

static const char *const index_names[] = {"CLATTN_AUX_BY_LENGTH", "CLATTN_AUX_BY_QUERY", "CLATTN_AUX_BY_KEY",
                                          "CLATTN_AUX_BY_POSITION", "CLATTN_AUX_BY_HEAD", "CLATTN_AUX_BY_BATCH"};
#define AUX_INDEXES (sizeof index_names / sizeof index_names[0])

/* The first `n` characters of s form a C identifier. */
static bool is_identifier(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

/* Whether `name` occurs in the source as an identifier followed by '(' outside comments: the source
 * defines (or at least names) that function. */
static bool names_function(const char *src, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = src; *p;) {
        if (p[0] == '/' && p[1] == '/') {
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 2 : p + strlen(p);
        } else if ((isalpha((unsigned char)*p) || *p == '_') && (p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'))) {
            size_t len = 1;
            while (isalnum((unsigned char)p[len]) || p[len] == '_')
                len++;
            if (len == n && strncmp(p, name, n) == 0) {
                const char *after = p + len;
                while (isspace((unsigned char)*after))
                    after++;
                if (*after == '(')
                    return true;
            }
            p += len;
        } else {
            p++;
        }
    }
    return false;
}

/* A growing string; `failed` once out of memory. */
typedef struct text_buf {
    char *data;
    size_t used, size;
    bool failed;
} text_buf;

static void text_add(text_buf *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->used + n + 1 > t->size) {
        size_t size = (t->used + n + 1) * 2;
        char *grown = realloc(t->data, size);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->data = grown, t->size = size;
    }
    memcpy(t->data + t->used, s, n);
    t->used += n;
    t->data[t->used] = '\0';
}

static void text_printf(text_buf *t, const char *fmt, ...) CLATTN_PRINTF(2, 3);
static void text_printf(text_buf *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    text_add(t, line, n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* One define, "NAME" or "NAME=VALUE" (VALUE on one line), as #define NAME VALUE. */
static clattn_status add_define(clattn_context *ctx, text_buf *t, const char *define, size_t which)
{
    if (!define)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.defines[%zu] is NULL", which);
    const size_t name_len = strcspn(define, "="), len = strlen(define);
    /* One line: a value ending in a backslash (spaces after it too, which compilers accept with a
     * warning) would splice the next line of the generated source into the macro. */
    size_t end = len;
    while (end > name_len && (define[end - 1] == ' ' || define[end - 1] == '\t'))
        end--;
    if (!is_identifier(define, name_len) || strpbrk(define, "\n\r") || (end > name_len && define[end - 1] == '\\'))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.defines[%zu] = \"%.64s\" is not NAME or NAME=VALUE (NAME a C identifier, one line, "
                         "not ending in a backslash)",
                         which, define);
    text_printf(t, "#define %.*s ", (int)name_len, define);
    if (define[name_len] == '=')
        text_add(t, define + name_len + 1, strlen(define + name_len + 1));
    text_add(t, "\n", 1);
    return CLATTN_SUCCESS;
}

/* Check one auxiliary tensor of the descriptor and keep it in *out (not yet retained). */
static clattn_status read_aux(clattn_context *ctx, const clattn_mod_aux *a, size_t which, const mod_aux *before,
                              mod_aux *out)
{
    const size_t name_len = a->name ? strlen(a->name) : 0;
    if (!a->name)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.aux[%zu].name is NULL", which);
    if (!is_identifier(a->name, name_len) || name_len >= AUX_NAME_MAX)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.aux[%zu].name \"%.64s\" is not a C identifier (of "
                         "fewer than %d characters)", which, a->name, AUX_NAME_MAX);
    for (size_t i = 0; i < which; i++)
        if (strcmp(before[i].name, a->name) == 0)
            return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.aux[%zu] and desc.aux[%zu] are both named \"%s\"",
                             i, which, a->name);
    if ((unsigned)a->type >= AUX_TYPES)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.aux[%zu] (\"%s\"): unknown type %d", which, a->name,
                         (int)a->type);
    if ((unsigned)a->index >= AUX_INDEXES)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.aux[%zu] (\"%s\"): unknown index %d", which, a->name,
                         (int)a->index);
    if ((a->index == CLATTN_AUX_BY_LENGTH) != (a->length != 0))
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.aux[%zu] (\"%s\"): length %zu; it is the bound (≥ 1) of CLATTN_AUX_BY_LENGTH and 0 "
                         "with every other index (%s)", which, a->name, a->length, index_names[a->index]);
    if (!a->buffer)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.aux[%zu].buffer (\"%s\") is NULL", which, a->name);
    cl_context owner = NULL;
    cl_int err = clGetMemObjectInfo(a->buffer, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err != CL_SUCCESS)
        return set_error(ctx, (clattn_status)err, "clGetMemObjectInfo(desc.aux[%zu].buffer) failed: %s", which,
                         clattn_status_string((clattn_status)err));
    if (owner != ctx->context)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.aux[%zu].buffer (\"%s\") belongs to another OpenCL "
                         "context than the clattn context's", which, a->name);
    snprintf(out->name, sizeof out->name, "%s", a->name);
    out->type = a->type;
    out->buffer = a->buffer;
    out->index = a->index;
    out->length = a->length;
    if (a->index == CLATTN_AUX_BY_LENGTH) {
        char what[AUX_NAME_MAX + 32];
        snprintf(what, sizeof what, "desc.aux[%zu] (\"%s\")", which, a->name);
        return check_buffer(ctx, a->buffer, a->length, aux_types[a->type].size, what);
    }
    return CLATTN_SUCCESS;
}

/* The head of every build with these mods: which functions exist, their prototypes with the declared
 * auxiliary tensors (a definition of another signature then fails to compile), and CLATTN_MOD_ARGS(t), t's
 * aux pointers cast to the declared types as the calls' trailing arguments. */
static void write_head(text_buf *t, const mod_aux *aux, size_t naux, bool score, bool mask, bool grad)
{
    text_printf(t, "#line 1 \"mods prototypes\"\n#define CLATTN_SCORE_MOD %d\n#define CLATTN_MASK_MOD %d\n"
                   "#define CLATTN_SCORE_MOD_GRAD %d\n", score, mask, grad);
    const char *const prototypes[3] = {"float score_mod(float score, int b, int h, long q, long k",
                                       "bool mask_mod(int b, int h, long q, long k",
                                       "float score_mod_grad(float score, int b, int h, long q, long k"};
    const bool present[3] = {score, mask, grad};
    for (int f = 0; f < 3; f++) {
        if (!present[f])
            continue;
        text_add(t, prototypes[f], strlen(prototypes[f]));
        for (size_t i = 0; i < naux; i++)
            text_printf(t, ", __global const %s *%s", aux_types[aux[i].type].cl, aux[i].name);
        text_add(t, ");\n", 3);
    }
    text_add(t, "#define CLATTN_MOD_ARGS(t)", strlen("#define CLATTN_MOD_ARGS(t)"));
    for (size_t i = 0; i < naux; i++)
        text_printf(t, " , (__global const %s *)(t)->aux[%zu]", aux_types[aux[i].type].cl, i);
    text_add(t, "\n", 1);
}

/* The probe: one kernel calling each function the source names with the declared arguments. */
static const char probe_kernel[] =
    "#line 1 \"mods probe\"\n"
    "typedef struct clattn_mods_probe_terms { __global const uchar *aux[4]; } clattn_mods_probe_terms;\n"
    "__kernel void clattn_mods_probe(__global float *out, __global const uchar *a0, __global const uchar *a1,\n"
    "                                __global const uchar *a2, __global const uchar *a3)\n"
    "{\n"
    "    clattn_mods_probe_terms p;\n"
    "    p.aux[0] = a0; p.aux[1] = a1; p.aux[2] = a2; p.aux[3] = a3;\n"
    "#if CLATTN_SCORE_MOD\n"
    "    out[0] = score_mod(out[0], 0, 0, 0L, 0L CLATTN_MOD_ARGS(&p));\n"
    "#endif\n"
    "#if CLATTN_MASK_MOD\n"
    "    out[1] = mask_mod(0, 0, 0L, 0L CLATTN_MOD_ARGS(&p)) ? 1.0f : 0.0f;\n"
    "#endif\n"
    "#if CLATTN_SCORE_MOD_GRAD\n"
    "    out[2] = score_mod_grad(out[2], 0, 0, 0L, 0L CLATTN_MOD_ARGS(&p));\n"
    "#endif\n"
    "}\n";

/* Compile the probe (-Werror: an argument of the wrong type is a warning to Clang, and here an error). */
static clattn_status probe(clattn_context *ctx, const char *head, const char *tail)
{
    text_buf t = {0};
    text_add(&t, tail, strlen(tail));
    text_add(&t, "\n", 1);
    text_add(&t, probe_kernel, strlen(probe_kernel));
    if (t.failed) {
        free(t.data);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "assembling the mods' probe");
    }
    cl_program program = NULL;
    const program_text text = {head, t.data};
    clattn_status st = program_build(ctx, NULL, 0, &text, "-Werror", &program);
    free(t.data);
    if (program)
        clReleaseProgram(program);
    if (st == CLATTN_ERROR_BUILD_FAILED)
        return set_error(ctx, st,
                         "clattn_mods_create: the source does not compile with the declared functions and auxiliary "
                         "tensors on %s (file \"mods\" is desc.source; the whole log in clattn_build_log): %.1500s",
                         ctx->caps.name, clattn_build_log(ctx));
    return st;
}

clattn_status clattn_mods_create(clattn_context *ctx, const clattn_mods_desc *desc, clattn_mods **out)
{
    if (out)
        *out = NULL;
    clattn_status st = check_context(ctx);
    if (st != CLATTN_SUCCESS)
        return st;
    if (!desc || !out)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "clattn_mods_create: %s is NULL", desc ? "out" : "desc");
    clattn_mods_desc d;
    if ((st = versioned_copy(ctx, desc, sizeof d, sizeof d, sizeof d, "clattn_mods_desc", "CLATTN_MODS_DESC_INIT",
                             &d)) != CLATTN_SUCCESS)
        return st;
    if (!d.source)
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.source is NULL");
    const bool score = names_function(d.source, "score_mod"), mask = names_function(d.source, "mask_mod");
    const bool grad = names_function(d.source, "score_mod_grad");
    if (grad && !score)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.source defines score_mod_grad but no score_mod (it is score_mod's derivative)");
    if (!score && !mask)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                         "desc.source defines neither score_mod nor mask_mod (float score_mod(float score, int b, "
                         "int h, long q, long k, ...) / bool mask_mod(int b, int h, long q, long k, ...))");
    if (d.aux_count > CLATTN_MODS_MAX_AUX)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.aux_count = %zu: at most %d auxiliary tensors",
                         d.aux_count, CLATTN_MODS_MAX_AUX);
    if ((d.aux_count && !d.aux) || (d.define_count && !d.defines))
        return set_error(ctx, CLATTN_ERROR_NULL_ARGUMENT, "desc.%s is NULL with a count of %zu",
                         d.aux_count && !d.aux ? "aux" : "defines", d.aux_count && !d.aux ? d.aux_count : d.define_count);
    clattn_mods *m = calloc(1, sizeof *m);
    if (!m)
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "allocating the mods");
    m->ctx = ctx;
    m->mask = mask;
    m->score = score;
    m->grad = grad;
    pthread_mutex_init(&m->lock, NULL);
    for (size_t i = 0; i < d.aux_count && st == CLATTN_SUCCESS; i++)
        st = read_aux(ctx, &d.aux[i], i, m->aux, &m->aux[i]);
    text_buf head = {0}, tail = {0};
    if (st == CLATTN_SUCCESS) {
        m->naux = d.aux_count;
        write_head(&head, m->aux, m->naux, score, mask, grad);
        for (size_t i = 0; i < d.define_count && st == CLATTN_SUCCESS; i++)
            st = add_define(ctx, &tail, d.defines[i], i);
        text_add(&tail, "#line 1 \"mods\"\n", strlen("#line 1 \"mods\"\n"));
        text_add(&tail, d.source, strlen(d.source));
        if (st == CLATTN_SUCCESS && (head.failed || tail.failed))
            st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "assembling the mods' text");
    }
    if (st == CLATTN_SUCCESS)
        st = probe(ctx, head.data, tail.data);
    if (st != CLATTN_SUCCESS) {
        free(head.data);
        free(tail.data);
        free(m);
        return st;
    }
    m->head = head.data;
    m->tail = tail.data;
    for (size_t i = 0; i < m->naux; i++)
        clRetainMemObject(m->aux[i].buffer);
    text_buf both = {0}; /* the digest of the two, each ended by a NUL so that no split looks alike */
    text_add(&both, m->head, strlen(m->head) + 1);
    text_add(&both, m->tail, strlen(m->tail) + 1);
    char hex[65];
    if (both.failed) {
        clattn_mods_free(m);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "digesting the mods' text");
    }
    sha256_hex(both.data, both.used, hex);
    free(both.data);
    memcpy(m->id, hex, 16);
    m->id[16] = '\0';
    m->program = (program_mods){{m->head, m->tail}, m->id};
    *out = m;
    return CLATTN_SUCCESS;
}

void clattn_mods_free(clattn_mods *mods)
{
    if (!mods)
        return;
    while (mods->peers) {
        clattn_mods *peer = mods->peers;
        mods->peers = peer->next_peer;
        clattn_mods_free(peer);
    }
    for (size_t i = 0; i < mods->naux; i++)
        if (mods->aux[i].buffer && mods->head) /* (retained once the mods were made whole) */
            clReleaseMemObject(mods->aux[i].buffer);
    pthread_mutex_destroy(&mods->lock);
    free(mods->head);
    free(mods->tail);
    free(mods);
}

/* A copy of mods on ctx: the same text and id (so the same cached kernels), buffers of the same sizes. */
static clattn_status make_peer(const clattn_mods *mods, clattn_context *ctx, clattn_mods **out)
{
    clattn_mods *peer = calloc(1, sizeof *peer);
    const size_t head_len = strlen(mods->head) + 1, tail_len = strlen(mods->tail) + 1;
    if (peer) {
        peer->head = malloc(head_len);
        peer->tail = malloc(tail_len);
    }
    if (!peer || !peer->head || !peer->tail) {
        if (peer) {
            free(peer->head);
            free(peer->tail);
        }
        free(peer);
        return set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying the mods to another device");
    }
    memcpy(peer->head, mods->head, head_len);
    memcpy(peer->tail, mods->tail, tail_len);
    memcpy(peer->id, mods->id, sizeof peer->id);
    peer->program = (program_mods){{peer->head, peer->tail}, peer->id};
    peer->ctx = ctx;
    peer->mask = mods->mask;
    peer->score = mods->score;
    peer->grad = mods->grad;
    pthread_mutex_init(&peer->lock, NULL);
    clattn_status st = CLATTN_SUCCESS;
    for (size_t i = 0; i < mods->naux && st == CLATTN_SUCCESS; i++) {
        size_t bytes = 0;
        cl_int err = clGetMemObjectInfo(mods->aux[i].buffer, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        peer->aux[i] = mods->aux[i];
        peer->aux[i].buffer = err == CL_SUCCESS ? clCreateBuffer(ctx->context, CL_MEM_READ_ONLY, bytes, NULL, &err) : NULL;
        peer->naux = i + 1; /* (its buffers are released by clattn_mods_free from here on) */
        if (err != CL_SUCCESS)
            st = cl_error(ctx, err, "clCreateBuffer (a copy of a mods' auxiliary tensor)");
    }
    if (st != CLATTN_SUCCESS) {
        clattn_mods_free(peer);
        return st;
    }
    *out = peer;
    return CLATTN_SUCCESS;
}

clattn_status mods_on_context(const clattn_mods *mods, clattn_context *ctx, const clattn_mods **out)
{
    *out = mods;
    if (!mods || mods->ctx == ctx)
        return CLATTN_SUCCESS;
    clattn_mods *owner = (clattn_mods *)mods; /* (its peers are a cache; the mods themselves stay as made) */
    pthread_mutex_lock(&owner->lock);
    clattn_mods *peer = owner->peers;
    while (peer && peer->ctx != ctx)
        peer = peer->next_peer;
    clattn_status st = CLATTN_SUCCESS;
    if (!peer && (st = make_peer(mods, ctx, &peer)) == CLATTN_SUCCESS) {
        peer->next_peer = owner->peers;
        owner->peers = peer;
    }
    /* The auxiliary tensors as they are now, through the host (two contexts share no buffer). */
    for (size_t i = 0; i < mods->naux && st == CLATTN_SUCCESS; i++) {
        size_t bytes = 0;
        cl_int err = clGetMemObjectInfo(mods->aux[i].buffer, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        void *data = err == CL_SUCCESS ? malloc(bytes) : NULL;
        if (err == CL_SUCCESS && !data)
            st = set_error(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "copying the mods' auxiliary tensors");
        else if (err == CL_SUCCESS &&
                 (err = clEnqueueReadBuffer(mods->ctx->queue, mods->aux[i].buffer, CL_TRUE, 0, bytes, data, 0, NULL,
                                            NULL)) == CL_SUCCESS)
            err = clEnqueueWriteBuffer(ctx->queue, peer->aux[i].buffer, CL_TRUE, 0, bytes, data, 0, NULL, NULL);
        free(data);
        if (st == CLATTN_SUCCESS && err != CL_SUCCESS)
            st = cl_error(ctx, err, "copying a mods' auxiliary tensor to another device");
    }
    pthread_mutex_unlock(&owner->lock);
    if (st == CLATTN_SUCCESS)
        *out = peer;
    return st;
}

const program_mods *mods_program(const clattn_mods *mods) { return mods ? &mods->program : NULL; }

/* The elements an auxiliary tensor must hold for the call: every index the functions may be asked for
 * (a part's batches and positions moved by its origin, as the kernels move them). */
static clattn_status elements_needed(clattn_context *ctx, const sdpa_shape *s, const mod_aux *a, size_t *need)
{
    const long long p0 = s->desc.origin_position; /* (0..2^61: masks_resolve) */
    size_t queries = 0;
    if (a->index == CLATTN_AUX_BY_QUERY || a->index == CLATTN_AUX_BY_POSITION)
        for (size_t b = 0; b < s->batch; b++) {
            const long long first = p0 + sdpa_query_position(s, b, 0);
            const long long last = p0 + sdpa_query_position(s, b, s->q_len - 1);
            if (first < 0)
                return set_error(ctx, CLATTN_ERROR_INVALID_VALUE,
                                 "desc.mods aux \"%s\" is indexed by query position, but batch %zu's first query "
                                 "sits at position %lld (query offsets or a bottom-right mask with L > S)",
                                 a->name, b, first);
            if ((size_t)last + 1 > queries)
                queries = (size_t)last + 1;
        }
    switch (a->index) {
    case CLATTN_AUX_BY_LENGTH: *need = a->length; break;
    case CLATTN_AUX_BY_QUERY: *need = queries; break;
    case CLATTN_AUX_BY_KEY: *need = s->kv_len + (size_t)p0; break;
    case CLATTN_AUX_BY_POSITION: *need = queries > s->kv_len + (size_t)p0 ? queries : s->kv_len + (size_t)p0; break;
    case CLATTN_AUX_BY_HEAD: *need = s->heads; break;
    default: *need = s->batch + s->desc.origin_batch; break;
    }
    return CLATTN_SUCCESS;
}

clattn_status mods_bind(clattn_context *ctx, const clattn_mods *mods, const sdpa_shape *s, cl_mem aux[4])
{
    for (int i = 0; i < 4; i++)
        aux[i] = NULL;
    if (!mods)
        return CLATTN_SUCCESS;
    if (mods->ctx != ctx)
        return set_error(ctx, CLATTN_ERROR_INVALID_VALUE, "desc.mods was made on another clattn context");
    for (size_t i = 0; i < mods->naux; i++) {
        size_t need = 0;
        clattn_status st = elements_needed(ctx, s, &mods->aux[i], &need);
        char what[AUX_NAME_MAX + 48];
        snprintf(what, sizeof what, "desc.mods aux \"%s\" (%s)", mods->aux[i].name, index_names[mods->aux[i].index]);
        if (st == CLATTN_SUCCESS)
            st = check_buffer(ctx, mods->aux[i].buffer, need, aux_types[mods->aux[i].type].size, what);
        if (st != CLATTN_SUCCESS)
            return st;
        aux[i] = mods->aux[i].buffer;
    }
    return CLATTN_SUCCESS;
}

bool mods_has_mask(const clattn_mods *mods) { return mods->mask; }

bool mods_has_score(const clattn_mods *mods) { return mods->score; }

bool mods_has_score_grad(const clattn_mods *mods) { return mods->grad; }

const clattn_context *mods_context(const clattn_mods *mods) { return mods->ctx; }

const char *clattn_mods_id(const clattn_mods *mods) { return mods ? mods->id : NULL; }
