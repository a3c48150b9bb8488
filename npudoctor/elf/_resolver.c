/* The loader's symbol resolution, compiled: the same rules as npudoctor/elf/loader.py's pure-Python
 * _resolve_python() and reader.py's ElfFile.undefined_references() / defines_each(), for files in this
 * machine's byte order. Optional: npudoctor builds it when a C compiler is there and falls back to the
 * Python code otherwise; tests hold both to the same answers (tests/test_elf_resolver.py).
 *
 * Why it exists: a torch-sized load graph has some 10,000 undefined references; in Python each costs a
 * few microseconds (extraction, hashing, hash-table walk), which alone is more than `ldd -r` takes.
 *
 * Every read is bounds-checked against the mapped file: a corrupt table makes a lookup fail (as in the
 * Python code, where the read raises ElfError), never a read past the buffer. Nothing is executed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SHN_UNDEF 0
#define STB_LOCAL 0
#define STB_WEAK 2
#define STT_TLS 6
#define VERSYM_HIDDEN 0x8000

typedef struct {
    const char *name; /* NULL: no entry at this index */
    Py_ssize_t size;
    PyObject *name_str; /* for verneeds: the version and its file, as reported */
    PyObject *file_str;
} Version;

typedef struct {
    PyObject *path;
    Py_buffer buffer;
    int has_buffer;
    const unsigned char *data;
    Py_ssize_t size;
    int is64;
    Py_ssize_t symtab, count, strtab, versym; /* versym < 0: no DT_VERSYM */
    int has_gnu;
    uint32_t nbuckets, symoffset, bloom_size, shift;
    Py_ssize_t bloom, buckets, chains;
    int has_sysv;
    uint32_t nbucket;
    Py_ssize_t sysv_longest, sysv_buckets, sysv_chains; /* longest: no valid chain is longer */
    Version *verdefs; /* definitions: index -> name */
    Py_ssize_t n_verdefs;
    Version *verneeds; /* references: index -> (name, file) */
    Py_ssize_t n_verneeds;
} Object;

typedef struct {
    uint32_t name;
    unsigned info;
    unsigned shndx;
    uint64_t value;
} Symbol;

static int read_u16(const Object *o, Py_ssize_t at, uint32_t *out) {
    uint16_t v;
    if (at < 0 || at > o->size - 2) return 0;
    memcpy(&v, o->data + at, 2);
    *out = v;
    return 1;
}

static int read_u32(const Object *o, Py_ssize_t at, uint32_t *out) {
    if (at < 0 || at > o->size - 4) return 0;
    memcpy(out, o->data + at, 4);
    return 1;
}

static int read_symbol(const Object *o, Py_ssize_t index, Symbol *s) {
    Py_ssize_t entry = o->is64 ? 24 : 16;
    Py_ssize_t at;
    if (index < 0 || index > (PY_SSIZE_T_MAX - o->symtab) / entry) return 0;
    at = o->symtab + index * entry;
    if (at < 0 || at > o->size - entry) return 0;
    memcpy(&s->name, o->data + at, 4);
    if (o->is64) {
        uint16_t shndx;
        s->info = o->data[at + 4];
        memcpy(&shndx, o->data + at + 6, 2);
        s->shndx = shndx;
        memcpy(&s->value, o->data + at + 8, 8);
    } else {
        uint32_t value;
        uint16_t shndx;
        memcpy(&value, o->data + at + 4, 4);
        s->value = value;
        s->info = o->data[at + 12];
        memcpy(&shndx, o->data + at + 14, 2);
        s->shndx = shndx;
    }
    return 1;
}

static uint32_t gnu_hash(const unsigned char *name, Py_ssize_t size) {
    uint32_t h = 5381;
    for (Py_ssize_t i = 0; i < size; i++) h = h * 33 + name[i];
    return h;
}

static uint32_t sysv_hash(const unsigned char *name, Py_ssize_t size) {
    uint32_t h = 0, g;
    for (Py_ssize_t i = 0; i < size; i++) {
        h = (h << 4) + name[i];
        g = h & 0xF0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

/* Symbol types ld.so accepts as a definition: NOTYPE, OBJECT, FUNC, COMMON, TLS, GNU_IFUNC. */
static int definable_type(unsigned type) {
    return type == 0 || type == 1 || type == 2 || type == 5 || type == 6 || type == 10;
}

/* Bindings a reference can bind to: GLOBAL, WEAK, GNU_UNIQUE. */
static int bindable(unsigned binding) { return binding == 1 || binding == 2 || binding == 10; }

typedef struct {
    const unsigned char *name;
    Py_ssize_t size;
    uint32_t gnu;
    uint32_t sysv;
    int sysv_done;
    const Version *version; /* NULL: an unversioned reference */
    int hidden;
} Reference;

/* 1 when symbol `index` of `o` is a definition `ref` binds to (glibc check_match), 0 when it is not,
 * -1 when reading it hits a corrupt part of the file (the whole lookup in `o` then fails). */
static int matches(const Object *o, Py_ssize_t index, const Reference *ref) {
    Symbol s;
    uint32_t raw, ndx;
    Py_ssize_t at;
    unsigned type;
    if (!read_symbol(o, index, &s)) return -1;
    type = s.info & 0xF;
    if (s.shndx == SHN_UNDEF || !definable_type(type)) return 0;
    if (s.value == 0 && type != STT_TLS) return 0;
    if (!bindable(s.info >> 4)) return 0;
    at = o->strtab + (Py_ssize_t)s.name;
    if (at < 0 || at > o->size - ref->size - 1) return 0;
    if (memcmp(o->data + at, ref->name, (size_t)ref->size) != 0 || o->data[at + ref->size] != 0) return 0;
    if (o->versym < 0) return 1;
    if (!read_u16(o, o->versym + 2 * index, &raw)) return -1;
    ndx = raw & 0x7FFF;
    if (ref->version != NULL) {
        if (ndx > 1) {
            const Version *defined = (Py_ssize_t)ndx < o->n_verdefs ? &o->verdefs[ndx] : NULL;
            return defined != NULL && defined->name != NULL && defined->size == ref->version->size &&
                   memcmp(defined->name, ref->version->name, (size_t)defined->size) == 0;
        }
        /* An unversioned (base/global) definition satisfies a versioned reference. */
        return !ref->hidden && !(raw & VERSYM_HIDDEN);
    }
    /* glibc accepts the base versions and the first defined version (index 2) even when hidden, for old
     * binaries; a later version only as the default (non-hidden) one. */
    return ndx <= 2 || !(raw & VERSYM_HIDDEN);
}

/* Symbol indexes on one hash chain: a small fixed array, grown on the heap for long (corrupt) chains. */
typedef struct {
    Py_ssize_t fixed[64];
    Py_ssize_t *items;
    Py_ssize_t count, capacity;
} Candidates;

static int push_candidate(Candidates *c, Py_ssize_t index) {
    if (c->count == c->capacity) {
        Py_ssize_t *grown = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)c->capacity * 2);
        if (grown == NULL) return 0;
        memcpy(grown, c->items, sizeof(Py_ssize_t) * (size_t)c->count);
        if (c->items != c->fixed) PyMem_Free(c->items);
        c->items = grown;
        c->capacity *= 2;
    }
    c->items[c->count++] = index;
    return 1;
}

/* Whether `o` exports what `ref` asks for. Candidates come from DT_GNU_HASH (bloom filter, bucket, chain),
 * else DT_HASH; the chain is walked to its end before any candidate is judged, as in the Python code. */
static int defines(const Object *o, Reference *ref) {
    Candidates c;
    int result = 0;
    c.items = c.fixed;
    c.count = 0;
    c.capacity = (Py_ssize_t)(sizeof(c.fixed) / sizeof(c.fixed[0]));
    if (o->has_gnu) {
        uint32_t h = ref->gnu, bits = o->is64 ? 64 : 32, index, chain;
        uint64_t word;
        Py_ssize_t word_at;
        if (!o->nbuckets || !o->bloom_size) return 0;
        word_at = o->bloom + (Py_ssize_t)((h / bits) % o->bloom_size) * (bits / 8);
        if (o->is64) {
            if (word_at < 0 || word_at > o->size - 8) return 0;
            memcpy(&word, o->data + word_at, 8);
        } else {
            uint32_t w32;
            if (!read_u32(o, word_at, &w32)) return 0;
            word = w32;
        }
        {
            uint32_t second = o->shift >= 32 ? 0 : (h >> o->shift);
            if (!((word >> (h % bits)) & (word >> (second % bits)) & 1)) return 0;
        }
        if (!read_u32(o, o->buckets + 4 * (Py_ssize_t)(h % o->nbuckets), &index)) return 0;
        if (index < o->symoffset) return 0;
        for (;;) {
            if (!read_u32(o, o->chains + 4 * ((Py_ssize_t)index - o->symoffset), &chain)) goto done;
            if ((chain | 1) == (h | 1) && !push_candidate(&c, index)) goto done;
            if (chain & 1) break;
            if (index == UINT32_MAX) goto done;
            index++;
        }
    } else if (o->has_sysv) {
        uint32_t index;
        Py_ssize_t seen = 0;
        if (!o->nbucket) return 0;
        if (!ref->sysv_done) {
            ref->sysv = sysv_hash(ref->name, ref->size);
            ref->sysv_done = 1;
        }
        if (!read_u32(o, o->sysv_buckets + 4 * (Py_ssize_t)(ref->sysv % o->nbucket), &index)) return 0;
        while (index) {
            /* Longer than any chain of distinct, readable indexes below nchain: it loops (the Python code
             * finds the repeated index; the verdict is the same: this lookup fails). */
            if ((Py_ssize_t)index >= o->sysv_longest || seen >= o->sysv_longest) goto done;
            if (!push_candidate(&c, index)) goto done;
            if (!read_u32(o, o->sysv_chains + 4 * (Py_ssize_t)index, &index)) goto done;
            seen++;
        }
    } else {
        return 0;
    }
    for (Py_ssize_t i = 0; i < c.count; i++) {
        int m = matches(o, c.items[i], ref);
        if (m < 0) break; /* a corrupt entry: ld.so could not bind here either */
        if (m > 0) {
            result = 1;
            break;
        }
    }
done:
    if (c.items != c.fixed) PyMem_Free(c.items);
    return result;
}

static void release_object(Object *o) {
    if (o->has_buffer) PyBuffer_Release(&o->buffer);
    o->has_buffer = 0;
    PyMem_Free(o->verdefs);
    PyMem_Free(o->verneeds);
    o->verdefs = o->verneeds = NULL;
}

/* A dict {index: name} or {index: (name bytes, name str, file str)} as an array indexed by version index.
 * The dicts (and so the strings) stay alive in the layout tuples while the arrays are used. */
static int read_versions(PyObject *dict, int with_strings, Version **out, Py_ssize_t *count) {
    PyObject *key, *value;
    Py_ssize_t pos = 0, top = 0;
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "versions must be a dict");
        return 0;
    }
    while (PyDict_Next(dict, &pos, &key, &value)) {
        Py_ssize_t index = PyLong_AsSsize_t(key);
        if (index < 0 || index > 0x7FFF) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "version index out of range");
            return 0;
        }
        if (index + 1 > top) top = index + 1;
    }
    *count = top;
    *out = PyMem_Calloc((size_t)(top ? top : 1), sizeof(Version));
    if (*out == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        Version *v = &(*out)[PyLong_AsSsize_t(key)];
        PyObject *name = value;
        if (with_strings) {
            if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 3) {
                PyErr_SetString(PyExc_TypeError, "a version need is (name bytes, name, file)");
                return 0;
            }
            name = PyTuple_GET_ITEM(value, 0);
            v->name_str = PyTuple_GET_ITEM(value, 1);
            v->file_str = PyTuple_GET_ITEM(value, 2);
        }
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "a version name must be bytes");
            return 0;
        }
        v->name = PyBytes_AS_STRING(name);
        v->size = PyBytes_GET_SIZE(name);
    }
    return 1;
}

static int read_object(PyObject *layout, Object *o) {
    PyObject *path, *data, *gnu, *sysv, *verdefs, *verneeds;
    int is64;
    memset(o, 0, sizeof(*o));
    if (!PyArg_ParseTuple(layout, "UOpnnnnOOOO", &path, &data, &is64, &o->symtab, &o->count, &o->strtab,
                          &o->versym, &gnu, &sysv, &verdefs, &verneeds))
        return 0;
    o->path = path;
    o->is64 = is64;
    if (PyObject_GetBuffer(data, &o->buffer, PyBUF_SIMPLE) < 0) return 0;
    o->has_buffer = 1;
    o->data = o->buffer.buf;
    o->size = o->buffer.len;
    if (gnu != Py_None) {
        if (!PyArg_ParseTuple(gnu, "IIIInnn", &o->nbuckets, &o->symoffset, &o->bloom_size, &o->shift, &o->bloom,
                              &o->buckets, &o->chains))
            return 0;
        o->has_gnu = 1;
    }
    if (sysv != Py_None) {
        if (!PyArg_ParseTuple(sysv, "Innn", &o->nbucket, &o->sysv_longest, &o->sysv_buckets, &o->sysv_chains))
            return 0;
        o->has_sysv = 1;
    }
    if (!read_versions(verdefs, 0, &o->verdefs, &o->n_verdefs)) return 0;
    if (!read_versions(verneeds, 1, &o->verneeds, &o->n_verneeds)) return 0;
    return 1;
}

/* The unresolved strong references of object `r`, appended to `rows`; 0 with an exception set on error,
 * -1 when the object's string table is corrupt (`error_at` holds the offset: the object is skipped). */
static int resolve_object(Object *objects, Py_ssize_t n_objects, Py_ssize_t r, PyObject *rows, Py_ssize_t *error_at) {
    Object *o = &objects[r];
    Py_ssize_t start_rows = PyList_GET_SIZE(rows);
    for (Py_ssize_t index = 1; index < o->count; index++) {
        Symbol s;
        Reference ref;
        const unsigned char *end;
        Py_ssize_t at;
        uint32_t raw = 0;
        int found = 0;
        if (!read_symbol(o, index, &s)) break; /* the caller checked the table's size */
        if (s.shndx != SHN_UNDEF || s.name == 0 || (s.info >> 4) == STB_LOCAL) continue;
        at = o->strtab + (Py_ssize_t)s.name;
        end = at >= 0 && at < o->size ? memchr(o->data + at, 0, (size_t)(o->size - at)) : NULL;
        if (end == NULL) {
            *error_at = at;
            /* The Python code drops all of this object's references: so does this one. */
            if (PyList_SetSlice(rows, start_rows, PyList_GET_SIZE(rows), NULL) < 0) return 0;
            return -1;
        }
        if ((s.info >> 4) == STB_WEAK) continue;
        ref.name = o->data + at;
        ref.size = end - (o->data + at);
        ref.gnu = gnu_hash(ref.name, ref.size);
        ref.sysv_done = 0;
        ref.version = NULL;
        ref.hidden = 0;
        if (o->versym >= 0) {
            if (!read_u16(o, o->versym + 2 * index, &raw)) break; /* checked by the caller */
            if ((Py_ssize_t)(raw & 0x7FFF) < o->n_verneeds && o->verneeds[raw & 0x7FFF].name != NULL)
                ref.version = &o->verneeds[raw & 0x7FFF];
            ref.hidden = raw >= VERSYM_HIDDEN;
        }
        for (Py_ssize_t p = 0; p < n_objects && !found; p++) found = defines(&objects[p], &ref);
        if (!found) {
            PyObject *row = Py_BuildValue("(ny#OO)", r, (const char *)ref.name, ref.size,
                                          ref.version ? ref.version->name_str : Py_None,
                                          ref.version ? ref.version->file_str : Py_None);
            if (row == NULL) return 0;
            if (PyList_Append(rows, row) < 0) {
                Py_DECREF(row);
                return 0;
            }
            Py_DECREF(row);
        }
    }
    return 1;
}

PyDoc_STRVAR(unresolved_doc,
             "unresolved(layouts, referrers) -> (rows, errors)\n\n"
             "Each strong undefined reference of the objects `referrers` (indexes into `layouts`) that no\n"
             "object in `layouts` (the lookup scope, in load order) defines, as (object index, name bytes,\n"
             "version or None, version file or None); errors as (object index, string offset) for objects\n"
             "whose string table runs past the end of the file. Layouts come from ElfFile.resolver_layout().");

static PyObject *unresolved(PyObject *self, PyObject *args) {
    PyObject *layouts, *referrers, *rows = NULL, *errors = NULL, *result = NULL;
    Object *objects = NULL;
    Py_ssize_t n = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &layouts, &PyList_Type, &referrers)) return NULL;
    n = PyList_GET_SIZE(layouts);
    objects = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Object));
    if (objects == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++)
        if (!read_object(PyList_GET_ITEM(layouts, i), &objects[i])) goto finally;
    rows = PyList_New(0);
    errors = PyList_New(0);
    if (rows == NULL || errors == NULL) goto finally;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(referrers); i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(referrers, i)), error_at = 0;
        int status;
        if (r < 0 || r >= n) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "referrer index out of range");
            goto finally;
        }
        status = resolve_object(objects, n, r, rows, &error_at);
        if (status == 0) goto finally;
        if (status < 0) {
            PyObject *error = Py_BuildValue("(nn)", r, error_at);
            if (error == NULL || PyList_Append(errors, error) < 0) {
                Py_XDECREF(error);
                goto finally;
            }
            Py_DECREF(error);
        }
    }
    result = PyTuple_Pack(2, rows, errors);
finally:
    for (Py_ssize_t i = 0; i < n; i++) release_object(&objects[i]);
    PyMem_Free(objects);
    Py_XDECREF(rows);
    Py_XDECREF(errors);
    return result;
}

PyDoc_STRVAR(largest_word_doc,
             "largest_word(data, offset, count) -> int\n\n"
             "The largest of `count` 32-bit words (this machine's byte order) at `offset` in `data`; 0 for none.\n"
             "ValueError when they run past the end. (The GNU hash table's highest bucket: max() over 65,536\n"
             "boxed ints takes milliseconds.)");

static PyObject *largest_word(PyObject *self, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t offset, count;
    uint32_t largest = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nn", &buffer, &offset, &count)) return NULL;
    if (offset < 0 || count < 0 || count > (buffer.len - offset) / 4 || offset > buffer.len) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "words run past the end of the data");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t word;
        memcpy(&word, (const char *)buffer.buf + offset + 4 * i, 4);
        if (word > largest) largest = word;
    }
    PyBuffer_Release(&buffer);
    return PyLong_FromUnsignedLong(largest);
}

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

PyDoc_STRVAR(demangle_doc,
             "demangle(names) -> list or None\n\n"
             "Each C++ name demangled by the C++ runtime's own demangler (libstdc++'s abi::__cxa_demangle, the\n"
             "code c++filt is built from), None where a name is not a valid mangled name; None for the whole\n"
             "call when libstdc++ cannot be loaded (then c++filt is asked instead).");

static PyObject *demangle(PyObject *self, PyObject *args) {
    static int looked_up = 0;
    static cxa_demangle_fn cxa_demangle = NULL;
    PyObject *names, *result;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &names)) return NULL;
    if (!looked_up) {
        void *handle = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        looked_up = 1;
        if (handle != NULL) *(void **)(&cxa_demangle) = dlsym(handle, "__cxa_demangle");
    }
    if (cxa_demangle == NULL) Py_RETURN_NONE;
    result = PyList_New(PyList_GET_SIZE(names));
    if (result == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); i++) {
        PyObject *name = PyList_GET_ITEM(names, i), *value = NULL;
        const char *mangled = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (mangled == NULL) {
            PyErr_Clear(); /* not a str, or not encodable (a name read with surrogateescape): left as it is */
        } else {
            int status = 0;
            char *plain = cxa_demangle(mangled, NULL, NULL, &status);
            if (plain != NULL && status == 0)
                value = PyUnicode_DecodeUTF8(plain, (Py_ssize_t)strlen(plain), "surrogateescape");
            free(plain);
            if (value == NULL) PyErr_Clear();
        }
        if (value == NULL) {
            value = Py_None;
            Py_INCREF(value);
        }
        PyList_SET_ITEM(result, i, value);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"demangle", demangle, METH_VARARGS, demangle_doc},
    {"unresolved", unresolved, METH_VARARGS, unresolved_doc},
    {"largest_word", largest_word, METH_VARARGS, largest_word_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resolver", "The loader's symbol resolution, compiled (see loader.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

/* The SHA-256 of this file as it was compiled (set by hatch_build.py): a test tells a stale build apart. */
#ifndef SOURCE_SHA256
#define SOURCE_SHA256 ""
#endif

PyMODINIT_FUNC PyInit__resolver(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
