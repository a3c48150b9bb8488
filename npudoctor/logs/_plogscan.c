/* The log scanner's pass over a plog chunk, compiled: what npudoctor/logs/scanner.py does in Python for a
 * chunk of plog records (Scanner.scan_lines: RECORD_FIRST_LINE / RECORD_AT_LINE_START to count records,
 * _plog_candidates to find the lines to examine, _locate for their numbers, the message shapes of
 * _analyze_shapes to group them), in one pass over the bytes. Optional: npudoctor builds it when a C compiler
 * is there (hatch_build.py) and the Python code gives the same findings without it; tests hold both to the
 * same answers (tests/test_logs_compiled.py).
 *
 * Why it exists: the Python pass pays a regex step per line to count records and a Python step per line to
 * examine; on an error-dense plog (a job looping on an error) that is most lines. Here each line costs a
 * memchr and a few byte compares for its header; the literals are found by a search that runs ahead over
 * the lines (Teddy, a 16-byte vector filter or Wu-Manber, below); a line to examine costs a hash of its
 * bytes, and Python sees one group per distinct message shape. The grammar is Python's: any level word is
 * taken here and Python keeps the ones RECORD_FIRST_LINE takes; the varying forms beyond CANN's are taken
 * only where RECORD_VARYING takes them (``forms``).
 *
 * Nothing here can backtrack: every step moves forward over the chunk. Memory: three hash tables, at most
 * one entry per line of the chunk, freed before returning.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- literal search: a vector filter on the first three bytes, or Wu-Manber over bigrams -------------- */

#define MAX_WINDOW 32

/* GCC's and clang's vector extensions: 16-byte vectors are SSE2 on x86-64 and NEON on aarch64, both always
 * there. The filter compares 16 positions at once with the first three bytes of every literal; only a
 * position that passes is compared in full. x86-64 machines with AVX2 (the CPU is asked at run time) take
 * 32 positions at once by Teddy instead, whose cost does not grow with the literals. Wu-Manber's step is at
 * most the shortest literal less one (`[ERR]`: 4 bytes), which keeps it near 1 GB/s; it is the fallback
 * (older compilers, literals shorter than three bytes, too many distinct starts). */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 5) /* (older GCC: Wu-Manber) */
#define VECTOR_FILTER 1
#define MAX_TRIPLES 24
#define MAX_VECTOR 32
#if defined(__x86_64__) && !defined(NPUDOCTOR_NO_TEDDY) /* (-DNPUDOCTOR_NO_TEDDY: build as elsewhere) */
#define TEDDY 1
#include <immintrin.h>
#endif

typedef struct {
    int triples;
    unsigned char bytes[MAX_TRIPLES][3][MAX_VECTOR]; /* the distinct first three bytes of the literals, repeated */
    /* Teddy (Hyperscan's literal matcher), where AVX2 is there: the starts in 8 buckets; per byte of a start,
     * the buckets each low and each high nibble value is in. */
    int teddy;
    unsigned char low[3][16], high[3][16];
} VectorFilter;

/* Set the filter up for the literals; 0 when it cannot take them (one is shorter than three bytes, or there
 * are too many distinct starts). */
static int filter_init(VectorFilter *f, const unsigned char **text, const Py_ssize_t *size, Py_ssize_t count) {
    memset(f, 0, sizeof(*f));
    if (count == 0) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (size[i] < 3) {
            return 0;
        }
        int k = 0;
        while (k < f->triples && !(f->bytes[k][0][0] == text[i][0] && f->bytes[k][1][0] == text[i][1] &&
                                   f->bytes[k][2][0] == text[i][2])) {
            k++;
        }
        if (k == f->triples) {
            if (k == MAX_TRIPLES) {
                return 0;
            }
            for (int j = 0; j < 3; j++) {
                memset(f->bytes[k][j], text[i][j], MAX_VECTOR);
                f->low[j][text[i][j] & 15] |= (unsigned char)(1u << (k % 8));
                f->high[j][text[i][j] >> 4] |= (unsigned char)(1u << (k % 8));
            }
            f->triples++;
        }
    }
#ifdef TEDDY
    __builtin_cpu_init();
    f->teddy = __builtin_cpu_supports("avx2") != 0;
#endif
    return 1;
}
#endif

typedef struct {
    const unsigned char **text; /* the literals */
    Py_ssize_t *size;
    Py_ssize_t count;
    Py_ssize_t window;    /* shortest literal, at most MAX_WINDOW */
    unsigned char *shift; /* 65536 entries: how far the window may move for the bigram at its end */
    int32_t *first;       /* 65536 entries: first literal starting with this bigram, -1: none */
    int32_t *next;        /* count entries: the next literal with the same first bigram */
    int single;           /* window 1: every literal is checked at every byte whose value starts one */
    unsigned char starts[256];
#ifdef VECTOR_FILTER
    int vector; /* found by the vector filter (below) instead */
    VectorFilter filter;
#endif
} Literals;

static void literals_free(Literals *lit) {
    free(lit->text);
    free(lit->size);
    free(lit->shift);
    free(lit->first);
    free(lit->next);
}

static int literals_init(Literals *lit, PyObject *tuple) {
    memset(lit, 0, sizeof(*lit));
    lit->count = PyTuple_GET_SIZE(tuple);
    lit->text = calloc((size_t)lit->count + 1, sizeof(*lit->text));
    lit->size = calloc((size_t)lit->count + 1, sizeof(*lit->size));
    lit->next = calloc((size_t)lit->count + 1, sizeof(*lit->next));
    lit->shift = malloc(65536);
    lit->first = malloc(65536 * sizeof(int32_t));
    if (!lit->text || !lit->size || !lit->next || !lit->shift || !lit->first) {
        PyErr_NoMemory();
        return -1;
    }
    lit->window = MAX_WINDOW;
    for (Py_ssize_t i = 0; i < lit->count; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(item) || PyBytes_GET_SIZE(item) == 0) {
            PyErr_SetString(PyExc_TypeError, "literals must be non-empty bytes");
            return -1;
        }
        lit->text[i] = (const unsigned char *)PyBytes_AS_STRING(item);
        lit->size[i] = PyBytes_GET_SIZE(item);
        if (lit->size[i] < lit->window) {
            lit->window = lit->size[i];
        }
    }
    if (lit->count == 0) {
        lit->window = 0;
        return 0;
    }
#ifdef VECTOR_FILTER
    lit->vector = filter_init(&lit->filter, lit->text, lit->size, lit->count);
#endif
    lit->single = lit->window < 2;
    for (int b = 0; b < 65536; b++) {
        lit->shift[b] = (unsigned char)(lit->window - 1);
        lit->first[b] = -1;
    }
    /* Literals are chained by first bigram in reverse, so that the chain lists them in the given order. */
    for (Py_ssize_t i = lit->count - 1; i >= 0; i--) {
        const unsigned char *t = lit->text[i];
        lit->starts[t[0]] = 1;
        if (lit->single) {
            continue;
        }
        for (Py_ssize_t j = 0; j + 1 < lit->window; j++) {
            unsigned int bigram = ((unsigned int)t[j] << 8) | t[j + 1];
            unsigned char shift = (unsigned char)(lit->window - 2 - j);
            if (shift < lit->shift[bigram]) {
                lit->shift[bigram] = shift;
            }
        }
        unsigned int head = ((unsigned int)t[0] << 8) | t[1];
        lit->next[i] = lit->first[head];
        lit->first[head] = (int32_t)i;
    }
    return 0;
}

static int literal_at(const Literals *lit, const unsigned char *p, const unsigned char *stop) {
    for (Py_ssize_t i = 0; i < lit->count; i++) {
        if (stop - p >= lit->size[i] && memcmp(p, lit->text[i], (size_t)lit->size[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

#ifdef VECTOR_FILTER
/* Where the first of the literals starts in [p, stop), or stop, by the vector filter WIDTH bytes at a time. */
#define DEFINE_FILTER_NEXT(NAME, WIDTH, ATTRIBUTES)                                                          \
    ATTRIBUTES static const unsigned char *NAME(const Literals *lit, const unsigned char *p,                 \
                                                const unsigned char *stop) {                                 \
        typedef unsigned char bytes_v __attribute__((vector_size(WIDTH)));                                   \
        typedef signed char mask_v __attribute__((vector_size(WIDTH)));                                      \
        const VectorFilter *f = &lit->filter;                                                                \
        for (; stop - p >= (WIDTH) + 2; p += (WIDTH)) {                                                      \
            bytes_v v0, v1, v2, a, b, c;                                                                     \
            mask_v found = {0};                                                                              \
            memcpy(&v0, p, WIDTH);                                                                           \
            memcpy(&v1, p + 1, WIDTH);                                                                       \
            memcpy(&v2, p + 2, WIDTH);                                                                       \
            for (int i = 0; i < f->triples; i++) {                                                           \
                memcpy(&a, f->bytes[i][0], WIDTH);                                                           \
                memcpy(&b, f->bytes[i][1], WIDTH);                                                           \
                memcpy(&c, f->bytes[i][2], WIDTH);                                                           \
                found |= (mask_v)(v0 == a) & (mask_v)(v1 == b) & (mask_v)(v2 == c);                          \
            }                                                                                                \
            uint64_t words[(WIDTH) / 8], any = 0;                                                            \
            memcpy(words, &found, WIDTH);                                                                    \
            for (int k = 0; k < (WIDTH) / 8; k++) {                                                          \
                any |= words[k];                                                                             \
            }                                                                                                \
            if (any) {                                                                                       \
                signed char lanes[WIDTH];                                                                    \
                memcpy(lanes, &found, WIDTH);                                                                \
                for (int i = 0; i < (WIDTH); i++) {                                                          \
                    if (lanes[i] && literal_at(lit, p + i, stop)) {                                          \
                        return p + i;                                                                        \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        for (; p < stop; p++) {                                                                              \
            if (literal_at(lit, p, stop)) {                                                                  \
                return p;                                                                                    \
            }                                                                                                \
        }                                                                                                    \
        return stop;                                                                                         \
    }

DEFINE_FILTER_NEXT(filter_next, 16, )

#ifdef TEDDY
/* The same by Teddy, 32 bytes at a time: a byte's bucket bits are looked up by its low and its high nibble
 * (vpshufb), for each of the first three bytes; what is left set is a start in some bucket. One start per
 * bucket (up to 8) makes the lookup exact; more share buckets and pass more positions to the full compare. */
__attribute__((target("avx2"))) static const unsigned char *teddy_next(const Literals *lit, const unsigned char *p,
                                                                     const unsigned char *stop) {
    const VectorFilter *f = &lit->filter;
    const __m256i nibble = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
    __m256i low[3], high[3];
    for (int j = 0; j < 3; j++) {
        low[j] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)f->low[j]));
        high[j] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)f->high[j]));
    }
    for (; stop - p >= 34; p += 32) {
        __m256i found = _mm256_set1_epi8(-1);
        for (int j = 0; j < 3; j++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + j));
            __m256i by_low = _mm256_shuffle_epi8(low[j], _mm256_and_si256(v, nibble));
            __m256i by_high = _mm256_shuffle_epi8(high[j], _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
            found = _mm256_and_si256(found, _mm256_and_si256(by_low, by_high));
        }
        unsigned int lanes = ~(unsigned int)_mm256_movemask_epi8(_mm256_cmpeq_epi8(found, zero));
        while (lanes) {
            int i = __builtin_ctz(lanes);
            if (literal_at(lit, p + i, stop)) {
                return p + i;
            }
            lanes &= lanes - 1;
        }
    }
    for (; p < stop; p++) {
        if (literal_at(lit, p, stop)) {
            return p;
        }
    }
    return stop;
}
#endif
#endif

/* Where the first of the literals starts in [p, stop), or stop. */
static const unsigned char *literals_next(const Literals *lit, const unsigned char *p, const unsigned char *stop) {
    if (lit->count == 0) {
        return stop;
    }
#ifdef VECTOR_FILTER
    if (lit->vector) {
#ifdef TEDDY
        if (lit->filter.teddy) {
            return teddy_next(lit, p, stop);
        }
#endif
        return filter_next(lit, p, stop);
    }
#endif
    if (lit->single) {
        for (; p < stop; p++) {
            if (lit->starts[*p] && literal_at(lit, p, stop)) {
                return p;
            }
        }
        return stop;
    }
    const Py_ssize_t window = lit->window;
    while (stop - p >= window) {
        const unsigned char *end = p + window - 2;
        unsigned char shift = lit->shift[((unsigned int)end[0] << 8) | end[1]];
        if (shift) {
            p += shift;
            continue;
        }
        for (int32_t i = lit->first[((unsigned int)p[0] << 8) | p[1]]; i >= 0; i = lit->next[i]) {
            if (stop - p >= lit->size[i] && memcmp(p, lit->text[i], (size_t)lit->size[i]) == 0) {
                return p;
            }
        }
        p++;
    }
    return stop;
}

/* ---- record headers ----------------------------------------------------------------------------------- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }

/* A level word as the header grammar could have it: letters and digits. Which words RECORD_FIRST_LINE takes is
 * Python's to say (scanner._scan_plog_compiled drops the headers it does not take, once per distinct header):
 * the level words are not written twice. */
#define MAX_LEVEL_WORD 16

static int is_alnum(unsigned char c) { return is_digit(c) || is_upper(c) || (c >= 'a' && c <= 'z'); }

/* RECORD_FIRST_LINE at p (a line start), any level word: the end of its group 1 (`LEVEL] MODULE`, at the `(`),
 * or NULL. */
static const unsigned char *record_header(const unsigned char *p, const unsigned char *stop) {
    if (p >= stop || *p != '[') {
        return NULL;
    }
    const unsigned char *word = p + 1;
    const unsigned char *close = word;
    while (close < stop && close - word <= MAX_LEVEL_WORD && is_alnum(*close)) {
        close++;
    }
    if (close == word || close >= stop || *close != ']') {
        return NULL;
    }
    const unsigned char *q = close + 1;
    if (q < stop && *q == ' ') {
        q++;
    }
    if (q >= stop) {
        return NULL;
    }
    if (is_upper(*q)) {
        q++;
        while (q < stop && (is_upper(*q) || is_digit(*q) || *q == '_')) {
            q++;
        }
    } else if (is_digit(*q)) {
        while (q < stop && is_digit(*q)) {
            q++;
        }
    } else {
        return NULL;
    }
    return q < stop && *q == '(' ? q : NULL;
}

static const unsigned char *digits(const unsigned char *q, const unsigned char *stop, int n) {
    for (int i = 0; i < n; i++, q++) {
        if (q >= stop || !is_digit(*q)) {
            return NULL;
        }
    }
    return q;
}

static const unsigned char *literal_byte(const unsigned char *q, const unsigned char *stop, unsigned char c) {
    return q != NULL && q < stop && *q == c ? q + 1 : NULL;
}

/* RECORD_VARYING at q (the `(` after a header's module): the end of the pid, process name and timestamp,
 * or NULL. `\(-?\d+,[^)\n]*\): ?\d{4}-\d\d-\d\d[- ]\d\d:\d\d:\d\d(?:\.\d{3}\.\d{3})?` */
/* Forms of the varying part beyond CANN's own, taken where RECORD_VARYING takes them (Python says which). */
#define FORM_THREAD 1      /* `(pid:tid,process)` */
#define FORM_SHORT_FRACTION 2 /* `.5.12`: fractions of 1-3 digits */

/* 1-3 digits (as many as there are, greedy as the regex is), or exactly 3 without FORM_SHORT_FRACTION. */
static const unsigned char *fraction_digits(const unsigned char *q, const unsigned char *stop, int forms) {
    if (!(forms & FORM_SHORT_FRACTION)) {
        return digits(q, stop, 3);
    }
    const unsigned char *start = q;
    while (q < stop && q - start < 3 && is_digit(*q)) {
        q++;
    }
    return q > start ? q : NULL;
}

static const unsigned char *record_varying(const unsigned char *q, const unsigned char *stop, int forms) {
    q = literal_byte(q, stop, '(');
    if (q == NULL) {
        return NULL;
    }
    if (q < stop && *q == '-') {
        q++;
    }
    const unsigned char *pid = q;
    while (q < stop && is_digit(*q)) {
        q++;
    }
    if (q == pid) {
        return NULL;
    }
    if ((forms & FORM_THREAD) && q + 1 < stop && *q == ':' && is_digit(q[1])) {
        for (q++; q < stop && is_digit(*q); q++) {
        }
    }
    q = literal_byte(q, stop, ',');
    if (q == NULL) {
        return NULL;
    }
    while (q < stop && *q != ')' && *q != '\n') {
        q++;
    }
    q = literal_byte(literal_byte(q, stop, ')'), stop, ':');
    if (q == NULL) {
        return NULL;
    }
    if (q < stop && *q == ' ') {
        q++;
    }
    q = digits(q, stop, 4);
    q = q ? literal_byte(q, stop, '-') : NULL;
    q = q ? digits(q, stop, 2) : NULL;
    q = q ? literal_byte(q, stop, '-') : NULL;
    q = q ? digits(q, stop, 2) : NULL;
    if (q == NULL || q >= stop || (*q != '-' && *q != ' ')) {
        return NULL;
    }
    q = digits(q + 1, stop, 2);
    q = q ? literal_byte(q, stop, ':') : NULL;
    q = q ? digits(q, stop, 2) : NULL;
    q = q ? literal_byte(q, stop, ':') : NULL;
    q = q ? digits(q, stop, 2) : NULL;
    if (q == NULL) {
        return NULL;
    }
    const unsigned char *fraction = literal_byte(q, stop, '.');
    fraction = fraction ? fraction_digits(fraction, stop, forms) : NULL;
    fraction = fraction ? literal_byte(fraction, stop, '.') : NULL;
    fraction = fraction ? fraction_digits(fraction, stop, forms) : NULL;
    return fraction ? fraction : q;
}

/* Whether the line at p (a record header ending at head_end) is one the error-dense Python path takes out by
 * shape (DENSE_RECORD_LINE: an ERROR or WARNING header, a module in capitals, the varying part): with
 * dense_order, their headers are counted after the others, in the order that path gives. */
static int dense_line(const unsigned char *p, const unsigned char *head_end, const unsigned char *line_end,
                      int forms) {
    const unsigned char *q;
    if (head_end - p > 8 && memcmp(p, "[ERROR]", 7) == 0) {
        q = p + 7;
    } else if (head_end - p > 10 && memcmp(p, "[WARNING]", 9) == 0) {
        q = p + 9;
    } else {
        return 0;
    }
    if (*q == ' ') {
        q++;
    }
    return q < head_end && is_upper(*q) && record_varying(head_end, line_end, forms) != NULL;
}

/* ---- hash tables of byte spans ------------------------------------------------------------------------ */

typedef struct {
    uint64_t hash;
    const unsigned char *head; /* key: head[0:head_size] + tail[0:tail_size] */
    Py_ssize_t head_size;
    const unsigned char *tail;
    Py_ssize_t tail_size;
    Py_ssize_t count;
    Py_ssize_t first_line, last_line, start, stop; /* groups: where the first line is */
} Entry;

typedef struct {
    Entry *entries; /* in order of insertion */
    Py_ssize_t used, capacity;
    int32_t *slots; /* open addressing: index into entries, -1 empty */
    Py_ssize_t mask;
} Table;

static uint64_t hash_bytes(uint64_t h, const unsigned char *p, Py_ssize_t n) {
    /* FNV-1a over 8-byte words: fast enough and well spread for keys of log text. */
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        h = (h ^ word) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n > 0) { /* the last bytes as one zero-padded word (the sizes are part of the key) */
        uint64_t word = 0;
        memcpy(&word, p, (size_t)n);
        h = (h ^ word) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return h;
}

static int table_init(Table *t) {
    t->used = 0;
    t->capacity = 64;
    t->mask = 127;
    t->entries = malloc((size_t)t->capacity * sizeof(Entry));
    t->slots = malloc((size_t)(t->mask + 1) * sizeof(int32_t));
    if (!t->entries || !t->slots) {
        PyErr_NoMemory();
        return -1;
    }
    memset(t->slots, 0xff, (size_t)(t->mask + 1) * sizeof(int32_t));
    return 0;
}

static void table_free(Table *t) {
    free(t->entries);
    free(t->slots);
}

/* tail_size -1: a key of one span (a line taken whole), never equal to a key of two spans */
static int same_key(const Entry *e, uint64_t hash, const unsigned char *head, Py_ssize_t head_size,
                    const unsigned char *tail, Py_ssize_t tail_size) {
    return e->hash == hash && e->head_size == head_size && e->tail_size == tail_size &&
           memcmp(e->head, head, (size_t)head_size) == 0 &&
           (tail_size <= 0 || memcmp(e->tail, tail, (size_t)tail_size) == 0);
}

static int table_grow(Table *t) {
    Py_ssize_t slots = (t->mask + 1) * 2;
    if (slots > INT32_MAX) {
        return -1;
    }
    int32_t *fresh = malloc((size_t)slots * sizeof(int32_t));
    if (!fresh) {
        return -1;
    }
    memset(fresh, 0xff, (size_t)slots * sizeof(int32_t));
    for (Py_ssize_t i = 0; i < t->used; i++) {
        Py_ssize_t s = (Py_ssize_t)(t->entries[i].hash & (uint64_t)(slots - 1));
        while (fresh[s] >= 0) {
            s = (s + 1) & (slots - 1);
        }
        fresh[s] = (int32_t)i;
    }
    free(t->slots);
    t->slots = fresh;
    t->mask = slots - 1;
    return 0;
}

/* The entry for the key (a new one, count 0, when it is not there yet); NULL when out of memory (no Python
 * error is set: the pass runs without the interpreter lock). */
static Entry *table_get(Table *t, const unsigned char *head, Py_ssize_t head_size, const unsigned char *tail,
                        Py_ssize_t tail_size) {
    uint64_t hash = hash_bytes(hash_bytes(0xcbf29ce484222325ULL ^ (uint64_t)head_size, head, head_size), tail,
                               tail_size);
    hash ^= (uint64_t)(tail_size + 1) * 0x9e3779b97f4a7c15ULL;
    hash ^= hash >> 32;
    Py_ssize_t s = (Py_ssize_t)(hash & (uint64_t)t->mask);
    while (t->slots[s] >= 0) {
        Entry *e = &t->entries[t->slots[s]];
        if (same_key(e, hash, head, head_size, tail, tail_size)) {
            return e;
        }
        s = (s + 1) & t->mask;
    }
    if (t->used == t->capacity) {
        Entry *more = realloc(t->entries, (size_t)t->capacity * 2 * sizeof(Entry));
        if (!more) {
            return NULL;
        }
        t->entries = more;
        t->capacity *= 2;
    }
    Entry *e = &t->entries[t->used];
    memset(e, 0, sizeof(*e));
    e->hash = hash;
    e->head = head;
    e->head_size = head_size;
    e->tail = tail;
    e->tail_size = tail_size;
    t->slots[s] = (int32_t)t->used;
    t->used++;
    if (t->used * 2 > t->mask + 1 && table_grow(t) < 0) {
        return NULL;
    }
    return &t->entries[t->used - 1];
}

/* ---- the pass --------------------------------------------------------------------------------------- */

/* Only this much of a line is put together with lines of the same shape (the rest of a longer line is
 * compared too: such a line is its own group unless another is byte for byte the same). */
#define MAX_SHAPE_LINE 16384

/* The pass itself, without the interpreter lock (no Python object is touched): counts into headers (and
 * dense_headers), groups into groups; records and newlines out. -1 when out of memory. */
static int scan_chunk(const unsigned char *data, Py_ssize_t begin, Py_ssize_t end, const Literals *lit, int forms,
                      int dense_order, Py_ssize_t line_base, Table *headers, Table *groups, Table *dense_headers,
                      Py_ssize_t *records_out, Py_ssize_t *newlines_out) {
    const unsigned char *p = data + begin, *stop = data + end;
    const unsigned char *first_head = NULL, *first_head_end = NULL; /* counted last, as the Python code does */
    Py_ssize_t records = 0, lineno = line_base, newlines = 0;
    const unsigned char *ahead = p; /* where the next literal starts */
    int looked = 0;                 /* (not looked for yet) */
    int first_line = 1;
    while (p < stop) {
        const unsigned char *newline = memchr(p, '\n', (size_t)(stop - p));
        const unsigned char *line_end = newline ? newline : stop;
        lineno++;
        const unsigned char *head_end = record_header(p, line_end);
        if (head_end != NULL) {
            records++;
            if (first_line) {
                first_head = p + 1;
                first_head_end = head_end;
            } else {
                Entry *e = table_get(dense_order && dense_line(p, head_end, line_end, forms) ? dense_headers : headers,
                                     p + 1, head_end - p - 1, NULL, -1);
                if (e == NULL) {
                    return -1;
                }
                e->count++;
            }
        }
        first_line = 0;
        /* the next literal is looked for over the lines after this one too, until it is found */
        if (!looked || ahead < p) {
            ahead = literals_next(lit, p, stop);
            looked = 1;
        }
        if (ahead < (newline ? newline + 1 : stop)) {
            const unsigned char *varying_end = NULL;
            if (head_end != NULL && line_end - p <= MAX_SHAPE_LINE) {
                varying_end = record_varying(head_end, line_end, forms);
            }
            Entry *e = varying_end ? table_get(groups, p, head_end - p, varying_end, line_end - varying_end)
                                   : table_get(groups, p, line_end - p, NULL, -1);
            if (e == NULL) {
                return -1;
            }
            if (e->count == 0) {
                e->first_line = lineno;
                e->start = p - data;
                e->stop = line_end - data;
            }
            e->last_line = lineno;
            e->count++;
        }
        if (!newline) {
            break;
        }
        newlines++;
        p = newline + 1;
    }
    if (first_head != NULL) {
        Entry *e = table_get(headers, first_head, first_head_end - first_head, NULL, -1);
        if (e == NULL) {
            return -1;
        }
        e->count++;
    }
    for (Py_ssize_t i = 0; i < dense_headers->used; i++) { /* after the others, as the error-dense path has them */
        Entry *dense = &dense_headers->entries[i];
        Entry *e = table_get(headers, dense->head, dense->head_size, NULL, -1);
        if (e == NULL) {
            return -1;
        }
        e->count += dense->count;
    }

    *records_out = records;
    *newlines_out = newlines;
    return 0;
}

PyDoc_STRVAR(plog_pass_doc,
             "plog_pass(data, begin, end, literals, line_base, forms=0, dense_order=0, search=0) -> (headers, "
             "records, newlines, groups)\n\n"
             "One pass over the complete lines data[begin:end] (ending with a newline). headers: {b'LEVEL] "
             "MODULE': records} in the order RECORD_AT_LINE_START.findall and then RECORD_FIRST_LINE give, "
             "any level word (letters and digits); "
             "records: their sum; newlines: the line count; groups: the lines holding one of literals "
             "(non-empty bytes), one group per message shape (the line with its record header's pid, "
             "process name and timestamp left out), in the order of their first lines: (first line number, "
             "last line number, lines, start, stop) with data[start:stop] the first line. forms: the varying "
             "parts beyond CANN's taken too (1: `(pid:tid,`, 2: fractions of 1-3 digits). dense_order: headers in the "
             "order of the error-dense path (DENSE_RECORD_LINE's lines after the others). search (for tests): 0 "
             "the fastest search this machine has, 1 the 16-byte vector filter, 2 Wu-Manber.");

static PyObject *plog_pass(PyObject *self, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t begin, end, line_base;
    PyObject *literal_tuple;
    int forms = 0, dense_order = 0, search = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!n|iii", &buffer, &begin, &end, &PyTuple_Type, &literal_tuple, &line_base,
                          &forms, &dense_order, &search)) {
        return NULL;
    }
    PyObject *result = NULL;
    Literals lit;
    Table headers, groups, dense_headers;
    int have_lit = 0, have_headers = 0, have_groups = 0, have_dense = 0;
    if (begin < 0 || end > buffer.len || begin > end) {
        PyErr_SetString(PyExc_ValueError, "begin/end out of range");
        goto done;
    }
    if (literals_init(&lit, literal_tuple) < 0) {
        have_lit = 1;
        goto done;
    }
    have_lit = 1;
#ifdef VECTOR_FILTER
    if (search >= 1) { /* tests: the searches the machine would not take */
        lit.filter.teddy = 0;
    }
    if (search >= 2) {
        lit.vector = 0;
    }
#endif
    if (table_init(&headers) < 0) {
        goto done;
    }
    have_headers = 1;
    if (table_init(&groups) < 0) {
        goto done;
    }
    have_groups = 1;
    if (table_init(&dense_headers) < 0) {
        goto done;
    }
    have_dense = 1;

    Py_ssize_t records = 0, newlines = 0;
    int failed;
    Py_BEGIN_ALLOW_THREADS /* the bytes cannot change (a bytes object, or a buffer the caller holds) */
    failed = scan_chunk((const unsigned char *)buffer.buf, begin, end, &lit, forms, dense_order, line_base, &headers,
                        &groups, &dense_headers, &records, &newlines);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }

    PyObject *header_dict = PyDict_New();
    PyObject *group_list = PyList_New(groups.used);
    if (!header_dict || !group_list) {
        Py_XDECREF(header_dict);
        Py_XDECREF(group_list);
        goto done;
    }
    for (Py_ssize_t i = 0; i < headers.used; i++) {
        Entry *e = &headers.entries[i];
        PyObject *key = PyBytes_FromStringAndSize((const char *)e->head, e->head_size);
        PyObject *value = PyLong_FromSsize_t(e->count);
        if (!key || !value || PyDict_SetItem(header_dict, key, value) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_DECREF(header_dict);
            Py_DECREF(group_list);
            goto done;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    for (Py_ssize_t i = 0; i < groups.used; i++) {
        Entry *e = &groups.entries[i];
        PyObject *item = Py_BuildValue("(nnnnn)", e->first_line, e->last_line, e->count, e->start, e->stop);
        if (!item) {
            Py_DECREF(header_dict);
            Py_DECREF(group_list);
            goto done;
        }
        PyList_SET_ITEM(group_list, i, item);
    }
    result = Py_BuildValue("(NnnN)", header_dict, records, newlines, group_list);

done:
    if (have_dense) {
        table_free(&dense_headers);
    }
    if (have_groups) {
        table_free(&groups);
    }
    if (have_headers) {
        table_free(&headers);
    }
    if (have_lit) {
        literals_free(&lit);
    }
    PyBuffer_Release(&buffer);
    return result;
}

static PyMethodDef methods[] = {
    {"plog_pass", plog_pass, METH_VARARGS, plog_pass_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_plogscan", "The log scanner's pass over plog chunks, compiled (see scanner.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

/* The SHA-256 of this file as it was compiled (set by hatch_build.py): a test tells a stale build apart. */
#ifndef SOURCE_SHA256
#define SOURCE_SHA256 ""
#endif

PyMODINIT_FUNC PyInit__plogscan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
