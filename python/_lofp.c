/*
 * _lofp.c -- the CPython extension under `import lofp` (python/lofp/). It is written against the
 * limited API of Python 3.11 (one abi3 module for every later version) and the public headers of
 * liblofp only.
 *
 * Arrays reach C through the buffer protocol (numpy, bytes, bytearray, memoryview, mmap) or
 * DLPack (`__dlpack__`: torch CPU and CUDA tensors, JAX, CuPy and any other producer, CPU or CUDA,
 * versioned or legacy capsules; a consumed capsule is renamed and its deleter run once, as the
 * specification asks of a consumer). The DLPack structs are declared below from the public
 * specification. Nothing here allocates an output: every
 * output buffer is allocated by the Python layer in the caller's framework and only filled here,
 * after its byte size has been checked against the library's sizing helpers. Non-contiguous
 * arrays are refused (the Python layer copies them once first). The GIL is released around every
 * library call that touches array data.
 *
 * Errors are raised as lofp.Error (a ValueError) with the message "<status>: <detail>" and the
 * attributes `status` (the library's status name) and `index` (a flat index or None).
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/calib.h"
#include "lofp/checkpoint.h"
#include "lofp/gemm.h"
#include "lofp/io.h"
#include "lofp/kvcache.h"
#include "lofp/lofp.h"
#include "lofp/method.h"
#include "lofp/qfile.h"
#ifdef LOFP_PY_CUDA
#include "lofp/lofp_cuda.h"
/* Device selection is the CUDA runtime's own public entry point (the runtime is linked in
 * statically with the CUDA backend); lofp_cuda.h runs on the current device. */
extern int cudaGetDevice(int *device);
extern int cudaSetDevice(int device);
/* the large-M routes' benchmark hooks (cuda/lofp_cuda_internal.h, not public API): bench/gpu_llama.py
 * sweeps the transient chunk bound and the cuBLASLt candidate through them */
extern void lofp_cuda_large_test_config(size_t cap_bytes, int lt_off);
extern void lofp_cuda_large_test_algo(int index);
#endif

/* ------------------------------------------------------------------------------------------ */
/* DLPack, declared from the public specification (v1.1 ABI)                                  */
/* ------------------------------------------------------------------------------------------ */

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3, DL_CUDA_MANAGED = 13 };

typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DL_FLAG_READ_ONLY 1ull
#define DL_FLAG_IS_COPIED 2ull

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static PyObject *LofpError; /* lofp.Error, a subclass of ValueError */

static const char *status_name(lofp_status st)
{
    if (st == LOFP_ERR_SHAPE) return "shape"; /* the library's name carries a sentence */
#ifdef LOFP_PY_CUDA
    return lofp_cuda_status_name(st);
#else
    return lofp_status_name(st);
#endif
}

/* Raises lofp.Error("<status>: <message>") with .status and .index (index < 0: None). */
static PyObject *raise_error(lofp_status st, long long index, const char *fmt, ...)
{
    char msg[1400], full[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "%s: %s", status_name(st), msg);
    PyObject *inst = PyObject_CallFunction(LofpError, "s", full);
    if (!inst) return NULL;
    PyObject *sn = PyUnicode_FromString(status_name(st));
    PyObject *ix = index >= 0 ? PyLong_FromLongLong(index) : Py_NewRef(Py_None);
    PyObject *code = PyLong_FromLong((long)st);
    if (sn && ix && code) {
        PyObject_SetAttrString(inst, "status", sn);
        PyObject_SetAttrString(inst, "index", ix);
        PyObject_SetAttrString(inst, "code", code);
    }
    Py_XDECREF(code);
    Py_XDECREF(sn);
    Py_XDECREF(ix);
    PyErr_SetObject(LofpError, inst);
    Py_DECREF(inst);
    return NULL;
}

/* A failed library call: the status name plus what was being done. */
static PyObject *raise_call(lofp_status st, const char *what)
{
#ifdef LOFP_PY_CUDA
    if (st == LOFP_ERR_DEVICE) return raise_error(st, -1, "%s: %s", what, lofp_cuda_last_error());
#endif
    return raise_error(st, -1, "%s failed", what);
}

/* ------------------------------------------------------------------------------------------ */
/* Arrays                                                                                      */
/* ------------------------------------------------------------------------------------------ */

enum { WANT_CPU = 1, WANT_CUDA = 2 };

/* torch.Tensor, registered by the Python layer (register_tensor_type) once torch is imported.
 * torch's __dlpack__ is Python code costing several microseconds per tensor, so torch tensors take
 * a direct path instead: is_contiguous(), data_ptr(), nbytes, get_device(). Their work runs on
 * torch's current stream, which is the stream the Python layer passes, so DLPack's consumer-stream
 * handshake has nothing to order. tensor_path("dlpack") sends them through DLPack like every
 * other producer (the tests run both). */
static PyObject *TorchTensorType;
static int DlpackOnly;

typedef struct {
    char *ptr;
    size_t nbytes;
    int cuda;       /* 1: device memory */
    int device_id;
    int has_view;
    Py_buffer view;
    PyObject *capsule; /* the DLPack capsule, kept alive (and freed by its producer) */
} arr_t;

static void arr_release(arr_t *a)
{
    if (a->has_view) PyBuffer_Release(&a->view);
    a->has_view = 0;
    Py_CLEAR(a->capsule);
}

static const char *type_name(PyObject *o)
{
    static char buf[128];
    PyObject *n = PyType_GetName(Py_TYPE(o));
    buf[0] = 0;
    if (n) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(n, &len);
        if (s) snprintf(buf, sizeof buf, "%s", s);
        Py_DECREF(n);
    }
    PyErr_Clear();
    return buf;
}

static int mul_ok(size_t a, size_t b, size_t *out)
{
    if (a && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* Calls obj.__dlpack__(stream=..., max_version=(1, 1)[, copy=False]) as the DLPack Python
 * specification describes: `stream` (NULL: not passed) only for CUDA producers, and copy=False for
 * arrays lofp writes into (a copy would lose the writes). Producers older than max_version (the
 * 2023.12 API) raise TypeError on the new keywords and are called again with `stream` alone.
 * Returns a new reference to the capsule. */
static PyObject *call_dlpack(PyObject *obj, PyObject *stream, int writable)
{
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (!meth) return NULL;
    PyObject *args = PyTuple_New(0), *kw = PyDict_New(), *cap = NULL;
    if (!args || !kw) goto out;
    if (stream && stream != Py_None && PyDict_SetItemString(kw, "stream", stream) < 0) goto out;
    PyObject *ver = Py_BuildValue("(ii)", 1, 1);
    if (!ver || PyDict_SetItemString(kw, "max_version", ver) < 0) { Py_XDECREF(ver); goto out; }
    Py_DECREF(ver);
    if (writable && PyDict_SetItemString(kw, "copy", Py_False) < 0) goto out;
    cap = PyObject_Call(meth, args, kw);
    if (!cap && writable && PyErr_ExceptionMatches(PyExc_Exception)) {
        /* a producer that takes max_version but not copy=False (or refuses it): without copy, a
         * versioned capsule still says IS_COPIED when the producer copied, which held_get refuses */
        PyErr_Clear();
        PyDict_DelItemString(kw, "copy");
        cap = PyObject_Call(meth, args, kw);
    }
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyDict_DelItemString(kw, "max_version");
        cap = PyObject_Call(meth, args, kw);
    }
out:
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(meth);
    return cap;
}

/* lofp._lofp.DLTensor: a DLPack tensor taken over from its producer. The capsule is renamed
 * "used_dltensor[_versioned]" as the specification asks of a consumer, so the producer's capsule
 * destructor no longer frees it; this object calls the tensor's deleter when it dies instead.
 * The Python layer makes one (from_dlpack) to learn a foreign array's shape, dtype and device
 * with a single __dlpack__ call, then passes it to the functions below like any array. */
typedef struct {
    PyObject_HEAD
    void *managed;   /* DLManagedTensorVersioned or DLManagedTensor; NULL once released */
    int versioned;
    DLTensor *t;
    uint64_t flags;  /* versioned only */
    size_t nbytes;
    int contiguous;
} dlheld_t;

static PyTypeObject *DLHeldType;

static void dlheld_free_managed(dlheld_t *h)
{
    void *m = h->managed;
    h->managed = NULL;
    h->t = NULL;
    if (!m) return;
    /* The deleter may run Python code (a producer's Py_DECREF): keep a pending error out of it. */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (h->versioned) {
        DLManagedTensorVersioned *mv = m;
        if (mv->deleter) mv->deleter(mv);
    } else {
        DLManagedTensor *ml = m;
        if (ml->deleter) ml->deleter(ml);
    }
    PyErr_Restore(et, ev, tb);
}

static void dlheld_dealloc(PyObject *self)
{
    dlheld_free_managed((dlheld_t *)self);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *dlheld_live(dlheld_t *h)
{
    if (!h->t) { PyErr_SetString(PyExc_ValueError, "this DLPack tensor was released"); return NULL; }
    return (PyObject *)h;
}

static PyObject *dlheld_shape(PyObject *self, void *c)
{
    dlheld_t *h = (dlheld_t *)self;
    if (!dlheld_live(h)) return NULL;
    PyObject *r = PyTuple_New(h->t->ndim);
    for (int i = 0; r && i < h->t->ndim; i++) {
        PyObject *d = PyLong_FromLongLong(h->t->shape[i]);
        if (!d || PyTuple_SetItem(r, i, d) < 0) { Py_CLEAR(r); }
    }
    return r;
}

static PyObject *dlheld_dtype(PyObject *self, void *c)
{
    dlheld_t *h = (dlheld_t *)self;
    if (!dlheld_live(h)) return NULL;
    return Py_BuildValue("(iii)", (int)h->t->dtype.code, (int)h->t->dtype.bits, (int)h->t->dtype.lanes);
}

static PyObject *dlheld_device(PyObject *self, void *c)
{
    dlheld_t *h = (dlheld_t *)self;
    if (!dlheld_live(h)) return NULL;
    return Py_BuildValue("(ii)", (int)h->t->device.device_type, (int)h->t->device.device_id);
}

static PyObject *dlheld_info(PyObject *self, void *c)
{
    dlheld_t *h = (dlheld_t *)self;
    if (!dlheld_live(h)) return NULL;
    return Py_BuildValue("{s:n,s:O,s:O,s:O,s:K}", "nbytes", (Py_ssize_t)h->nbytes, "contiguous", h->contiguous ? Py_True : Py_False,
                         "versioned", h->versioned ? Py_True : Py_False,
                         "readonly", (h->flags & DL_FLAG_READ_ONLY) ? Py_True : Py_False, "flags", (unsigned long long)h->flags);
}

static PyObject *dlheld_release(PyObject *self, PyObject *unused)
{
    dlheld_free_managed((dlheld_t *)self);
    Py_RETURN_NONE;
}

static PyGetSetDef dlheld_getset[] = {
    {"shape", dlheld_shape, NULL, "the shape, a tuple of ints", NULL},
    {"dtype", dlheld_dtype, NULL, "(DLPack type code, bits, lanes)", NULL},
    {"device", dlheld_device, NULL, "(DLPack device type, device id)", NULL},
    {"info", dlheld_info, NULL, "dict: nbytes, contiguous, versioned, readonly, flags", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef dlheld_methods[] = {
    {"release", dlheld_release, METH_NOARGS, "release(): runs the producer's deleter now (the object is unusable after)"},
    {NULL, NULL, 0, NULL}};

static PyType_Slot dlheld_slots[] = {
    {Py_tp_dealloc, (void *)dlheld_dealloc},
    {Py_tp_getset, dlheld_getset},
    {Py_tp_methods, dlheld_methods},
    {Py_tp_doc, (void *)"A DLPack tensor consumed from its producer (lofp._lofp.from_dlpack); the producer's deleter runs "
                        "when this object dies."},
    {0, NULL}};

#ifdef Py_TPFLAGS_DISALLOW_INSTANTIATION
#define DLHELD_FLAGS (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION)
#else
#define DLHELD_FLAGS Py_TPFLAGS_DEFAULT
#endif
static PyType_Spec dlheld_spec = {"lofp._lofp.DLTensor", sizeof(dlheld_t), 0, DLHELD_FLAGS, dlheld_slots};

/* Consumes obj's DLPack capsule into a DLTensor object. `stream`: the consumer stream for CUDA
 * producers (NULL otherwise). Refusals before consuming (not a capsule, an unknown major version)
 * leave the capsule to its producer's destructor. */
static PyObject *dl_import(PyObject *obj, const char *name, int writable, PyObject *stream)
{
    PyObject *cap = call_dlpack(obj, stream, writable);
    if (!cap) return NULL;
    void *m = NULL;
    int versioned = 0;
    uint64_t flags = 0;
    DLTensor *t = NULL;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *mv = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (!mv) { Py_DECREF(cap); return NULL; }
        if (mv->version.major != 1) {
            Py_DECREF(cap);
            return raise_error(LOFP_ERR_UNSUPPORTED, -1, "%s: DLPack major version %u (this build reads 1)", name, mv->version.major);
        }
        m = mv, versioned = 1, flags = mv->flags, t = &mv->dl_tensor;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *ml = PyCapsule_GetPointer(cap, "dltensor");
        if (!ml) { Py_DECREF(cap); return NULL; }
        m = ml, t = &ml->dl_tensor;
    } else {
        Py_DECREF(cap);
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: __dlpack__ returned something that is not an unconsumed DLPack capsule", name);
    }
    dlheld_t *h = (dlheld_t *)PyType_GenericAlloc(DLHeldType, 0);
    if (!h) { Py_DECREF(cap); return NULL; }
    if (PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor") < 0) {
        Py_DECREF(h);
        Py_DECREF(cap);
        return NULL;
    }
    /* From here the tensor is ours: h frees it (its deleter) whatever happens next. */
    h->managed = m, h->versioned = versioned, h->flags = flags, h->t = t;
    Py_DECREF(cap);
    size_t numel = 1;
    int64_t expect = 1;
    int contiguous = 1;
    if (t->ndim < 0 || (t->ndim > 0 && !t->shape)) {
        Py_DECREF(h);
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: DLPack tensor with ndim %d and no shape", name, (int)t->ndim);
    }
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] < 0 || !mul_ok(numel, (size_t)t->shape[i], &numel)) {
            Py_DECREF(h);
            return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "%s: bad shape", name);
        }
        if (t->strides && t->shape[i] != 1 && t->strides[i] != expect) contiguous = 0;
        expect *= t->shape[i];
    }
    size_t bits = (size_t)t->dtype.bits * (t->dtype.lanes ? t->dtype.lanes : 1), total;
    if (!mul_ok(numel, bits, &total)) {
        Py_DECREF(h);
        return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "%s: size overflows", name);
    }
    h->nbytes = (total + 7) / 8;
    h->contiguous = contiguous || numel == 0;
    return (PyObject *)h;
}

/* Fills `a` from a consumed DLPack tensor, checking device, writability and contiguity. */
static int held_get(PyObject *o, const char *name, int writable, int want, arr_t *a)
{
    dlheld_t *h = (dlheld_t *)o;
    if (!h->t) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: the DLPack tensor was released", name);
        return -1;
    }
    DLTensor *t = h->t;
    int dev = t->device.device_type;
    int is_cuda = dev == DL_CUDA || dev == DL_CUDA_MANAGED;
    int is_cpu = dev == DL_CPU || dev == DL_CUDA_HOST;
    if (want == WANT_CUDA ? !is_cuda : !is_cpu) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is on DLPack device type %d, expected %s", name, dev,
                    want == WANT_CUDA ? "CUDA" : "the CPU");
        return -1;
    }
    if (writable && (h->flags & DL_FLAG_READ_ONLY)) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is read-only", name);
        return -1;
    }
    if (writable && (h->flags & DL_FLAG_IS_COPIED)) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s was copied by its DLPack producer; lofp fills outputs in place", name);
        return -1;
    }
    if (!h->contiguous) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is not C-contiguous", name);
        return -1;
    }
    a->nbytes = h->nbytes;
    a->ptr = (char *)t->data + t->byte_offset;
    a->cuda = is_cuda;
    a->device_id = t->device.device_id;
    a->capsule = Py_NewRef(o);
    return 0;
}

/* The DLPack device type obj reports (__dlpack_device__), or 0 when it has no such method. */
static int dl_device_type(PyObject *obj, const char *name, int *type)
{
    *type = 0;
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack_device__");
    if (!meth) { PyErr_Clear(); return 0; }
    PyObject *r = PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    if (!r) return -1;
    PyObject *d0 = PySequence_Check(r) && PySequence_Size(r) == 2 ? PySequence_GetItem(r, 0) : NULL;
    int ok = d0 != NULL;
    long v = ok ? PyLong_AsLong(d0) : -1;
    Py_XDECREF(d0);
    Py_DECREF(r);
    if (!ok || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: __dlpack_device__() did not return (device_type, device_id)", name);
        return -1;
    }
    *type = (int)v;
    return 0;
}

static int torch_get(PyObject *o, const char *name, int want, arr_t *a)
{
    PyObject *r = PyObject_CallMethod(o, "is_contiguous", NULL);
    if (!r) return -1;
    int contiguous = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (contiguous <= 0) {
        if (contiguous == 0) raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is not contiguous", name);
        return -1;
    }
    r = PyObject_CallMethod(o, "get_device", NULL);
    if (!r) return -1;
    long dev = PyLong_AsLong(r);
    Py_DECREF(r);
    if (dev == -1 && PyErr_Occurred()) return -1;
    if (want == WANT_CUDA ? dev < 0 : dev >= 0) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is on %s, expected %s", name, dev < 0 ? "the CPU" : "a CUDA device",
                    want == WANT_CUDA ? "CUDA" : "the CPU");
        return -1;
    }
    r = PyObject_GetAttrString(o, "nbytes");
    if (!r) return -1;
    size_t nb = PyLong_AsSize_t(r);
    Py_DECREF(r);
    if (nb == (size_t)-1 && PyErr_Occurred()) return -1;
    r = PyObject_CallMethod(o, "data_ptr", NULL);
    if (!r) return -1;
    void *p = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    if (!p && PyErr_Occurred()) return -1;
    a->ptr = p;
    a->nbytes = nb;
    a->cuda = dev >= 0;
    a->device_id = dev >= 0 ? (int)dev : 0;
    a->capsule = Py_NewRef(o); /* keeps the tensor alive for the call */
    return 0;
}

/* Acquires a contiguous array from a buffer-protocol object or a DLPack producer.
 * `want`: WANT_CPU or WANT_CUDA. `stream`: the consumer stream passed to __dlpack__ for CUDA. */
static int arr_get(PyObject *o, const char *name, int writable, int want, PyObject *stream, arr_t *a)
{
    memset(a, 0, sizeof *a);
    if (o == NULL || o == Py_None) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is missing", name);
        return -1;
    }
    if (Py_TYPE(o) == DLHeldType) return held_get(o, name, writable, want, a);
    if (PyObject_CheckBuffer(o)) {
        if (want != WANT_CPU) {
            raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is a host buffer (%s) but the other operands are on CUDA", name, type_name(o));
            return -1;
        }
        int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(o, &a->view, flags) == 0) {
            a->has_view = 1;
            a->ptr = a->view.buf;
            a->nbytes = (size_t)a->view.len;
            return 0;
        }
        PyErr_Clear();
        if (!PyObject_HasAttrString(o, "__dlpack__")) {
            raise_error(LOFP_ERR_INVALID_ARG, -1, "%s (%s) is not a C-contiguous%s buffer", name, type_name(o),
                        writable ? " writable" : "");
            return -1;
        }
    }
    if (TorchTensorType && !DlpackOnly && PyObject_TypeCheck(o, (PyTypeObject *)TorchTensorType))
        return torch_get(o, name, want, a);
    if (!PyObject_HasAttrString(o, "__dlpack__")) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: expected an array (buffer protocol or DLPack), got %s", name, type_name(o));
        return -1;
    }
    /* Ask for the device first (the specification's order): the stream goes only to CUDA
     * producers, and an array on the wrong device is refused before anything is exported. */
    int dev;
    if (dl_device_type(o, name, &dev)) return -1;
    if (dev) {
        int is_cuda = dev == DL_CUDA || dev == DL_CUDA_MANAGED;
        int is_cpu = dev == DL_CPU || dev == DL_CUDA_HOST;
        if (want == WANT_CUDA ? !is_cuda : !is_cpu) {
            raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is on DLPack device type %d, expected %s", name, dev,
                        want == WANT_CUDA ? "CUDA" : "the CPU");
            return -1;
        }
    }
    PyObject *h = dl_import(o, name, writable, want == WANT_CUDA ? stream : NULL);
    if (!h) return -1;
    int r = held_get(h, name, writable, want, a);
    Py_DECREF(h); /* a->capsule holds it for the call when held_get succeeded */
    return r;
}

static int arr_need(const arr_t *a, const char *name, size_t want)
{
    if (a->nbytes != want) {
        raise_error(LOFP_ERR_BUFFER_TOO_SMALL, -1, "%s has %zu bytes, expected %zu", name, a->nbytes, want);
        return -1;
    }
    return 0;
}

static int arr_need_at_least(const arr_t *a, const char *name, size_t want)
{
    if (a->nbytes < want) {
        raise_error(LOFP_ERR_BUFFER_TOO_SMALL, -1, "%s has %zu bytes, needs at least %zu", name, a->nbytes, want);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */

static int get_scheme(PyObject *blob, lofp_scheme *s)
{
    char *p;
    Py_ssize_t n;
    if (!PyBytes_Check(blob) || PyBytes_AsStringAndSize(blob, &p, &n) < 0 || (size_t)n != sizeof *s) {
        PyErr_Clear();
        raise_error(LOFP_ERR_INVALID_ARG, -1, "not a scheme made by lofp.scheme()");
        return -1;
    }
    memcpy(s, p, sizeof *s);
    return 0;
}

static size_t dtype_size(int dt)
{
    return dt == LOFP_DTYPE_F32 ? 4 : (dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F16) ? 2 : 0;
}

static int check_dtype(int dt)
{
    if (!dtype_size(dt)) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "unknown dense dtype code %d", dt);
        return -1;
    }
    return 0;
}

static int check_sizes(Py_ssize_t a, Py_ssize_t b, const char *what)
{
    if (a <= 0 || b <= 0) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is empty", what);
        return -1;
    }
    return 0;
}

static int opt_str(PyObject *o, const char **out)
{
    *out = NULL;
    if (o == Py_None) return 0;
    Py_ssize_t n;
    *out = PyUnicode_AsUTF8AndSize(o, &n);
    return *out ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Module functions: version, names                                                            */
/* ------------------------------------------------------------------------------------------ */

static PyObject *py_noop(PyObject *self, PyObject *args) { Py_RETURN_NONE; }

static PyObject *py_register_tensor_type(PyObject *self, PyObject *args)
{
    PyObject *t;
    if (!PyArg_ParseTuple(args, "O", &t)) return NULL;
    if (!PyType_Check(t)) return raise_error(LOFP_ERR_INVALID_ARG, -1, "not a type");
    PyObject *old = TorchTensorType;
    TorchTensorType = Py_NewRef(t);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* tensor_path("direct" | "dlpack") -> the previous mode */
static PyObject *py_tensor_path(PyObject *self, PyObject *args)
{
    const char *m = NULL;
    if (!PyArg_ParseTuple(args, "|s", &m)) return NULL;
    const char *prev = DlpackOnly ? "dlpack" : "direct";
    if (m) {
        if (!strcmp(m, "dlpack")) DlpackOnly = 1;
        else if (!strcmp(m, "direct")) DlpackOnly = 0;
        else return raise_error(LOFP_ERR_NOT_FOUND, -1, "tensor path is 'direct' or 'dlpack'");
    }
    return PyUnicode_FromString(prev);
}

/* from_dlpack(obj, name, stream|None, writable) -> DLTensor: consumes obj's DLPack capsule (one
 * __dlpack__ call, with `stream` for a CUDA producer) so that Python can read its shape, dtype
 * and device; the DLTensor is then passed wherever an array is expected. */
static PyObject *py_from_dlpack(PyObject *self, PyObject *args)
{
    PyObject *o, *stream = Py_None;
    const char *name;
    int writable = 0;
    if (!PyArg_ParseTuple(args, "Os|Op", &o, &name, &stream, &writable)) return NULL;
    if (Py_TYPE(o) == DLHeldType) return Py_NewRef(o);
    if (!PyObject_HasAttrString(o, "__dlpack__"))
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: expected a DLPack producer, got %s", name, type_name(o));
    return dl_import(o, name, writable, stream == Py_None ? NULL : stream);
}

static PyObject *py_version(PyObject *self, PyObject *args) { return PyUnicode_FromString(lofp_version()); }

static PyObject *py_kernel_name(PyObject *self, PyObject *args)
{
    PyObject *blob;
    int op;
    lofp_scheme s;
    if (!PyArg_ParseTuple(args, "Oi", &blob, &op) || get_scheme(blob, &s)) return NULL;
    const char *n = lofp_kernel_name(s.id, (lofp_kernel_op)op);
    if (!n) return raise_error(LOFP_ERR_INVALID_ARG, -1, "no kernel for this operation");
    return PyUnicode_FromString(n);
}

/* scheme(name, rounding, scale_rule, block, two_level, pad, propagate_nonfinite, c, rotate,
 *        hadamard, seed) -> bytes: a validated lofp_scheme. None keeps the preset's value. */
static PyObject *py_scheme(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *rounding, *rule, *block, *two_level, *pad, *prop, *c, *rotate, *hadamard, *seed, *profile = Py_None;
    if (!PyArg_ParseTuple(args, "sOOOOOOOOOO|O", &name, &rounding, &rule, &block, &two_level, &pad, &prop, &c,
                          &rotate, &hadamard, &seed, &profile))
        return NULL;
    lofp_scheme s;
    if (lofp_scheme_preset(name, &s) != LOFP_OK)
        return raise_error(LOFP_ERR_NOT_FOUND, -1,
                           "unknown scheme '%s' (nvfp4, mxfp4, mxfp6-e2m3, mxfp6-e3m2, mxfp8-e4m3, mxfp8-e5m2, mxint8, "
                           "tilelang-mxfp8, ultraquant)", name);
    const char *str;
    if (opt_str(rounding, &str)) return NULL;
    if (str && lofp_rounding_from_name(str, &s.rounding) != LOFP_OK)
        return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown rounding '%s' (rne, ties-to-zero, ties-away, stochastic)", str);
    if (opt_str(rule, &str)) return NULL;
    if (str && lofp_scale_rule_from_name(str, &s.scale_rule) != LOFP_OK)
        return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown scale rule '%s' (floor, ceil, even, rceil, ue4m3, uq-round)", str);
    if (block != Py_None) {
        long b = PyLong_AsLong(block);
        if (b == -1 && PyErr_Occurred()) return NULL;
        if (b <= 0 || b > (long)UINT32_MAX) return raise_error(LOFP_ERR_INVALID_ARG, -1, "block must be a positive integer, got %ld", b);
        s.block = (uint32_t)b;
    }
#define FLAG(o, field) if (o != Py_None) { int v = PyObject_IsTrue(o); if (v < 0) return NULL; s.field = v; }
    FLAG(two_level, two_level);
    FLAG(pad, pad);
    FLAG(prop, propagate_nonfinite);
    FLAG(rotate, rotate);
#undef FLAG
    if (c != Py_None) {
        double v = PyFloat_AsDouble(c);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        s.c = (float)v;
    }
    if (opt_str(hadamard, &str)) return NULL;
    if (str) {
        if (!strcmp(str, "butterfly")) s.hadamard = LOFP_HADAMARD_BUTTERFLY;
        else if (!strcmp(str, "dense")) s.hadamard = LOFP_HADAMARD_DENSE;
        else return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown hadamard '%s' (butterfly, dense)", str);
    }
    if (seed != Py_None) {
        unsigned long long v = PyLong_AsUnsignedLongLong(seed);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        s.seed = v;
    }
    if (opt_str(profile, &str)) return NULL;
    if (str && lofp_profile_from_name(str, &s.profile) != LOFP_OK)
        return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown profile '%s' (lofp, modelopt, compressed-tensors, torchao, ggml)", str);
    s.threads = 1;
    if (lofp_scheme_validate(&s) != LOFP_OK)
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "invalid options for %s (block %u, scale rule %s, c %g, profile %s)", name,
                           s.block, lofp_scale_rule_name(s.scale_rule) ? lofp_scale_rule_name(s.scale_rule) : "?", (double)s.c,
                           lofp_profile_name(s.profile) ? lofp_profile_name(s.profile) : "?");
    return PyBytes_FromStringAndSize((const char *)&s, sizeof s);
}

/* scheme_info(blob) -> dict of the scheme's fields, with names for enums. */
static PyObject *py_scheme_info(PyObject *self, PyObject *args)
{
    PyObject *blob;
    lofp_scheme s;
    if (!PyArg_ParseTuple(args, "O", &blob) || get_scheme(blob, &s)) return NULL;
    const lofp_elem_info *e = lofp_elem_info_get(s.elem), *se = lofp_elem_info_get(s.scale_elem);
    return Py_BuildValue("{s:s,s:i,s:s,s:s,s:i,s:s,s:i,s:I,s:s,s:s,s:i,s:i,s:i,s:d,s:i,s:d,s:i,s:s,s:K}",
                         "profile", lofp_profile_name(s.profile) ? lofp_profile_name(s.profile) : "?",
                         "decode_direction", lofp_profile_decode_direction(s.profile),
                         "name", lofp_scheme_name(s.id), "elem", e ? e->name : "?", "elem_bits", e ? (int)e->bits : 0,
                         "scale_elem", se ? se->name : "?", "id", (int)s.id, "block", s.block,
                         "scale_rule", lofp_scale_rule_name(s.scale_rule), "rounding", lofp_rounding_name(s.rounding),
                         "two_level", s.two_level, "pad", s.pad, "propagate_nonfinite", s.propagate_nonfinite,
                         "amax_floor", (double)s.amax_floor, "ceil_clamp", s.ceil_clamp, "c", (double)s.c,
                         "rotate", s.rotate, "hadamard", s.hadamard == LOFP_HADAMARD_DENSE ? "dense" : "butterfly",
                         "seed", (unsigned long long)s.seed);
}

/* sizes(blob, rows, k) -> (padded_k, codes_bytes, scales_bytes) */
static PyObject *py_sizes(PyObject *self, PyObject *args)
{
    PyObject *blob;
    Py_ssize_t rows, k;
    lofp_scheme s;
    if (!PyArg_ParseTuple(args, "Onn", &blob, &rows, &k) || get_scheme(blob, &s)) return NULL;
    if (check_sizes(rows, k, "the tensor")) return NULL;
    size_t kp = lofp_padded_k(&s, (size_t)k);
    if (!kp) {
        if (!s.pad && k % s.block)
            return raise_error(LOFP_ERR_SHAPE, -1, "last dimension %zd is not a multiple of the block %u (pass pad=True)", k, s.block);
        return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "[%zd, %zd] overflows", rows, k);
    }
    size_t cb = lofp_codes_bytes(&s, (size_t)rows, (size_t)k), sb = lofp_scales_bytes(&s, (size_t)rows, (size_t)k);
    if (!cb || !sb) return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "[%zd, %zd] overflows", rows, k);
    return Py_BuildValue("(nnn)", (Py_ssize_t)kp, (Py_ssize_t)cb, (Py_ssize_t)sb);
}

/* ------------------------------------------------------------------------------------------ */
/* Quantize / dequantize (CPU)                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* quantize(blob, dt, x, rows, k, codes, scales, global_in|None, threads)
 *   -> (global_scale, nonfinite_blocks, padded_k) */
static PyObject *py_quantize(PyObject *self, PyObject *args)
{
    PyObject *blob, *xo, *co, *so, *gin;
    int dt;
    Py_ssize_t rows, k;
    unsigned threads;
    lofp_scheme s;
    if (!PyArg_ParseTuple(args, "OiOnnOOOI", &blob, &dt, &xo, &rows, &k, &co, &so, &gin, &threads)) return NULL;
    if (get_scheme(blob, &s) || check_dtype(dt) || check_sizes(rows, k, "x")) return NULL;
    s.threads = threads;
    float gval = 0;
    if (gin != Py_None) {
        double g = PyFloat_AsDouble(gin);
        if (g == -1.0 && PyErr_Occurred()) return NULL;
        gval = (float)g;
        if (!(isfinite(gval) && gval > 0)) return raise_error(LOFP_ERR_INVALID_ARG, -1, "global_scale must be finite and > 0, got %g", g);
    }
    size_t kp = lofp_padded_k(&s, (size_t)k);
    if (!kp) return raise_error(LOFP_ERR_SHAPE, -1, "last dimension %zd is not a multiple of the block %u (pass pad=True)", k, s.block);
    size_t cb = lofp_codes_bytes(&s, (size_t)rows, (size_t)k), sb = lofp_scales_bytes(&s, (size_t)rows, (size_t)k), xb;
    if (!cb || !sb || !mul_ok((size_t)rows, (size_t)k, &xb) || !mul_ok(xb, dtype_size(dt), &xb))
        return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "[%zd, %zd] overflows", rows, k);
    arr_t x, c, sc;
    if (arr_get(xo, "x", 0, WANT_CPU, NULL, &x)) return NULL;
    if (arr_get(co, "codes", 1, WANT_CPU, NULL, &c)) { arr_release(&x); return NULL; }
    if (arr_get(so, "scales", 1, WANT_CPU, NULL, &sc)) { arr_release(&x); arr_release(&c); return NULL; }
    PyObject *ret = NULL;
    if (arr_need(&x, "x", xb) || arr_need(&c, "codes", cb) || arr_need(&sc, "scales", sb)) goto out;
    lofp_quant_report rep;
    memset(&rep, 0, sizeof rep);
    float global = 1.0f;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    if (gin != Py_None) {
        st = lofp_quantize_with_global(&s, (lofp_dtype)dt, x.ptr, (size_t)rows, (size_t)k, gval, (uint8_t *)c.ptr,
                                       (uint8_t *)sc.ptr, &rep);
        global = s.id == LOFP_SCHEME_NVFP4 ? gval : 1.0f;
    } else {
        st = lofp_quantize(&s, (lofp_dtype)dt, x.ptr, (size_t)rows, (size_t)k, (uint8_t *)c.ptr, (uint8_t *)sc.ptr, &global, &rep);
    }
    Py_END_ALLOW_THREADS
    if (st == LOFP_ERR_NONFINITE) {
        raise_error(st, (long long)rep.first_bad_index, "x has a non-finite value at flat index %zu%s", rep.first_bad_index,
                    s.id == LOFP_SCHEME_NVFP4 ? "" : " (pass propagate_nonfinite=True to keep going)");
        goto out;
    }
    if (st != LOFP_OK) { raise_call(st, "quantize"); goto out; }
    ret = Py_BuildValue("(dnn)", (double)global, (Py_ssize_t)rep.nonfinite_blocks, (Py_ssize_t)rep.padded_k);
out:
    arr_release(&x); arr_release(&c); arr_release(&sc);
    return ret;
}

/* quantize_method(blob, dt, x, rows, k, codes, scales, global_in|None, threads, method,
 *                 importance|None, hessian|None, damp, act_order) -> (global_scale, padded_k)
 * method 1 = MSE (importance: k float32, or None), 2 = GPTQ (hessian: k*k float32; the factor
 * is prepared here, per call). global_in None: the tensor's own NVFP4 multiplier. */
static PyObject *py_quantize_method(PyObject *self, PyObject *args)
{
    PyObject *blob, *xo, *co, *so, *gin, *impo, *heso;
    int dt, method, act_order, mse_scales;
    Py_ssize_t rows, k;
    unsigned threads;
    double damp;
    lofp_scheme s;
    if (!PyArg_ParseTuple(args, "OiOnnOOOIiOOdpp", &blob, &dt, &xo, &rows, &k, &co, &so, &gin, &threads, &method,
                          &impo, &heso, &damp, &act_order, &mse_scales))
        return NULL;
    if (get_scheme(blob, &s) || check_dtype(dt) || check_sizes(rows, k, "x")) return NULL;
    if (method != LOFP_METHOD_MSE && method != LOFP_METHOD_GPTQ)
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "method must be mse or gptq here");
    s.threads = threads;
    size_t kp = lofp_padded_k(&s, (size_t)k);
    if (!kp) return raise_error(LOFP_ERR_SHAPE, -1, "last dimension %zd is not a multiple of the block %u (pass pad=True)", k, s.block);
    size_t cb = lofp_codes_bytes(&s, (size_t)rows, (size_t)k), sb = lofp_scales_bytes(&s, (size_t)rows, (size_t)k), xb, hb;
    if (!cb || !sb || !mul_ok((size_t)rows, (size_t)k, &xb) || !mul_ok(xb, dtype_size(dt), &xb) ||
        !mul_ok((size_t)k, (size_t)k, &hb) || !mul_ok(hb, sizeof(float), &hb))
        return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "[%zd, %zd] overflows", rows, k);
    arr_t x, c, sc, aux;
    memset(&aux, 0, sizeof aux);
    if (arr_get(xo, "x", 0, WANT_CPU, NULL, &x)) return NULL;
    if (arr_get(co, "codes", 1, WANT_CPU, NULL, &c)) { arr_release(&x); return NULL; }
    if (arr_get(so, "scales", 1, WANT_CPU, NULL, &sc)) { arr_release(&x); arr_release(&c); return NULL; }
    PyObject *ret = NULL;
    lofp_gptq_factor f;
    memset(&f, 0, sizeof f);
    if (arr_need(&x, "x", xb) || arr_need(&c, "codes", cb) || arr_need(&sc, "scales", sb)) goto out;
    PyObject *auxo = method == LOFP_METHOD_MSE ? impo : heso;
    if (auxo != Py_None) {
        if (arr_get(auxo, method == LOFP_METHOD_MSE ? "importance" : "hessian", 0, WANT_CPU, NULL, &aux)) goto out;
        if (arr_need(&aux, method == LOFP_METHOD_MSE ? "importance" : "hessian",
                     method == LOFP_METHOD_MSE ? (size_t)k * sizeof(float) : hb))
            goto out;
    } else if (method == LOFP_METHOD_GPTQ) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "method gptq needs hessian");
        goto out;
    }
    float gval = 1.0f;
    if (gin != Py_None) {
        double g = PyFloat_AsDouble(gin);
        if (g == -1.0 && PyErr_Occurred()) goto out;
        gval = (float)g;
        if (!(isfinite(gval) && gval > 0)) { raise_error(LOFP_ERR_INVALID_ARG, -1, "global_scale must be finite and > 0, got %g", g); goto out; }
    } else if (s.id == LOFP_SCHEME_NVFP4 && s.two_level) {
        gval = lofp_nvfp4_global_scale((lofp_dtype)dt, x.ptr, (size_t)rows * (size_t)k);
        if (!isfinite(gval)) { raise_error(LOFP_ERR_NONFINITE, -1, "x has a non-finite value"); goto out; }
    }
    if (s.id != LOFP_SCHEME_NVFP4) gval = 1.0f;
    lofp_quant_report rep;
    memset(&rep, 0, sizeof rep);
    lofp_status st;
    const char *what = "quantize";
    if (method == LOFP_METHOD_GPTQ) {
        f.k = (size_t)k;
        f.u = malloc(hb);
        f.perm = malloc((size_t)k * sizeof(uint32_t));
        f.dead = malloc((size_t)k);
        f.hdiag = malloc((size_t)k * sizeof(float));
        if (!f.u || !f.perm || !f.dead || !f.hdiag) { PyErr_NoMemory(); goto out; }
    }
    Py_BEGIN_ALLOW_THREADS
    if (method == LOFP_METHOD_MSE) {
        st = lofp_mse_quantize_rows(&s, (lofp_dtype)dt, x.ptr, 0, (size_t)rows, (size_t)k, gval,
                                    auxo != Py_None ? (const float *)(const void *)aux.ptr : NULL,
                                    LOFP_MSE_WINDOW_DEFAULT, (uint8_t *)c.ptr, (uint8_t *)sc.ptr, NULL, &rep);
    } else {
        lofp_gptq_options o;
        lofp_gptq_options_init(&o);
        o.damp = damp;
        o.act_order = act_order;
        o.mse_scales = mse_scales;
        o.threads = threads;
        st = lofp_gptq_prepare((const float *)(const void *)aux.ptr, (size_t)k, &o, &f);
        if (st != LOFP_OK) what = "gptq prepare (is hessian finite, symmetric and positive definite after damping?)";
        else st = lofp_gptq_quantize_rows(&s, (lofp_dtype)dt, x.ptr, 0, (size_t)rows, (size_t)k, gval, &f, &o,
                                          (uint8_t *)c.ptr, (uint8_t *)sc.ptr, &rep);
    }
    Py_END_ALLOW_THREADS
    if (st == LOFP_ERR_NONFINITE) {
        raise_error(st, (long long)rep.first_bad_index, "x has a non-finite value at flat index %zu", rep.first_bad_index);
        goto out;
    }
    if (st != LOFP_OK) { raise_call(st, what); goto out; }
    ret = Py_BuildValue("(dn)", (double)gval, (Py_ssize_t)kp);
out:
    free(f.u); free(f.perm); free(f.dead); free(f.hdiag);
    arr_release(&x); arr_release(&c); arr_release(&sc); arr_release(&aux);
    return ret;
}

/* dequantize(blob, codes, scales, global, rows, k, out_dt, out, threads) */
static PyObject *py_dequantize(PyObject *self, PyObject *args)
{
    PyObject *blob, *co, *so, *oo;
    double g;
    int dt;
    Py_ssize_t rows, k;
    unsigned threads;
    lofp_scheme s;
    if (!PyArg_ParseTuple(args, "OOOdnniOI", &blob, &co, &so, &g, &rows, &k, &dt, &oo, &threads)) return NULL;
    if (get_scheme(blob, &s) || check_dtype(dt) || check_sizes(rows, k, "the tensor")) return NULL;
    s.threads = threads;
    size_t kp = lofp_padded_k(&s, (size_t)k);
    if (!kp) return raise_error(LOFP_ERR_SHAPE, -1, "K %zd is not a multiple of the block %u and the scheme does not pad", k, s.block);
    if (s.id == LOFP_SCHEME_NVFP4 && !(isfinite(g) && g > 0))
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "global_scale must be finite and > 0, got %g", g);
    size_t cb = lofp_codes_bytes(&s, (size_t)rows, (size_t)k), sb = lofp_scales_bytes(&s, (size_t)rows, (size_t)k), ob;
    if (!cb || !sb || !mul_ok((size_t)rows, (size_t)k, &ob) || !mul_ok(ob, dtype_size(dt), &ob))
        return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "[%zd, %zd] overflows", rows, k);
    arr_t c, sc, o;
    if (arr_get(co, "codes", 0, WANT_CPU, NULL, &c)) return NULL;
    if (arr_get(so, "scales", 0, WANT_CPU, NULL, &sc)) { arr_release(&c); return NULL; }
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) { arr_release(&c); arr_release(&sc); return NULL; }
    PyObject *ret = NULL;
    if (arr_need(&c, "codes", cb) || arr_need(&sc, "scales", sb) || arr_need(&o, "out", ob)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_dequantize(&s, (uint8_t *)c.ptr, (uint8_t *)sc.ptr, (float)g, (size_t)rows, (size_t)k, (lofp_dtype)dt, o.ptr);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "dequantize"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&c); arr_release(&sc); arr_release(&o);
    return ret;
}

/* nvfp4_scales(dt, x) -> (encode_global, decode_scale) of a whole tensor */
static PyObject *py_nvfp4_scales(PyObject *self, PyObject *args)
{
    int dt;
    PyObject *xo;
    if (!PyArg_ParseTuple(args, "iO", &dt, &xo) || check_dtype(dt)) return NULL;
    arr_t x;
    if (arr_get(xo, "x", 0, WANT_CPU, NULL, &x)) return NULL;
    float e, d;
    size_t n = x.nbytes / dtype_size(dt);
    Py_BEGIN_ALLOW_THREADS
    e = lofp_nvfp4_global_scale((lofp_dtype)dt, x.ptr, n);
    d = lofp_nvfp4_decode_scale((lofp_dtype)dt, x.ptr, n);
    Py_END_ALLOW_THREADS
    arr_release(&x);
    return Py_BuildValue("(dd)", (double)e, (double)d);
}

static PyObject *py_decode_from_encode(PyObject *self, PyObject *args)
{
    double g;
    if (!PyArg_ParseTuple(args, "d", &g)) return NULL;
    return PyFloat_FromDouble((double)lofp_nvfp4_decode_from_encode((float)g));
}

static PyObject *py_encode_from_decode(PyObject *self, PyObject *args)
{
    double g;
    if (!PyArg_ParseTuple(args, "d", &g)) return NULL;
    return PyFloat_FromDouble((double)lofp_nvfp4_encode_from_decode((float)g));
}

/* ------------------------------------------------------------------------------------------ */
/* Element codecs                                                                              */
/* ------------------------------------------------------------------------------------------ */

static int get_elem(const char *name, lofp_elem *t, const lofp_elem_info **info)
{
    if (lofp_elem_from_name(name, t) != LOFP_OK || !(*info = lofp_elem_info_get(*t))) {
        raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown element type '%s' (e2m1, e2m3, e3m2, e4m3, e5m2, e8m0, ue4m3, mxint8, bf16, fp16)", name);
        return -1;
    }
    return 0;
}

static size_t code_bytes(const lofp_elem_info *e) { return e->bits <= 8 ? 1 : e->bits <= 16 ? 2 : 4; }

/* elem_info(name) -> dict */
static PyObject *py_elem_info(PyObject *self, PyObject *args)
{
    const char *name;
    lofp_elem t;
    const lofp_elem_info *e;
    if (!PyArg_ParseTuple(args, "s", &name) || get_elem(name, &t, &e)) return NULL;
    return Py_BuildValue("{s:s,s:I,s:I,s:I,s:i,s:i,s:i,s:d,s:d,s:I,s:i,s:i,s:n}", "name", e->name, "bits", e->bits,
                         "ebits", e->ebits, "mbits", e->mbits, "bias", e->bias, "is_signed", e->is_signed, "emax", e->emax,
                         "max", e->max, "min_subnormal", e->min_subnormal, "max_code", e->max_code, "has_inf", e->has_inf,
                         "has_nan", e->has_nan, "code_bytes", (Py_ssize_t)code_bytes(e));
}

/* encode(elem, x_f32, out, rounding, overflow, rbits|None): one code per 1, 2 or 4 bytes */
static PyObject *py_encode(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *xo, *oo, *ro;
    int mode, ovf;
    lofp_elem t;
    const lofp_elem_info *e;
    if (!PyArg_ParseTuple(args, "sOOiiO", &name, &xo, &oo, &mode, &ovf, &ro) || get_elem(name, &t, &e)) return NULL;
    if (mode < 0 || mode > 3 || ovf < 0 || ovf > 1) return raise_error(LOFP_ERR_INVALID_ARG, -1, "bad rounding or overflow");
    if (mode == LOFP_STOCHASTIC && ro == Py_None)
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "stochastic rounding needs rbits (one uint32 per value)");
    arr_t x, o, r;
    memset(&r, 0, sizeof r);
    if (arr_get(xo, "x", 0, WANT_CPU, NULL, &x)) return NULL;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) { arr_release(&x); return NULL; }
    PyObject *ret = NULL;
    size_t n = x.nbytes / 4, cbs = code_bytes(e);
    if (x.nbytes % 4) { raise_error(LOFP_ERR_INVALID_ARG, -1, "x must be float32"); goto out; }
    if (arr_need(&o, "out", n * cbs)) goto out;
    if (ro != Py_None) {
        if (arr_get(ro, "rbits", 0, WANT_CPU, NULL, &r)) goto out;
        if (arr_need(&r, "rbits", n * 4)) goto out;
    }
    lofp_status st = LOFP_OK;
    Py_BEGIN_ALLOW_THREADS
    if (cbs == 1) {
        st = lofp_encode_u8(t, (const float *)x.ptr, n, (lofp_rounding)mode, (lofp_overflow)ovf, (const uint32_t *)r.ptr,
                            (uint8_t *)o.ptr);
    } else {
        const float *xf = (const float *)x.ptr;
        const uint32_t *rb = (const uint32_t *)r.ptr;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = lofp_encode(t, xf[i], (lofp_rounding)mode, (lofp_overflow)ovf, rb ? rb[i] : 0);
            if (cbs == 2) ((uint16_t *)o.ptr)[i] = (uint16_t)v;
            else ((uint32_t *)o.ptr)[i] = v;
        }
    }
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "encode"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&x); arr_release(&o); arr_release(&r);
    return ret;
}

/* decode(elem, codes, out_f32) */
static PyObject *py_decode(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *co, *oo;
    lofp_elem t;
    const lofp_elem_info *e;
    if (!PyArg_ParseTuple(args, "sOO", &name, &co, &oo) || get_elem(name, &t, &e)) return NULL;
    arr_t c, o;
    if (arr_get(co, "codes", 0, WANT_CPU, NULL, &c)) return NULL;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) { arr_release(&c); return NULL; }
    PyObject *ret = NULL;
    size_t cbs = code_bytes(e), n = c.nbytes / cbs;
    if (c.nbytes % cbs) { raise_error(LOFP_ERR_INVALID_ARG, -1, "codes must hold %zu-byte codes", cbs); goto out; }
    if (arr_need(&o, "out", n * 4)) goto out;
    lofp_status st = LOFP_OK;
    Py_BEGIN_ALLOW_THREADS
    if (cbs == 1) {
        st = lofp_decode_u8(t, (const uint8_t *)c.ptr, n, (float *)o.ptr);
    } else {
        for (size_t i = 0; i < n; i++)
            ((float *)o.ptr)[i] = lofp_decode(t, cbs == 2 ? ((const uint16_t *)c.ptr)[i] : ((const uint32_t *)c.ptr)[i]);
    }
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "decode"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&c); arr_release(&o);
    return ret;
}

/* ------------------------------------------------------------------------------------------ */
/* Layouts                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static int get_layout(const char *name, lofp_layout *l)
{
    if (lofp_layout_from_name(name, l) != LOFP_OK) {
        raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown scale layout '%s' (linear, swizzle-128x4, packed-u32, packed-u32:deepgemm)", name);
        return -1;
    }
    return 0;
}

/* layout_bytes(rows, k, block, layout) */
static PyObject *py_layout_bytes(PyObject *self, PyObject *args)
{
    Py_ssize_t rows, k;
    unsigned block;
    const char *ln;
    lofp_layout l;
    if (!PyArg_ParseTuple(args, "nnIs", &rows, &k, &block, &ln) || get_layout(ln, &l)) return NULL;
    if (rows < 0 || k < 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "negative size");
    size_t b = lofp_layout_required_bytes((size_t)rows, (size_t)k, block, l);
    if (!b) return raise_error(LOFP_ERR_INVALID_ARG, -1, "no %s layout for rows %zd, K %zd, block %u", ln, rows, k, block);
    return PyLong_FromSize_t(b);
}

/* layout_convert(in, rows, cols, from, to, pad_byte, out): via linear when neither side is */
static PyObject *py_layout_convert(PyObject *self, PyObject *args)
{
    PyObject *io, *oo;
    Py_ssize_t rows, cols;
    const char *fn, *tn;
    int pad;
    lofp_layout from, to;
    if (!PyArg_ParseTuple(args, "OnnssiO", &io, &rows, &cols, &fn, &tn, &pad, &oo) || get_layout(fn, &from) || get_layout(tn, &to))
        return NULL;
    if (check_sizes(rows, cols, "the scale matrix")) return NULL;
    if (pad < -1 || pad > 254) return raise_error(LOFP_ERR_INVALID_ARG, -1, "pad_byte must be 0..254 (0xFF is refused), got %d", pad);
    size_t ib = lofp_layout_required_bytes((size_t)rows, (size_t)cols, 1, from);
    size_t ob = lofp_layout_required_bytes((size_t)rows, (size_t)cols, 1, to), lb;
    if (!ib || !ob || !mul_ok((size_t)rows, (size_t)cols, &lb)) return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "scale matrix overflows");
    arr_t i, o;
    if (arr_get(io, "scales", 0, WANT_CPU, NULL, &i)) return NULL;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) { arr_release(&i); return NULL; }
    PyObject *ret = NULL;
    uint8_t *tmp = NULL;
    if (arr_need(&i, "scales", ib) || arr_need(&o, "out", ob)) goto out;
    lofp_status st = LOFP_OK;
    if (from != LOFP_LAYOUT_LINEAR && to != LOFP_LAYOUT_LINEAR) {
        /* scratch (not an output): the linear matrix between the two layouts */
        tmp = PyMem_Malloc(lb);
        if (!tmp) { PyErr_NoMemory(); goto out; }
    }
    Py_BEGIN_ALLOW_THREADS
    if (from == LOFP_LAYOUT_LINEAR) st = lofp_layout_from_linear((uint8_t *)i.ptr, (size_t)rows, (size_t)cols, to, pad, (uint8_t *)o.ptr);
    else if (to == LOFP_LAYOUT_LINEAR) st = lofp_layout_to_linear((uint8_t *)i.ptr, (size_t)rows, (size_t)cols, from, (uint8_t *)o.ptr);
    else {
        st = lofp_layout_to_linear((uint8_t *)i.ptr, (size_t)rows, (size_t)cols, from, tmp);
        if (st == LOFP_OK) st = lofp_layout_from_linear(tmp, (size_t)rows, (size_t)cols, to, pad, (uint8_t *)o.ptr);
    }
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "layout conversion"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    PyMem_Free(tmp);
    arr_release(&i); arr_release(&o);
    return ret;
}

/* diagnose(buf, rows, k, block, expected, alt_block, expected_alt|None) -> dict */
static PyObject *py_diagnose(PyObject *self, PyObject *args)
{
    PyObject *bo, *eo, *ao;
    Py_ssize_t rows, k;
    unsigned block, alt;
    if (!PyArg_ParseTuple(args, "OnnIOIO", &bo, &rows, &k, &block, &eo, &alt, &ao)) return NULL;
    if (check_sizes(rows, k, "the tensor")) return NULL;
    if (!block) return raise_error(LOFP_ERR_INVALID_ARG, -1, "block must be > 0");
    arr_t b, e, a;
    memset(&a, 0, sizeof a);
    if (arr_get(bo, "scales", 0, WANT_CPU, NULL, &b)) return NULL;
    if (arr_get(eo, "expected", 0, WANT_CPU, NULL, &e)) { arr_release(&b); return NULL; }
    PyObject *ret = NULL;
    size_t cols = ((size_t)k + block - 1) / block;
    if (arr_need(&e, "expected", (size_t)rows * cols)) goto out;
    if (ao != Py_None) {
        if (!alt) { raise_error(LOFP_ERR_INVALID_ARG, -1, "expected_alt given without alt_block"); goto out; }
        if (arr_get(ao, "expected_alt", 0, WANT_CPU, NULL, &a)) goto out;
        if (arr_need(&a, "expected_alt", (size_t)rows * (((size_t)k + alt - 1) / alt))) goto out;
    }
    lofp_layout_diagnosis d;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_layout_diagnose((uint8_t *)b.ptr, b.nbytes, (size_t)rows, (size_t)k, block, (uint8_t *)e.ptr, alt,
                              (uint8_t *)a.ptr, &d);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK && st != LOFP_ERR_MISMATCH) { raise_call(st, "layout diagnosis"); goto out; }
    ret = Py_BuildValue("{s:s,s:O,s:O,s:I,s:O,s:n,s:s}", "layout", lofp_layout_name(d.layout), "reversed_bytes",
                        d.reversed_bytes ? Py_True : Py_False, "row_major_words", d.row_major_words ? Py_True : Py_False,
                        "block", d.block, "matches", d.matches ? Py_True : Py_False, "mismatched_bytes",
                        (Py_ssize_t)d.mismatched_bytes, "evidence", d.evidence);
out:
    arr_release(&b); arr_release(&e); arr_release(&a);
    return ret;
}

/* fp4_repack(in, out, rows, k, block, from_gguf, to_gguf) */
static PyObject *py_fp4_repack(PyObject *self, PyObject *args)
{
    PyObject *io, *oo;
    Py_ssize_t rows, k;
    unsigned block;
    int from, to;
    if (!PyArg_ParseTuple(args, "OOnnIpp", &io, &oo, &rows, &k, &block, &from, &to)) return NULL;
    if (check_sizes(rows, k, "the codes")) return NULL;
    arr_t i, o;
    if (arr_get(io, "codes", 0, WANT_CPU, NULL, &i)) return NULL;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) { arr_release(&i); return NULL; }
    PyObject *ret = NULL;
    size_t nb = (size_t)rows * ((size_t)k / 2);
    if (arr_need(&i, "codes", nb) || arr_need(&o, "out", nb)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_fp4_repack((uint8_t *)i.ptr, (uint8_t *)o.ptr, (size_t)rows, (size_t)k, block, (lofp_nibble_order)from,
                         (lofp_nibble_order)to);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "fp4 repack"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&i); arr_release(&o);
    return ret;
}

/* hadamard(x_f32 (in place, [rows, d]), d, dense) */
static PyObject *py_hadamard(PyObject *self, PyObject *args)
{
    PyObject *xo;
    Py_ssize_t d;
    int dense;
    if (!PyArg_ParseTuple(args, "Onp", &xo, &d, &dense)) return NULL;
    if (d <= 0 || (d & (d - 1))) return raise_error(LOFP_ERR_INVALID_ARG, -1, "the last dimension %zd is not a power of two", d);
    arr_t x;
    if (arr_get(xo, "x", 1, WANT_CPU, NULL, &x)) return NULL;
    if (x.nbytes % (4 * (size_t)d)) { arr_release(&x); return raise_error(LOFP_ERR_SHAPE, -1, "x is not [rows, %zd] float32", d); }
    size_t rows = x.nbytes / (4 * (size_t)d);
    lofp_status st = LOFP_OK;
    float *tmp = dense ? PyMem_Malloc((size_t)d * 4) : NULL;
    if (dense && !tmp) { arr_release(&x); return PyErr_NoMemory(); }
    Py_BEGIN_ALLOW_THREADS
    for (size_t r = 0; r < rows && st == LOFP_OK; r++) {
        float *row = (float *)x.ptr + r * (size_t)d;
        if (dense) {
            st = lofp_hadamard_dense(row, tmp, (size_t)d);
            memcpy(row, tmp, (size_t)d * 4);
        } else {
            st = lofp_hadamard_inplace(row, (size_t)d, NULL);
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(tmp);
    arr_release(&x);
    if (st != LOFP_OK) return raise_call(st, "hadamard");
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------ */
/* GEMM (CPU)                                                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    lofp_scheme s;
    arr_t codes, scales;
    int have;
} qop_t;

/* (blob, layout_name, codes, scales|None, global) for a [rows, k] operand */
static int get_qop(PyObject *t, const char *name, size_t rows, size_t k, int allow_x8, qop_t *q, lofp_qmatrix *m)
{
    PyObject *blob, *co, *so;
    const char *ln;
    double g;
    memset(q, 0, sizeof *q);
    if (!PyArg_ParseTuple(t, "OsOOd", &blob, &ln, &co, &so, &g) || get_scheme(blob, &q->s)) return -1;
    lofp_weight_layout wl;
    if (lofp_weight_layout_from_name(ln, &wl) != LOFP_OK || (wl == LOFP_WEIGHT_X8 && !allow_x8)) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s: weight layout '%s' is not allowed here", name, ln);
        return -1;
    }
    if (!lofp_padded_k(&q->s, k)) {
        raise_error(LOFP_ERR_SHAPE, -1, "%s: K %zu is not a multiple of the block %u", name, k, q->s.block);
        return -1;
    }
    if (arr_get(co, name, 0, WANT_CPU, NULL, &q->codes)) return -1;
    q->have = 1;
    size_t want = wl == LOFP_WEIGHT_X8 ? lofp_weight_packed_bytes(&q->s, rows, k, wl) : lofp_codes_bytes(&q->s, rows, k);
    if (!want) { raise_error(LOFP_ERR_UNSUPPORTED, -1, "%s: layout %s does not fit this scheme and shape", name, ln); return -1; }
    if (arr_need(&q->codes, name, want)) return -1;
    if (wl == LOFP_WEIGHT_ROWS) {
        if (arr_get(so, "scales", 0, WANT_CPU, NULL, &q->scales)) return -1;
        if (arr_need(&q->scales, "scales", lofp_scales_bytes(&q->s, rows, k))) return -1;
    }
    m->scheme = &q->s;
    m->layout = wl;
    m->codes = (const uint8_t *)q->codes.ptr;
    m->scales = (const uint8_t *)q->scales.ptr;
    m->global = (float)g;
    return 0;
}

static void qop_release(qop_t *q)
{
    if (!q->have) return;
    arr_release(&q->codes);
    arr_release(&q->scales);
}

/* gemm(m, n, k, a|None, a_dt, a_quant_blob|None, aq_tuple|None, b_tuple, c, threads, ref) -> kernel name
 * ref: c is float64 and lofp_gemm_ref runs. */
static PyObject *py_gemm(PyObject *self, PyObject *args)
{
    Py_ssize_t m, n, k;
    PyObject *ao, *aqb, *aqt, *bt, *co;
    int adt, ref;
    unsigned threads;
    if (!PyArg_ParseTuple(args, "nnnOiOOOOIp", &m, &n, &k, &ao, &adt, &aqb, &aqt, &bt, &co, &threads, &ref)) return NULL;
    if (m <= 0 || n <= 0 || k <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "empty GEMM (m %zd, n %zd, k %zd)", m, n, k);
    lofp_gemm_args g;
    lofp_gemm_args_init(&g);
    g.m = (size_t)m; g.n = (size_t)n; g.k = (size_t)k;
    g.threads = threads;
    lofp_scheme aqs;
    arr_t a, c;
    qop_t qa, qb;
    memset(&a, 0, sizeof a); memset(&c, 0, sizeof c); memset(&qa, 0, sizeof qa); memset(&qb, 0, sizeof qb);
    PyObject *ret = NULL;
    if (ao != Py_None) {
        if (check_dtype(adt)) return NULL;
        if (arr_get(ao, "a", 0, WANT_CPU, NULL, &a)) goto out;
        if (arr_need(&a, "a", (size_t)m * (size_t)k * dtype_size(adt))) goto out;
        g.a = a.ptr;
        g.a_dtype = (lofp_dtype)adt;
        if (aqb != Py_None) {
            if (get_scheme(aqb, &aqs)) goto out;
            g.a_quant = &aqs;
        }
    } else {
        if (get_qop(aqt, "a codes", (size_t)m, (size_t)k, 0, &qa, &g.aq)) goto out;
    }
    if (get_qop(bt, "b codes", (size_t)n, (size_t)k, 1, &qb, &g.b)) goto out;
    if (arr_get(co, "out", 1, WANT_CPU, NULL, &c)) goto out;
    if (arr_need(&c, "out", (size_t)m * (size_t)n * (ref ? 8 : 4))) goto out;
    const char *kn = lofp_gemm_kernel_name(&g);
    lofp_status st;
    if (ref) {
        Py_BEGIN_ALLOW_THREADS
        st = lofp_gemm_ref(&g, (double *)c.ptr, 0);
        Py_END_ALLOW_THREADS
        kn = "reference fp64";
    } else {
        g.c = (float *)c.ptr;
        Py_BEGIN_ALLOW_THREADS
        st = lofp_gemm(&g);
        Py_END_ALLOW_THREADS
    }
    if (st == LOFP_ERR_NONFINITE) { raise_error(st, -1, "a holds NaN or Inf and is quantized on the fly"); goto out; }
    if (st != LOFP_OK) { raise_call(st, "gemm"); goto out; }
    ret = PyUnicode_FromString(kn);
out:
    arr_release(&a); arr_release(&c); qop_release(&qa); qop_release(&qb);
    return ret;
}

/* One operand of gemm_verify: (blob, codes, scales as stored, layout name, rows, k, global). */
typedef struct {
    lofp_scheme s;
    arr_t codes, scales;
} vop_t;

static int get_vop(PyObject *t, const char *what, vop_t *v, lofp_gemm_operand *o)
{
    PyObject *blob, *co, *so;
    const char *ln;
    Py_ssize_t rows, k;
    double g;
    if (!PyArg_ParseTuple(t, "OOOsnnd", &blob, &co, &so, &ln, &rows, &k, &g)) return -1;
    if (get_scheme(blob, &v->s) || get_layout(ln, &o->layout) || check_sizes(rows, k, what)) return -1;
    size_t cb = lofp_codes_bytes(&v->s, (size_t)rows, (size_t)k);
    if (!cb) { raise_error(LOFP_ERR_SHAPE, -1, "%s: K %zd is not valid for the scheme", what, k); return -1; }
    if (arr_get(co, "codes", 0, WANT_CPU, NULL, &v->codes)) return -1;
    if (arr_need(&v->codes, "codes", cb)) return -1;
    if (arr_get(so, "scales", 0, WANT_CPU, NULL, &v->scales)) return -1;
    o->scheme = &v->s;
    o->rows = (size_t)rows;
    o->k = (size_t)k;
    o->codes = (const uint8_t *)v->codes.ptr;
    o->scales = (const uint8_t *)v->scales.ptr;
    o->scales_bytes = v->scales.nbytes;
    o->global = (float)g;
    return 0;
}

/* gemm_verify(a_op, b_op, c_f32, tol, threads) -> dict: error, tol, ok, candidates [(desc, error)],
 * closest (index or -1), explained; each op is (blob, codes, scales, layout, rows, k, global). The
 * check is lofp_gemm_verify, the one `lofp verify` prints. */
static PyObject *py_gemm_verify(PyObject *self, PyObject *args)
{
    PyObject *at, *bt, *co;
    double tol;
    unsigned threads;
    if (!PyArg_ParseTuple(args, "O!O!OdI", &PyTuple_Type, &at, &PyTuple_Type, &bt, &co, &tol, &threads)) return NULL;
    vop_t va, vb;
    arr_t c;
    lofp_gemm_operand oa, ob;
    memset(&va, 0, sizeof va); memset(&vb, 0, sizeof vb); memset(&c, 0, sizeof c);
    PyObject *ret = NULL, *cands = NULL;
    lofp_gemm_verify_report *r = PyMem_Malloc(sizeof *r);
    if (!r) { PyErr_NoMemory(); goto out; }
    if (get_vop(at, "a", &va, &oa) || get_vop(bt, "b", &vb, &ob)) goto out;
    if (arr_get(co, "c", 0, WANT_CPU, NULL, &c)) goto out;
    size_t cn;
    if (!mul_ok(oa.rows, ob.rows, &cn) || !mul_ok(cn, sizeof(float), &cn)) { raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "c overflows"); goto out; }
    if (arr_need(&c, "c", cn)) goto out;
    lofp_gemm_verify_options opt;
    lofp_gemm_verify_options_init(&opt);
    opt.tol = tol;
    opt.threads = threads;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_gemm_verify(&oa, &ob, (const float *)c.ptr, &opt, r);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "gemm verify"); goto out; }
    if (!(cands = PyList_New(0))) goto out;
    for (size_t i = 0; i < r->ncandidates; i++) {
        PyObject *t = Py_BuildValue("(sd)", r->candidates[i].desc, r->candidates[i].error);
        if (!t || PyList_Append(cands, t)) { Py_XDECREF(t); goto out; }
        Py_DECREF(t);
    }
    ret = Py_BuildValue("{s:d,s:d,s:O,s:O,s:i,s:O}", "error", r->error, "tol", r->tol, "ok", r->ok ? Py_True : Py_False,
                        "candidates", cands, "closest", r->closest, "explained", r->explained ? Py_True : Py_False);
out:
    Py_XDECREF(cands);
    PyMem_Free(r);
    arr_release(&va.codes); arr_release(&va.scales); arr_release(&vb.codes); arr_release(&vb.scales); arr_release(&c);
    return ret;
}

/* weight_pack(blob, codes, scales, n, k, layout, out, unpack) */
static PyObject *py_weight_pack(PyObject *self, PyObject *args)
{
    PyObject *blob, *co, *so, *oo;
    Py_ssize_t n, k;
    const char *ln;
    int unpack;
    lofp_scheme s;
    lofp_weight_layout wl;
    if (!PyArg_ParseTuple(args, "OOOnnsOp", &blob, &co, &so, &n, &k, &ln, &oo, &unpack) || get_scheme(blob, &s)) return NULL;
    if (check_sizes(n, k, "the weight")) return NULL;
    if (lofp_weight_layout_from_name(ln, &wl) != LOFP_OK) return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown weight layout '%s' (rows, x8)", ln);
    size_t pb = lofp_weight_packed_bytes(&s, (size_t)n, (size_t)k, wl);
    if (!pb) return raise_error(LOFP_ERR_UNSUPPORTED, -1, "layout %s does not fit this scheme and shape", ln);
    arr_t c, sc, o;
    if (arr_get(co, "codes", unpack, WANT_CPU, NULL, &c)) return NULL;
    if (arr_get(so, "scales", unpack, WANT_CPU, NULL, &sc)) { arr_release(&c); return NULL; }
    if (arr_get(oo, "packed", !unpack, WANT_CPU, NULL, &o)) { arr_release(&c); arr_release(&sc); return NULL; }
    PyObject *ret = NULL;
    if (arr_need(&c, "codes", lofp_codes_bytes(&s, (size_t)n, (size_t)k)) ||
        arr_need(&sc, "scales", lofp_scales_bytes(&s, (size_t)n, (size_t)k)) || arr_need(&o, "packed", pb))
        goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    if (unpack) st = lofp_weight_unpack(&s, (uint8_t *)o.ptr, (size_t)n, (size_t)k, wl, (uint8_t *)c.ptr, (uint8_t *)sc.ptr);
    else st = lofp_weight_pack(&s, (uint8_t *)c.ptr, (uint8_t *)sc.ptr, (size_t)n, (size_t)k, wl, (uint8_t *)o.ptr);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, unpack ? "weight unpack" : "weight pack"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&c); arr_release(&sc); arr_release(&o);
    return ret;
}

static PyObject *py_weight_packed_bytes(PyObject *self, PyObject *args)
{
    PyObject *blob;
    Py_ssize_t n, k;
    const char *ln;
    lofp_scheme s;
    lofp_weight_layout wl;
    if (!PyArg_ParseTuple(args, "Onns", &blob, &n, &k, &ln) || get_scheme(blob, &s)) return NULL;
    if (check_sizes(n, k, "the weight")) return NULL;
    if (lofp_weight_layout_from_name(ln, &wl) != LOFP_OK) return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown weight layout '%s' (rows, x8)", ln);
    size_t pb = lofp_weight_packed_bytes(&s, (size_t)n, (size_t)k, wl);
    if (!pb) return raise_error(LOFP_ERR_UNSUPPORTED, -1, "layout %s does not fit this scheme and shape", ln);
    return PyLong_FromSize_t(pb);
}

/* ------------------------------------------------------------------------------------------ */
/* KV cache (CPU)                                                                              */
/* ------------------------------------------------------------------------------------------ */

static int get_kv(PyObject *blob, lofp_kv_cache_desc *d)
{
    char *p;
    Py_ssize_t n;
    if (!PyBytes_Check(blob) || PyBytes_AsStringAndSize(blob, &p, &n) < 0 || (size_t)n != sizeof *d) {
        PyErr_Clear();
        raise_error(LOFP_ERR_INVALID_ARG, -1, "not a cache description made by kv_desc()");
        return -1;
    }
    memcpy(d, p, sizeof *d);
    return 0;
}

/* kv_desc(format_name, head_dim, hk, block_size, num_blocks, c, hadamard, rotate_k) -> (blob, cache_bytes, slot_bytes) */
static PyObject *py_kv_desc(PyObject *self, PyObject *args)
{
    const char *dn, *hn;
    unsigned D, hk, bs;
    Py_ssize_t nb;
    double c;
    int rot;
    if (!PyArg_ParseTuple(args, "sIIIndsp", &dn, &D, &hk, &bs, &nb, &c, &hn, &rot)) return NULL;
    lofp_kv_format fmt;
    if (lofp_kv_format_from_name(dn, &fmt) != LOFP_OK)
        return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown cache format '%s' (ultraquant, fp32, bf16)", dn);
    if (nb <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "num_blocks must be > 0");
    lofp_kv_cache_desc d;
    lofp_status st = lofp_kv_desc_init(&d, fmt, D, hk, bs, (size_t)nb);
    if (st == LOFP_ERR_SHAPE) return raise_error(st, -1, "head_dim %u is not a power of two in [32, 512]", D);
    if (st != LOFP_OK) return raise_error(st, -1, "bad cache geometry (head_dim %u, kv heads %u, block_size %u, blocks %zd)", D, hk, bs, nb);
    d.c = (float)c;
    if (!strcmp(hn, "dense")) d.hadamard = LOFP_HADAMARD_DENSE;
    else if (!strcmp(hn, "butterfly")) d.hadamard = LOFP_HADAMARD_BUTTERFLY;
    else return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown hadamard '%s' (butterfly, dense)", hn);
    d.rotate_k = rot;
    st = lofp_kv_desc_validate(&d);
    if (st != LOFP_OK) return raise_error(st, -1, "invalid cache description (c %g)", c);
    lofp_kv_slot_layout sl;
    lofp_kv_slot_layout_get(fmt, D, &sl);
    return Py_BuildValue("(y#nn(nnnn))", (const char *)&d, (Py_ssize_t)sizeof d, (Py_ssize_t)lofp_kv_cache_bytes(&d),
                         (Py_ssize_t)sl.slot_bytes, (Py_ssize_t)sl.k_codes_offset, (Py_ssize_t)sl.k_scales_offset,
                         (Py_ssize_t)sl.v_codes_offset, (Py_ssize_t)sl.v_scales_offset);
}

/* kv_store(desc, cache, dt, k, v, num_tokens, slot_mapping_i64, flags) -> (stored, skipped, zeroed) */
static PyObject *py_kv_store(PyObject *self, PyObject *args)
{
    PyObject *blob, *cache_o, *ko, *vo, *smo;
    int dt;
    Py_ssize_t nt;
    unsigned flags;
    lofp_kv_cache_desc d;
    if (!PyArg_ParseTuple(args, "OOiOOnOI", &blob, &cache_o, &dt, &ko, &vo, &nt, &smo, &flags) || get_kv(blob, &d) || check_dtype(dt))
        return NULL;
    if (nt < 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "negative token count");
    arr_t cache, k, v, sm;
    if (arr_get(cache_o, "cache", 1, WANT_CPU, NULL, &cache)) return NULL;
    if (arr_get(ko, "k", 0, WANT_CPU, NULL, &k)) { arr_release(&cache); return NULL; }
    if (arr_get(vo, "v", 0, WANT_CPU, NULL, &v)) { arr_release(&cache); arr_release(&k); return NULL; }
    if (arr_get(smo, "slot_mapping", 0, WANT_CPU, NULL, &sm)) { arr_release(&cache); arr_release(&k); arr_release(&v); return NULL; }
    PyObject *ret = NULL;
    size_t per = (size_t)nt * d.num_kv_heads * d.head_dim * dtype_size(dt);
    if (arr_need(&cache, "cache", lofp_kv_cache_bytes(&d)) || arr_need(&k, "k", per) || arr_need(&v, "v", per) ||
        arr_need(&sm, "slot_mapping", (size_t)nt * 8))
        goto out;
    lofp_kv_store_report rep;
    memset(&rep, 0, sizeof rep);
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_kv_store(&d, (uint8_t *)cache.ptr, (lofp_dtype)dt, k.ptr, v.ptr, (size_t)nt, (const int64_t *)sm.ptr, flags, &rep);
    Py_END_ALLOW_THREADS
    if (st == LOFP_ERR_NONFINITE) {
        raise_error(st, (long long)rep.first_bad_index, "%s has a non-finite value at flat index %zu (pass propagate_nonfinite=True to store zero groups)",
                    rep.first_bad_in_v ? "v" : "k", rep.first_bad_index);
        goto out;
    }
    if (st == LOFP_ERR_INVALID_ARG) {
        size_t cap = d.num_blocks * d.block_size;
        for (Py_ssize_t t = 0; t < nt; t++) {
            int64_t sl = ((const int64_t *)sm.ptr)[t];
            if (sl >= 0 && (uint64_t)sl >= cap) {
                raise_error(st, t, "slot_mapping[%zd] = %lld is outside the cache (%zu slots)", t, (long long)sl, cap);
                goto out;
            }
        }
    }
    if (st != LOFP_OK) { raise_call(st, "kv store"); goto out; }
    ret = Py_BuildValue("(nnn)", (Py_ssize_t)rep.tokens_stored, (Py_ssize_t)rep.tokens_skipped, (Py_ssize_t)rep.zeroed_groups);
out:
    arr_release(&cache); arr_release(&k); arr_release(&v); arr_release(&sm);
    return ret;
}

/* kv_gather(desc, cache, block_table_i32, num_tokens, k_out|None, v_out|None) */
static PyObject *py_kv_gather(PyObject *self, PyObject *args)
{
    PyObject *blob, *cache_o, *bto, *ko, *vo;
    Py_ssize_t nt;
    lofp_kv_cache_desc d;
    if (!PyArg_ParseTuple(args, "OOOnOO", &blob, &cache_o, &bto, &nt, &ko, &vo) || get_kv(blob, &d)) return NULL;
    if (nt <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "num_tokens must be > 0");
    arr_t cache, bt, k, v;
    memset(&k, 0, sizeof k); memset(&v, 0, sizeof v);
    if (arr_get(cache_o, "cache", 0, WANT_CPU, NULL, &cache)) return NULL;
    if (arr_get(bto, "block_table", 0, WANT_CPU, NULL, &bt)) { arr_release(&cache); return NULL; }
    PyObject *ret = NULL;
    size_t per = (size_t)nt * d.num_kv_heads * d.head_dim * 4;
    if (arr_need(&cache, "cache", lofp_kv_cache_bytes(&d)) ||
        arr_need_at_least(&bt, "block_table", (((size_t)nt + d.block_size - 1) / d.block_size) * 4))
        goto out;
    if (ko != Py_None && (arr_get(ko, "k_out", 1, WANT_CPU, NULL, &k) || arr_need(&k, "k_out", per))) goto out;
    if (vo != Py_None && (arr_get(vo, "v_out", 1, WANT_CPU, NULL, &v) || arr_need(&v, "v_out", per))) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_kv_gather(&d, (uint8_t *)cache.ptr, (const int32_t *)bt.ptr, (size_t)nt, (float *)k.ptr, (float *)v.ptr);
    Py_END_ALLOW_THREADS
    if (st == LOFP_ERR_INVALID_ARG) { raise_error(st, -1, "a block_table entry is outside [0, %zu)", d.num_blocks); goto out; }
    if (st != LOFP_OK) { raise_call(st, "kv gather"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&cache); arr_release(&bt); arr_release(&k); arr_release(&v);
    return ret;
}

static int get_path(const char *name, lofp_attn_path *p)
{
    for (int i = 0; i <= LOFP_ATTN_AVX512; i++) {
        const char *n = lofp_attn_path_name((lofp_attn_path)i);
        if (n && !strcmp(n, name)) { *p = (lofp_attn_path)i; return 0; }
    }
    raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown attention path '%s' (auto, reference, scalar, avx2, avx512)", name);
    return -1;
}

/* attention(desc, cache, num_seqs, qsl|None, q_dt, q, block_tables, bt_stride, seq_lens, hq, scale,
 *           sinks|None, path, threads, split_tokens, workspace|None, out) -> (path, partitions, saturated_q) */
static PyObject *py_attention(PyObject *self, PyObject *args)
{
    PyObject *blob, *cache_o, *qslo, *qo, *bto, *slo, *sko, *wso, *oo;
    Py_ssize_t ns, stride;
    int qdt;
    unsigned hq, threads, split;
    double scale;
    const char *pn;
    lofp_kv_cache_desc d;
    lofp_attn_path path;
    if (!PyArg_ParseTuple(args, "OOnOiOOnOIdOsIIOO", &blob, &cache_o, &ns, &qslo, &qdt, &qo, &bto, &stride, &slo, &hq, &scale,
                          &sko, &pn, &threads, &split, &wso, &oo) ||
        get_kv(blob, &d) || check_dtype(qdt) || get_path(pn, &path))
        return NULL;
    if (ns <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "num_seqs must be > 0");
    if (stride <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "block_tables must have at least one column");
    if (hq == 0 || hq % d.num_kv_heads) return raise_error(LOFP_ERR_SHAPE, -1, "query heads %u are not a multiple of the KV heads %u", hq, d.num_kv_heads);
    arr_t cache, qsl, q, bt, sl, sk, ws, o;
    memset(&qsl, 0, sizeof qsl); memset(&sk, 0, sizeof sk); memset(&ws, 0, sizeof ws);
    memset(&q, 0, sizeof q); memset(&bt, 0, sizeof bt); memset(&sl, 0, sizeof sl); memset(&o, 0, sizeof o);
    if (arr_get(cache_o, "cache", 0, WANT_CPU, NULL, &cache)) return NULL;
    PyObject *ret = NULL;
    size_t rowsq = (size_t)ns;
    if (qslo != Py_None) {
        if (arr_get(qslo, "query_start_loc", 0, WANT_CPU, NULL, &qsl) || arr_need(&qsl, "query_start_loc", ((size_t)ns + 1) * 4)) goto out;
        int32_t last = ((const int32_t *)qsl.ptr)[ns];
        if (last < 0) { raise_error(LOFP_ERR_INVALID_ARG, -1, "query_start_loc[-1] is negative"); goto out; }
        rowsq = (size_t)last;
    }
    size_t per = rowsq * hq * d.head_dim;
    if (arr_need(&cache, "cache", lofp_kv_cache_bytes(&d))) goto out;
    if (arr_get(qo, "q", 0, WANT_CPU, NULL, &q) || arr_need(&q, "q", per * dtype_size(qdt))) goto out;
    if (arr_get(bto, "block_tables", 0, WANT_CPU, NULL, &bt) || arr_need(&bt, "block_tables", (size_t)ns * (size_t)stride * 4)) goto out;
    if (arr_get(slo, "seq_lens", 0, WANT_CPU, NULL, &sl) || arr_need(&sl, "seq_lens", (size_t)ns * 4)) goto out;
    if (sko != Py_None && (arr_get(sko, "sinks", 0, WANT_CPU, NULL, &sk) || arr_need(&sk, "sinks", (size_t)hq * 4))) goto out;
    if (wso != Py_None && arr_get(wso, "workspace", 1, WANT_CPU, NULL, &ws)) goto out;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o) || arr_need(&o, "out", per * 4)) goto out;
    lofp_attn_params p;
    lofp_attn_params_init(&p, hq, (float)scale, (size_t)stride);
    p.sinks = (const float *)sk.ptr;
    p.path = path;
    p.threads = threads;
    p.split_tokens = split;
    p.workspace = ws.ptr;
    p.workspace_bytes = ws.nbytes;
    lofp_attn_report rep;
    memset(&rep, 0, sizeof rep);
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    if (qslo == Py_None)
        st = lofp_attention_decode(&d, &p, (uint8_t *)cache.ptr, (size_t)ns, (lofp_dtype)qdt, q.ptr, (const int32_t *)bt.ptr,
                                   (const int32_t *)sl.ptr, (float *)o.ptr, &rep);
    else
        st = lofp_attention_prefill(&d, &p, (uint8_t *)cache.ptr, (size_t)ns, (const int32_t *)qsl.ptr, (lofp_dtype)qdt, q.ptr,
                                    (const int32_t *)bt.ptr, (const int32_t *)sl.ptr, (float *)o.ptr, &rep);
    Py_END_ALLOW_THREADS
    if (st == LOFP_ERR_NONFINITE) {
        raise_error(st, (long long)rep.first_bad_index, "q has a non-finite value at flat index %zu", rep.first_bad_index);
        goto out;
    }
    if (st == LOFP_ERR_SHAPE) { raise_error(st, -1, "a sequence is longer than its block table covers (or a query is longer than its sequence)"); goto out; }
    if (st == LOFP_ERR_INVALID_ARG) { raise_error(st, -1, "a seq_len <= 0, a block_table entry outside [0, %zu), a NaN/+Inf sink or a non-finite scale", d.num_blocks); goto out; }
    if (st != LOFP_OK) { raise_call(st, "attention"); goto out; }
    ret = Py_BuildValue("(snn)", lofp_attn_path_name(rep.path), (Py_ssize_t)rep.partitions, (Py_ssize_t)rep.saturated_q);
out:
    arr_release(&cache); arr_release(&qsl); arr_release(&q); arr_release(&bt); arr_release(&sl);
    arr_release(&sk); arr_release(&ws); arr_release(&o);
    return ret;
}

/* attention_ws_bytes(desc, hq, bt_stride, path, threads, split, num_seqs, num_query_tokens, max_seq_len) */
static PyObject *py_attention_ws_bytes(PyObject *self, PyObject *args)
{
    PyObject *blob;
    unsigned hq, threads, split;
    Py_ssize_t stride, ns, nq, maxlen;
    const char *pn;
    lofp_kv_cache_desc d;
    lofp_attn_path path;
    if (!PyArg_ParseTuple(args, "OInsIInnn", &blob, &hq, &stride, &pn, &threads, &split, &ns, &nq, &maxlen) || get_kv(blob, &d) ||
        get_path(pn, &path))
        return NULL;
    lofp_attn_params p;
    lofp_attn_params_init(&p, hq, 1.0f, (size_t)stride);
    p.path = path;
    p.threads = threads;
    p.split_tokens = split;
    return PyLong_FromSize_t(lofp_attention_workspace_bytes(&d, &p, (size_t)ns, (size_t)nq, (size_t)maxlen));
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void file_capsule_free(PyObject *cap)
{
    lofp_file *f = PyCapsule_GetPointer(cap, "lofp.file");
    if (f) lofp_file_close(f);
    else PyErr_Clear();
}

/* file_open(path) -> (handle, format, [(name, dtype, shape, nbytes)], [(key, value)]) */
static PyObject *py_file_open(PyObject *self, PyObject *args)
{
    PyObject *po;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &po)) return NULL;
    char *path;
    Py_ssize_t pl;
    if (PyBytes_AsStringAndSize(po, &path, &pl) < 0) { Py_DECREF(po); return NULL; }
    lofp_file *f = NULL;
    lofp_io_error err;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_file_open(path, LOFP_FORMAT_AUTO, &f, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(po);
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    PyObject *cap = PyCapsule_New(f, "lofp.file", file_capsule_free);
    if (!cap) { lofp_file_close(f); return NULL; }
    size_t n = lofp_file_count(f), nm = lofp_file_metadata_count(f);
    PyObject *tl = PyList_New((Py_ssize_t)n), *ml = PyList_New((Py_ssize_t)nm), *ret = NULL;
    if (!tl || !ml) goto fail;
    for (size_t i = 0; i < n; i++) {
        const lofp_tensor_info *t = lofp_file_tensor(f, i);
        PyObject *shape = PyTuple_New((Py_ssize_t)t->ndim);
        if (!shape) goto fail;
        for (size_t j = 0; j < t->ndim; j++) PyTuple_SetItem(shape, (Py_ssize_t)j, PyLong_FromSize_t(t->shape[j]));
        PyObject *e = Py_BuildValue("(ssNn)", t->name, lofp_dtype_name(t->dtype), shape, (Py_ssize_t)t->nbytes);
        if (!e) goto fail;
        PyList_SetItem(tl, (Py_ssize_t)i, e);
    }
    for (size_t i = 0; i < nm; i++) {
        const lofp_metadata_entry *e = lofp_file_metadata(f, i);
        PyObject *kv = Py_BuildValue("(ss)", e->key, e->value);
        if (!kv) goto fail;
        PyList_SetItem(ml, (Py_ssize_t)i, kv);
    }
    ret = Py_BuildValue("(OsOO)", cap, lofp_file_format_of(f) == LOFP_FORMAT_NPY ? "npy" : "safetensors", tl, ml);
fail:
    Py_XDECREF(tl); Py_XDECREF(ml); Py_DECREF(cap);
    return ret;
}

/* file_read(handle, index, out): copies tensor index's bytes into out */
static PyObject *py_file_read(PyObject *self, PyObject *args)
{
    PyObject *cap, *oo;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "OnO", &cap, &i, &oo)) return NULL;
    lofp_file *f = PyCapsule_GetPointer(cap, "lofp.file");
    if (!f) return NULL;
    const lofp_tensor_info *t = i >= 0 ? lofp_file_tensor(f, (size_t)i) : NULL;
    if (!t) return raise_error(LOFP_ERR_NOT_FOUND, -1, "no tensor %zd", i);
    arr_t o;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) return NULL;
    if (arr_need(&o, "out", t->nbytes)) { arr_release(&o); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    if (t->nbytes) memcpy(o.ptr, t->data, t->nbytes);
    Py_END_ALLOW_THREADS
    arr_release(&o);
    Py_RETURN_NONE;
}

/* file_write(path, [(name, dtype, shape, buffer)], [(key, value)]) */
static PyObject *py_file_write(PyObject *self, PyObject *args)
{
    PyObject *po, *tl, *ml;
    if (!PyArg_ParseTuple(args, "O&O!O!", PyUnicode_FSConverter, &po, &PyList_Type, &tl, &PyList_Type, &ml)) return NULL;
    Py_ssize_t n = PyList_Size(tl), nm = PyList_Size(ml);
    lofp_tensor_desc *d = PyMem_Calloc((size_t)n + 1, sizeof *d);
    arr_t *arrs = PyMem_Calloc((size_t)n + 1, sizeof *arrs);
    size_t *shapes = PyMem_Calloc((size_t)n * 8 + 1, sizeof(size_t));
    lofp_metadata_entry *me = PyMem_Calloc((size_t)nm + 1, sizeof *me);
    PyObject *ret = NULL;
    Py_ssize_t got = 0;
    if (!d || !arrs || !shapes || !me) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GetItem(tl, i), *shape, *buf;
        const char *name, *dtn;
        if (!PyArg_ParseTuple(e, "ssO!O", &name, &dtn, &PyTuple_Type, &shape, &buf)) goto out;
        lofp_dtype dt;
        if (lofp_dtype_from_name(dtn, &dt) != LOFP_OK) { raise_error(LOFP_ERR_NOT_FOUND, -1, "tensor '%s': unknown dtype '%s'", name, dtn); goto out; }
        Py_ssize_t nd = PyTuple_Size(shape);
        if (nd > 8) { raise_error(LOFP_ERR_UNSUPPORTED, -1, "tensor '%s' has more than 8 dimensions", name); goto out; }
        for (Py_ssize_t j = 0; j < nd; j++) {
            Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GetItem(shape, j));
            if (v < 0) { if (!PyErr_Occurred()) raise_error(LOFP_ERR_INVALID_ARG, -1, "tensor '%s': negative dimension", name); goto out; }
            shapes[i * 8 + j] = (size_t)v;
        }
        if (arr_get(buf, name, 0, WANT_CPU, NULL, &arrs[i])) goto out;
        got = i + 1;
        d[i].name = name; d[i].dtype = dt; d[i].ndim = (size_t)nd; d[i].shape = &shapes[i * 8];
        d[i].data = arrs[i].ptr; d[i].nbytes = arrs[i].nbytes;
    }
    for (Py_ssize_t i = 0; i < nm; i++) {
        if (!PyArg_ParseTuple(PyList_GetItem(ml, i), "ss", &me[i].key, &me[i].value)) goto out;
    }
    char *path;
    Py_ssize_t pl;
    if (PyBytes_AsStringAndSize(po, &path, &pl) < 0) goto out;
    lofp_io_error err;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_file_write(path, LOFP_FORMAT_AUTO, d, (size_t)n, me, (size_t)nm, &err);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_error(st, -1, "%s", err.message); goto out; }
    ret = Py_NewRef(Py_None);
out:
    for (Py_ssize_t i = 0; i < got; i++) arr_release(&arrs[i]);
    PyMem_Free(d); PyMem_Free(arrs); PyMem_Free(shapes); PyMem_Free(me);
    Py_DECREF(po);
    return ret;
}


/* ------------------------------------------------------------------------------------------ */
/* lofp tensor files (qfile.h): the "lofp:NAME" convention is the library's, never Python's     */
/* ------------------------------------------------------------------------------------------ */

/* A Python shape tuple as a size_t array of shape[LOFP_MAX_NDIM]; returns ndim or -1. */
static Py_ssize_t shape_of(PyObject *t, size_t *shape)
{
    Py_ssize_t nd = PyTuple_Size(t);
    if (nd < 1 || nd > LOFP_MAX_NDIM) {
        raise_error(LOFP_ERR_UNSUPPORTED, -1, "a quantized tensor has 1 to %d dimensions, not %zd", LOFP_MAX_NDIM, nd);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GetItem(t, i));
        if (v < 0) {
            if (!PyErr_Occurred()) raise_error(LOFP_ERR_INVALID_ARG, -1, "negative dimension");
            return -1;
        }
        shape[i] = (size_t)v;
    }
    return nd;
}

static PyObject *shape_tuple(const size_t *shape, size_t nd)
{
    PyObject *t = PyTuple_New((Py_ssize_t)nd);
    if (!t) return NULL;
    for (size_t i = 0; i < nd; i++) PyTuple_SetItem(t, (Py_ssize_t)i, PyLong_FromSize_t(shape[i]));
    return t;
}

/* qfile_describe(name, scheme, layout, pad_byte, shape, padded_k, source_dtype) -> dict: how
 * quantized tensor `name` is stored in a lofp tensor file (lofp/qfile.h): the metadata key and
 * value, and the parts [(name, dtype, shape)] -- codes, scales and, for two-level NVFP4, the
 * global scale -- in that order. */
static PyObject *py_qfile_describe(PyObject *self, PyObject *args)
{
    PyObject *blob, *shape;
    const char *name, *ln, *dn;
    int pad_byte;
    Py_ssize_t kp;
    if (!PyArg_ParseTuple(args, "sOsiO!ns", &name, &blob, &ln, &pad_byte, &PyTuple_Type, &shape, &kp, &dn)) return NULL;
    lofp_qtensor q;
    memset(&q, 0, sizeof q);
    if (get_scheme(blob, &q.scheme) || get_layout(ln, &q.layout)) return NULL;
    if (lofp_dtype_from_name(dn, &q.src_dtype) != LOFP_OK) return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown dtype '%s'", dn);
    Py_ssize_t nd = shape_of(shape, q.shape);
    if (nd < 0) return NULL;
    if (kp <= 0 || pad_byte < 0 || pad_byte > 254) return raise_error(LOFP_ERR_INVALID_ARG, -1, "padded K or pad byte out of range");
    q.ndim = (size_t)nd;
    q.k = q.shape[nd - 1];
    q.kp = (size_t)kp;
    q.rows = 1;
    for (Py_ssize_t i = 0; i + 1 < nd; i++) q.rows *= q.shape[i];
    q.pad_byte = pad_byte;
    size_t n = lofp_qtensor_meta_format(&q, NULL, 0);
    if (!n) return raise_error(LOFP_ERR_INVALID_ARG, -1, "tensor '%s': the description has no metadata form", name);
    char *v = PyMem_Malloc(n + 1);
    if (!v) return PyErr_NoMemory();
    lofp_qtensor_meta_format(&q, v, n + 1);
    size_t cs[LOFP_MAX_NDIM], ss[LOFP_MAX_NDIM];
    size_t cnd = lofp_qtensor_codes_shape(&q, cs), snd = lofp_qtensor_scales_shape(&q, q.layout, ss);
    int two = q.scheme.id == LOFP_SCHEME_NVFP4 && q.scheme.two_level;
    PyObject *parts = PyList_New(0);
    PyObject *ret = NULL;
    const char *suffix[3] = {".codes", ".scales", ".global_scale"};
    for (int i = 0; parts && i < (two ? 3 : 2); i++) {
        PyObject *pn = PyUnicode_FromFormat("%s%s", name, suffix[i]);
        PyObject *sh = i == 0 ? shape_tuple(cs, cnd) : i == 1 ? shape_tuple(ss, snd) : PyTuple_New(0);
        lofp_dtype dt = i == 0 ? lofp_qtensor_codes_dtype(&q.scheme) : i == 1 ? lofp_qtensor_scales_dtype(&q.scheme, q.layout)
                                                                          : LOFP_DTYPE_F32;
        PyObject *e = pn && sh ? Py_BuildValue("(OsO)", pn, lofp_dtype_name(dt), sh) : NULL;
        Py_XDECREF(pn);
        Py_XDECREF(sh);
        if (!e || PyList_Append(parts, e) < 0) { Py_XDECREF(e); Py_CLEAR(parts); break; }
        Py_DECREF(e);
    }
    if (parts) ret = Py_BuildValue("{s:N,s:s#,s:N}", "key", PyUnicode_FromFormat(LOFP_QFILE_KEY_PREFIX "%s", name), "meta", v, (Py_ssize_t)n,
                                   "parts", parts);
    PyMem_Free(v);
    return ret;
}

/* qfile_load(handle, path, name) -> dict: quantized tensor `name` of an open file, loaded by
 * lofp_qtensor_load (metadata parsed, every stored tensor checked against it): scheme (bytes),
 * layout, pad_byte, shape, padded_k, source_dtype, global, and the stored tensors' names. */
static PyObject *py_qfile_load(PyObject *self, PyObject *args)
{
    PyObject *cap, *po;
    const char *name;
    if (!PyArg_ParseTuple(args, "OO&s", &cap, PyUnicode_FSConverter, &po, &name)) return NULL;
    lofp_file *f = PyCapsule_GetPointer(cap, "lofp.file");
    if (!f) { Py_DECREF(po); return NULL; }
    lofp_qtensor q;
    lofp_io_error err;
    lofp_status st = lofp_qtensor_load(f, PyBytes_AsString(po), name, &q, &err);
    Py_DECREF(po);
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    q.scheme.threads = 1;
    PyObject *shape = PyTuple_New((Py_ssize_t)q.ndim);
    if (!shape) return NULL;
    for (size_t i = 0; i < q.ndim; i++) PyTuple_SetItem(shape, (Py_ssize_t)i, PyLong_FromSize_t(q.shape[i]));
    return Py_BuildValue("{s:y#,s:s,s:i,s:N,s:n,s:s,s:d,s:s,s:s,s:z}",
                         "scheme", (const char *)&q.scheme, (Py_ssize_t)sizeof q.scheme, "layout", lofp_layout_name(q.layout),
                         "pad_byte", q.pad_byte, "shape", shape, "padded_k", (Py_ssize_t)q.kp,
                         "source_dtype", lofp_dtype_name(q.src_dtype), "global", (double)q.global,
                         "codes", q.codes_t->name, "scales", q.scales_t->name,
                         "global_scale", q.global_t ? q.global_t->name : NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Checkpoints (checkpoint.h)                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* The converter's note lines, collected while the GIL is released (plain malloc: no Python). */
typedef struct { char *buf; size_t len, cap; } notes_t;

static void notes_add(void *ctx, const char *line)
{
    notes_t *n = ctx;
    size_t l = strlen(line) + 1;
    if (n->len + l > n->cap) {
        size_t cap = (n->cap ? n->cap * 2 : 1024) + l;
        char *b = realloc(n->buf, cap);
        if (!b) return;
        n->buf = b;
        n->cap = cap;
    }
    memcpy(n->buf + n->len, line, l);
    n->len += l;
}

static PyObject *notes_list(notes_t *n)
{
    PyObject *l = PyList_New(0);
    for (size_t o = 0; l && o < n->len;) {
        PyObject *s = PyUnicode_DecodeUTF8(n->buf + o, (Py_ssize_t)strlen(n->buf + o), "replace");
        if (!s || PyList_Append(l, s) < 0) { Py_XDECREF(s); Py_CLEAR(l); break; }
        Py_DECREF(s);
        o += strlen(n->buf + o) + 1;
    }
    free(n->buf);
    return l;
}

/* A list of str as a C array (pointers into the str objects, which the list keeps alive). */
static const char **str_array(PyObject *list, size_t *n)
{
    Py_ssize_t len = PyList_Size(list);
    if (len < 0) return NULL;
    const char **a = PyMem_Calloc((size_t)len + 1, sizeof *a);
    if (!a) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_ssize_t sl;
        a[i] = PyUnicode_AsUTF8AndSize(PyList_GetItem(list, i), &sl);
        if (!a[i]) { PyMem_Free(a); return NULL; }
    }
    *n = (size_t)len;
    return a;
}

/* ckpt_convert(in, out, to, scheme|None, include[list], exclude[list], no_fuse, pad, input_scales|None,
 *              jobs, threads[, requantize_unfit[, profile|None]]) -> notes */
static PyObject *py_ckpt_convert(PyObject *self, PyObject *args)
{
    PyObject *ino, *outo, *inc, *exc, *isc;
    const char *to, *scheme;
    int nofuse, pad;
    unsigned jobs, threads;
    int requant_unfit = 0;
    PyObject *scheme_o, *profile_o = Py_None;
    if (!PyArg_ParseTuple(args, "O&O&sOO!O!ppOII|pO", PyUnicode_FSConverter, &ino, PyUnicode_FSConverter, &outo, &to, &scheme_o,
                          &PyList_Type, &inc, &PyList_Type, &exc, &nofuse, &pad, &isc, &jobs, &threads, &requant_unfit,
                          &profile_o))
        return NULL;
    PyObject *ret = NULL, *isc_b = NULL;
    const char **ia = NULL, **ea = NULL;
    lofp_ckpt_options o;
    lofp_ckpt_options_init(&o);
    if (lofp_ckpt_format_from_name(to, &o.to) != LOFP_OK) {
        raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown checkpoint format '%s' (modelopt, compressed-tensors, gpt-oss, gguf, lofp)", to);
        goto out;
    }
    if (opt_str(scheme_o, &scheme)) goto out;
    o.scheme = scheme;
    const char *profile = NULL;
    if (opt_str(profile_o, &profile)) goto out;
    if (profile && lofp_profile_from_name(profile, &o.profile) != LOFP_OK) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "unknown profile '%s' (lofp, modelopt, compressed-tensors, ggml)", profile);
        goto out;
    }
    if (!(ia = str_array(inc, &o.n_include)) || !(ea = str_array(exc, &o.n_exclude))) goto out;
    o.include = ia;
    o.exclude = ea;
    o.no_fuse_scales = nofuse;
    o.pad = pad;
    if (isc != Py_None) {
        if (!PyUnicode_FSConverter(isc, &isc_b)) goto out;
        o.input_scales = PyBytes_AsString(isc_b);
    }
    o.jobs = jobs;
    o.threads = threads;
    o.requantize_unfit = requant_unfit;
    notes_t notes = {0};
    o.note = notes_add;
    o.ctx = &notes;
    lofp_io_error err;
    lofp_status st;
    const char *in = PyBytes_AsString(ino), *outp = PyBytes_AsString(outo);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_convert(in, outp, &o, &err);
    Py_END_ALLOW_THREADS
    PyObject *nl = notes_list(&notes);
    if (st != LOFP_OK) { Py_XDECREF(nl); raise_error(st, -1, "%s", err.message); goto out; }
    ret = nl;
out:
    PyMem_Free(ia); PyMem_Free(ea);
    Py_XDECREF(isc_b);
    Py_DECREF(ino); Py_DECREF(outo);
    return ret;
}

/* ckpt_import(in, out, dtype_name) -> notes */
/* ckpt_verify(original, quantized, quiet) -> (description, n_quantized, n_ok, n_bad, [lines]):
 * lofp_ckpt_verify, the check of `lofp verify-checkpoint`, so both give the same lines. */
static PyObject *py_ckpt_verify(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *po, *pq;
    int quiet;
    if (!PyArg_ParseTuple(args, "O&O&p", PyUnicode_FSConverter, &po, PyUnicode_FSConverter, &pq, &quiet)) return NULL;
    lofp_ckpt_verify_report r;
    lofp_io_error err;
    lofp_status st;
    const char *o = PyBytes_AsString(po), *q = PyBytes_AsString(pq);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_verify(o, q, quiet, &r, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(po);
    Py_DECREF(pq);
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    PyObject *lines = PyList_New((Py_ssize_t)r.n_lines), *ret = NULL;
    if (lines) {
        for (size_t i = 0; i < r.n_lines; i++) {
            PyObject *l = PyUnicode_DecodeUTF8(r.lines[i], (Py_ssize_t)strlen(r.lines[i]), "replace");
            if (!l) { Py_CLEAR(lines); break; }
            PyList_SetItem(lines, (Py_ssize_t)i, l);
        }
    }
    if (lines)
        ret = Py_BuildValue("(snnnN)", r.description, (Py_ssize_t)r.n_quantized, (Py_ssize_t)r.n_ok,
                            (Py_ssize_t)r.n_bad, lines);
    lofp_ckpt_verify_report_release(&r);
    return ret;
}

static PyObject *py_ckpt_import(PyObject *self, PyObject *args)
{
    PyObject *ino, *outo;
    const char *dn;
    if (!PyArg_ParseTuple(args, "O&O&s", PyUnicode_FSConverter, &ino, PyUnicode_FSConverter, &outo, &dn)) return NULL;
    PyObject *ret = NULL;
    lofp_ckpt_options o;
    lofp_ckpt_options_init(&o);
    if (lofp_dtype_from_name(dn, &o.import_dtype) != LOFP_OK ||
        (o.import_dtype != LOFP_DTYPE_BF16 && o.import_dtype != LOFP_DTYPE_F16 && o.import_dtype != LOFP_DTYPE_F32)) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "import dtype is BF16, F16 or F32, got '%s'", dn);
        goto out;
    }
    notes_t notes = {0};
    o.note = notes_add;
    o.ctx = &notes;
    lofp_io_error err;
    lofp_status st;
    const char *in = PyBytes_AsString(ino), *outp = PyBytes_AsString(outo);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_import(in, outp, &o, &err);
    Py_END_ALLOW_THREADS
    PyObject *nl = notes_list(&notes);
    if (st != LOFP_OK) { Py_XDECREF(nl); raise_error(st, -1, "%s", err.message); goto out; }
    ret = nl;
out:
    Py_DECREF(ino); Py_DECREF(outo);
    return ret;
}

static void ckpt_capsule_free(PyObject *cap)
{
    lofp_ckpt *c = PyCapsule_GetPointer(cap, "lofp.ckpt");
    if (c) lofp_ckpt_close(c);
    else PyErr_Clear();
}

/* ---- calibration files (lofp/calib.h) ---------------------------------------------------- */

static void calib_capsule_free(PyObject *cap)
{
    lofp_calib *c = PyCapsule_GetPointer(cap, "lofp.calib");
    if (c) lofp_calib_close(c);
    else PyErr_Clear();
}

/* calib_open(path) -> (handle, statistic 'hessian'|'diag', source 'lofp'|'imatrix', [names]) */
static PyObject *py_calib_open(PyObject *self, PyObject *args)
{
    PyObject *po;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &po)) return NULL;
    lofp_calib *c = NULL;
    lofp_io_error err;
    lofp_status st;
    const char *path = PyBytes_AsString(po);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_calib_open(path, &c, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(po);
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    PyObject *cap = PyCapsule_New(c, "lofp.calib", calib_capsule_free);
    if (!cap) { lofp_calib_close(c); return NULL; }
    size_t n = lofp_calib_count(c);
    PyObject *names = PyList_New((Py_ssize_t)n);
    if (!names) { Py_DECREF(cap); return NULL; }
    for (size_t i = 0; i < n; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(lofp_calib_name(c, i), (Py_ssize_t)strlen(lofp_calib_name(c, i)), "replace");
        if (!s) { Py_DECREF(names); Py_DECREF(cap); return NULL; }
        if (PyList_SetItem(names, (Py_ssize_t)i, s) < 0) { Py_DECREF(names); Py_DECREF(cap); return NULL; }
    }
    return Py_BuildValue("(NssN)", cap, lofp_calib_kind(c) == LOFP_CALIB_HESSIAN ? "hessian" : "diag",
                         lofp_calib_source_of(c) == LOFP_CALIB_SOURCE_IMATRIX ? "imatrix" : "lofp", names);
}

/* calib_meta(handle, key) -> str | None */
static PyObject *py_calib_meta(PyObject *self, PyObject *args)
{
    PyObject *cap;
    const char *key;
    if (!PyArg_ParseTuple(args, "Os", &cap, &key)) return NULL;
    lofp_calib *c = PyCapsule_GetPointer(cap, "lofp.calib");
    if (!c) return NULL;
    const char *v = lofp_calib_meta(c, key);
    if (!v) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "replace");
}

/* calib_find(handle, weight, k, diag_out|None, hess_out|None) -> tokens; fills float32 buffers of
 * k and k*k elements */
static PyObject *py_calib_find(PyObject *self, PyObject *args)
{
    PyObject *cap, *dov, *hov;
    const char *name;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "OsnOO", &cap, &name, &k, &dov, &hov)) return NULL;
    lofp_calib *c = PyCapsule_GetPointer(cap, "lofp.calib");
    if (!c) return NULL;
    if (k <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "k must be positive, got %zd", k);
    arr_t d, h;
    memset(&d, 0, sizeof d);
    memset(&h, 0, sizeof h);
    if (dov != Py_None) {
        if (arr_get(dov, "diag", 1, WANT_CPU, NULL, &d)) return NULL;
        if (arr_need(&d, "diag", (size_t)k * 4)) { arr_release(&d); return NULL; }
    }
    if (hov != Py_None) {
        if ((size_t)k > SIZE_MAX / 4 / (size_t)k) { arr_release(&d); return raise_error(LOFP_ERR_SIZE_OVERFLOW, -1, "k * k overflows"); }
        if (arr_get(hov, "hess", 1, WANT_CPU, NULL, &h)) { arr_release(&d); return NULL; }
        if (arr_need(&h, "hess", (size_t)k * (size_t)k * 4)) { arr_release(&d); arr_release(&h); return NULL; }
    }
    uint64_t tokens = 0;
    lofp_io_error err;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_calib_find(c, name, (size_t)k, dov != Py_None ? (float *)d.ptr : NULL,
                         hov != Py_None ? (float *)h.ptr : NULL, &tokens, &err);
    Py_END_ALLOW_THREADS
    if (dov != Py_None) arr_release(&d);
    if (hov != Py_None) arr_release(&h);
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    return PyLong_FromUnsignedLongLong((unsigned long long)tokens);
}

/* ckpt_open(path) -> (handle, format, description, count) */
static PyObject *py_ckpt_open(PyObject *self, PyObject *args)
{
    PyObject *po;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &po)) return NULL;
    lofp_ckpt *c = NULL;
    lofp_io_error err;
    lofp_status st;
    const char *path = PyBytes_AsString(po);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_open(path, &c, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(po);
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    PyObject *cap = PyCapsule_New(c, "lofp.ckpt", ckpt_capsule_free);
    if (!cap) { lofp_ckpt_close(c); return NULL; }
    const char *fn = lofp_ckpt_format_name(lofp_ckpt_format_of(c)), *d = lofp_ckpt_describe(c);
    return Py_BuildValue("(Nssn)", cap, fn ? fn : "unknown", d ? d : "", (Py_ssize_t)lofp_ckpt_count(c));
}

static lofp_ckpt *get_ckpt(PyObject *cap) { return PyCapsule_GetPointer(cap, "lofp.ckpt"); }

/* ckpt_tensor(handle, i, codes|None, scales|None, data|None) -> dict; fills the buffers given
 * (codes_bytes / scales_bytes / nbytes exactly, as the dict of a first call without them says). */
static PyObject *py_ckpt_tensor(PyObject *self, PyObject *args)
{
    PyObject *cap, *co, *so, *dov;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "OnOOO", &cap, &i, &co, &so, &dov)) return NULL;
    lofp_ckpt *c = get_ckpt(cap);
    if (!c) return NULL;
    if (i < 0 || (size_t)i >= lofp_ckpt_count(c)) return raise_error(LOFP_ERR_NOT_FOUND, -1, "no tensor %zd", i);
    lofp_ckpt_tensor t;
    lofp_io_error err;
    lofp_status st;
    memset(&t, 0, sizeof t);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_get(c, (size_t)i, &t, &err);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) return raise_error(st, -1, "%s", err.message);
    PyObject *ret = NULL;
    arr_t a;
    memset(&a, 0, sizeof a);
    struct { PyObject *o; const char *name; const void *src; size_t n; } outs[3] = {
        {co, "codes", t.codes, t.codes_bytes}, {so, "scales", t.scales, t.scales_bytes}, {dov, "data", t.data, t.nbytes}};
    for (int j = 0; j < 3; j++) {
        if (outs[j].o == Py_None) continue;
        if (arr_get(outs[j].o, outs[j].name, 1, WANT_CPU, NULL, &a) || arr_need(&a, outs[j].name, outs[j].n)) { arr_release(&a); goto out; }
        if (outs[j].n) memcpy(a.ptr, outs[j].src, outs[j].n);
        arr_release(&a);
    }
    PyObject *shape = PyTuple_New((Py_ssize_t)t.ndim);
    if (!shape) goto out;
    for (size_t j = 0; j < t.ndim; j++) PyTuple_SetItem(shape, (Py_ssize_t)j, PyLong_FromSize_t(t.shape[j]));
    const char *dirn = t.direction == LOFP_CKPT_SCALE_ENCODE ? "encode" : t.direction == LOFP_CKPT_SCALE_DECODE ? "decode" : "none";
    PyObject *blob = PyBytes_FromStringAndSize((const char *)&t.scheme, sizeof t.scheme);
    ret = Py_BuildValue("{s:s,s:s,s:O,s:N,s:s,s:n,s:N,s:n,s:n,s:n,s:n,s:n,s:d,s:d,s:s,s:O,s:O,s:z,s:z,s:z}",
                        "name", t.name ? t.name : "", "file", t.file ? t.file : "", "quantized", t.quantized ? Py_True : Py_False,
                        "shape", shape, "dtype", t.quantized ? "" : (lofp_dtype_name(t.dtype) ? lofp_dtype_name(t.dtype) : "?"),
                        "nbytes", (Py_ssize_t)t.nbytes, "scheme", blob, "rows", (Py_ssize_t)t.rows, "k", (Py_ssize_t)t.k,
                        "kp", (Py_ssize_t)t.kp, "codes_bytes", (Py_ssize_t)t.codes_bytes, "scales_bytes", (Py_ssize_t)t.scales_bytes,
                        "global_scale", (double)t.global_scale, "stored_scale", (double)t.stored_scale, "direction", dirn,
                        "gguf_split_nibbles", t.gguf_split_nibbles ? Py_True : Py_False,
                        "transposed", t.transposed ? Py_True : Py_False, "stored_codes", t.stored_codes,
                        "stored_scales", t.stored_scales, "stored_global", t.stored_global);
out:
    lofp_ckpt_tensor_release(&t);
    return ret;
}

/* ckpt_dequantize(handle, i, dtype_name, out) */
static PyObject *py_ckpt_dequantize(PyObject *self, PyObject *args)
{
    PyObject *cap, *oo;
    Py_ssize_t i;
    const char *dn;
    if (!PyArg_ParseTuple(args, "OnsO", &cap, &i, &dn, &oo)) return NULL;
    lofp_ckpt *c = get_ckpt(cap);
    if (!c) return NULL;
    lofp_dtype dt;
    if (lofp_dtype_from_name(dn, &dt) != LOFP_OK) return raise_error(LOFP_ERR_NOT_FOUND, -1, "unknown dtype '%s'", dn);
    if (i < 0 || (size_t)i >= lofp_ckpt_count(c)) return raise_error(LOFP_ERR_NOT_FOUND, -1, "no tensor %zd", i);
    arr_t o;
    if (arr_get(oo, "out", 1, WANT_CPU, NULL, &o)) return NULL;
    lofp_ckpt_tensor t;
    lofp_io_error err;
    lofp_status st;
    memset(&t, 0, sizeof t);
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_get(c, (size_t)i, &t, &err);
    Py_END_ALLOW_THREADS
    PyObject *ret = NULL;
    if (st != LOFP_OK) { raise_error(st, -1, "%s", err.message); goto out; }
    size_t numel = 1;
    for (size_t j = 0; j < t.ndim; j++) numel *= t.shape[j];
    if (arr_need(&o, "out", numel * (lofp_dtype_bits(dt) / 8))) goto out;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_ckpt_dequantize(&t, dt, o.ptr, &err);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_error(st, -1, "%s", err.message); goto out; }
    ret = Py_NewRef(Py_None);
out:
    lofp_ckpt_tensor_release(&t);
    arr_release(&o);
    return ret;
}

/* ------------------------------------------------------------------------------------------ */
/* CUDA                                                                                        */
/* ------------------------------------------------------------------------------------------ */

#ifdef LOFP_PY_CUDA

/* The consumer stream given to __dlpack__: the handle itself, except that the legacy default
 * stream (handle 0) is spelled 1 there (DLPack reserves 0). */
typedef struct { PyObject *dl; lofp_cuda_stream s; } stream_t;

static int get_stream(PyObject *o, stream_t *st)
{
    unsigned long long h = PyLong_AsUnsignedLongLong(o);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    st->s = (lofp_cuda_stream)(uintptr_t)h;
    st->dl = PyLong_FromUnsignedLongLong(h == 0 ? 1 : h);
    return st->dl ? 0 : -1;
}

/* Makes the operands' device current; returns the previous device (restored by dev_restore). */
typedef struct { int prev; int set; } devguard_t;

static int dev_enter_id(int device_id, devguard_t *g)
{
    g->set = 0;
    if (cudaGetDevice(&g->prev) != 0) { raise_error(LOFP_ERR_DEVICE, -1, "cudaGetDevice failed"); return -1; }
    if (g->prev != device_id) {
        if (cudaSetDevice(device_id) != 0) { raise_error(LOFP_ERR_DEVICE, -1, "cudaSetDevice(%d) failed", device_id); return -1; }
        g->set = 1;
    }
    return 0;
}

static int dev_enter(const arr_t *a, devguard_t *g) { return dev_enter_id(a->device_id, g); }

static void dev_leave(devguard_t *g)
{
    if (g->set) cudaSetDevice(g->prev);
}

static int same_device(const arr_t *a, const arr_t *b, const char *name)
{
    if (b->ptr && a->device_id != b->device_id) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is on cuda:%d, the input on cuda:%d", name, b->device_id, a->device_id);
        return -1;
    }
    return 0;
}

static PyObject *py_cuda_device_count(PyObject *self, PyObject *args) { return PyLong_FromLong(lofp_cuda_device_count()); }
static PyObject *py_cuda_workspace_bytes(PyObject *self, PyObject *args) { return PyLong_FromSize_t(lofp_cuda_workspace_bytes()); }

/* cuda_quantize(blob, dt, x, rows, k, layout, codes, scales, global_out|None, ws, stream, global_in|None, check)
 *   -> nonfinite_blocks (or -1 when check is off) */
static PyObject *py_cuda_quantize(PyObject *self, PyObject *args)
{
    PyObject *blob, *xo, *co, *so, *go, *wso, *sto, *gin;
    int dt, check;
    Py_ssize_t rows, k;
    const char *ln;
    lofp_scheme s;
    lofp_layout l;
    stream_t stream = {0};
    if (!PyArg_ParseTuple(args, "OiOnnsOOOOOOp", &blob, &dt, &xo, &rows, &k, &ln, &co, &so, &go, &wso, &sto, &gin, &check) ||
        get_scheme(blob, &s) || check_dtype(dt) || get_layout(ln, &l) || check_sizes(rows, k, "x") || get_stream(sto, &stream))
        return NULL;
    size_t kp = lofp_padded_k(&s, (size_t)k);
    PyObject *ret = NULL;
    arr_t x, c, sc, g, ws;
    memset(&x, 0, sizeof x); memset(&c, 0, sizeof c); memset(&sc, 0, sizeof sc); memset(&g, 0, sizeof g); memset(&ws, 0, sizeof ws);
    devguard_t dg = {0, 0};
    if (!kp) { raise_error(LOFP_ERR_SHAPE, -1, "last dimension %zd is not a multiple of the block %u (pass pad=True)", k, s.block); goto out0; }
    float gval = 0;
    if (gin != Py_None) {
        gval = (float)PyFloat_AsDouble(gin);
        if (PyErr_Occurred()) goto out0;
        if (!(isfinite(gval) && gval > 0)) { raise_error(LOFP_ERR_INVALID_ARG, -1, "global_scale must be finite and > 0"); goto out0; }
    }
    if (arr_get(xo, "x", 0, WANT_CUDA, stream.dl, &x) || arr_get(co, "codes", 1, WANT_CUDA, stream.dl, &c) ||
        arr_get(so, "scales", 1, WANT_CUDA, stream.dl, &sc) || arr_get(wso, "workspace", 1, WANT_CUDA, stream.dl, &ws))
        goto out;
    if (go != Py_None && arr_get(go, "global_scale", 1, WANT_CUDA, stream.dl, &g)) goto out;
    if (same_device(&x, &c, "codes") || same_device(&x, &sc, "scales") || same_device(&x, &ws, "workspace") ||
        same_device(&x, &g, "global_scale"))
        goto out;
    if (arr_need(&x, "x", (size_t)rows * (size_t)k * dtype_size(dt)) ||
        arr_need(&c, "codes", lofp_codes_bytes(&s, (size_t)rows, (size_t)k)) ||
        arr_need(&sc, "scales", lofp_layout_required_bytes((size_t)rows, kp, s.block, l)) ||
        arr_need_at_least(&ws, "workspace", lofp_cuda_workspace_bytes()) || (g.ptr && arr_need(&g, "global_scale", 4)))
        goto out;
    if (dev_enter(&x, &dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    if (gin != Py_None)
        st = lofp_cuda_quantize_with_global(&s, (lofp_dtype)dt, x.ptr, (size_t)rows, (size_t)k, gval, l, (uint8_t *)c.ptr,
                                            (uint8_t *)sc.ptr, ws.ptr, stream.s);
    else
        st = lofp_cuda_quantize(&s, (lofp_dtype)dt, x.ptr, (size_t)rows, (size_t)k, l, (uint8_t *)c.ptr, (uint8_t *)sc.ptr,
                                (float *)g.ptr, ws.ptr, stream.s);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "cuda quantize"); goto out; }
    Py_ssize_t nonfinite = -1;
    if (check) {
        lofp_quant_report rep;
        memset(&rep, 0, sizeof rep);
        Py_BEGIN_ALLOW_THREADS
        st = lofp_cuda_quant_report(ws.ptr, stream.s, &rep);
        Py_END_ALLOW_THREADS
        if (st == LOFP_ERR_NONFINITE) {
            raise_error(st, (long long)rep.first_bad_index, "x has a non-finite value at flat index %zu%s", rep.first_bad_index,
                        s.id == LOFP_SCHEME_NVFP4 ? "" : " (pass propagate_nonfinite=True to keep going)");
            goto out;
        }
        if (st != LOFP_OK) { raise_call(st, "cuda quantize"); goto out; }
        nonfinite = (Py_ssize_t)rep.nonfinite_blocks;
    }
    ret = PyLong_FromSsize_t(nonfinite);
out:
    dev_leave(&dg);
    arr_release(&x); arr_release(&c); arr_release(&sc); arr_release(&g); arr_release(&ws);
out0:
    Py_XDECREF(stream.dl);
    return ret;
}

/* cuda_dequantize(blob, codes, scales, layout, global_dev|None, rows, k, out_dt, out, stream) */
static PyObject *py_cuda_dequantize(PyObject *self, PyObject *args)
{
    PyObject *blob, *co, *so, *go, *oo, *sto;
    const char *ln;
    Py_ssize_t rows, k;
    int dt;
    lofp_scheme s;
    lofp_layout l;
    stream_t stream = {0};
    if (!PyArg_ParseTuple(args, "OOOsOnniOO", &blob, &co, &so, &ln, &go, &rows, &k, &dt, &oo, &sto) || get_scheme(blob, &s) ||
        get_layout(ln, &l) || check_dtype(dt) || check_sizes(rows, k, "the tensor") || get_stream(sto, &stream))
        return NULL;
    PyObject *ret = NULL;
    arr_t c, sc, g, o;
    memset(&c, 0, sizeof c); memset(&sc, 0, sizeof sc); memset(&g, 0, sizeof g); memset(&o, 0, sizeof o);
    devguard_t dg = {0, 0};
    size_t kp = lofp_padded_k(&s, (size_t)k);
    if (!kp) { raise_error(LOFP_ERR_SHAPE, -1, "K %zd is not a multiple of the block %u", k, s.block); goto out; }
    if (arr_get(co, "codes", 0, WANT_CUDA, stream.dl, &c) || arr_get(so, "scales", 0, WANT_CUDA, stream.dl, &sc) ||
        arr_get(oo, "out", 1, WANT_CUDA, stream.dl, &o))
        goto out;
    if (go != Py_None && arr_get(go, "global_scale", 0, WANT_CUDA, stream.dl, &g)) goto out;
    if (same_device(&c, &sc, "scales") || same_device(&c, &o, "out") || same_device(&c, &g, "global_scale")) goto out;
    if (arr_need(&c, "codes", lofp_codes_bytes(&s, (size_t)rows, (size_t)k)) ||
        arr_need(&sc, "scales", lofp_layout_required_bytes((size_t)rows, kp, s.block, l)) ||
        arr_need(&o, "out", (size_t)rows * (size_t)k * dtype_size(dt)) || (g.ptr && arr_need(&g, "global_scale", 4)))
        goto out;
    if (dev_enter(&c, &dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_dequantize(&s, (uint8_t *)c.ptr, (uint8_t *)sc.ptr, l, (const float *)g.ptr, (size_t)rows, (size_t)k,
                              (lofp_dtype)dt, o.ptr, stream.s);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "cuda dequantize"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    dev_leave(&dg);
    arr_release(&c); arr_release(&sc); arr_release(&g); arr_release(&o);
    Py_XDECREF(stream.dl);
    return ret;
}

typedef struct { lofp_cuda_w4 w; int device_id; } w4_box;

static void w4_capsule_free(PyObject *cap)
{
    w4_box *b = PyCapsule_GetPointer(cap, "lofp.cuda_w4");
    if (!b) { PyErr_Clear(); return; }
    int prev = 0;
    cudaGetDevice(&prev);
    if (prev != b->device_id) cudaSetDevice(b->device_id);
    lofp_cuda_w4_free(&b->w);
    if (prev != b->device_id) cudaSetDevice(prev);
    PyMem_Free(b);
}

/* cuda_w4_prepare(blob, codes, scales, global_dev|None, n, k, stream) -> handle */
static PyObject *py_cuda_w4_prepare(PyObject *self, PyObject *args)
{
    PyObject *blob, *co, *so, *go, *sto;
    Py_ssize_t n, k;
    lofp_scheme s;
    stream_t stream = {0};
    if (!PyArg_ParseTuple(args, "OOOOnnO", &blob, &co, &so, &go, &n, &k, &sto) || get_scheme(blob, &s) ||
        check_sizes(n, k, "the weight") || get_stream(sto, &stream))
        return NULL;
    PyObject *ret = NULL;
    arr_t c, sc, g;
    memset(&c, 0, sizeof c); memset(&sc, 0, sizeof sc); memset(&g, 0, sizeof g);
    devguard_t dg = {0, 0};
    w4_box *b = NULL;
    if (arr_get(co, "codes", 0, WANT_CUDA, stream.dl, &c) || arr_get(so, "scales", 0, WANT_CUDA, stream.dl, &sc)) goto out;
    if (go != Py_None && arr_get(go, "global_scale", 0, WANT_CUDA, stream.dl, &g)) goto out;
    if (same_device(&c, &sc, "scales") || same_device(&c, &g, "global_scale")) goto out;
    if (arr_need(&c, "codes", lofp_codes_bytes(&s, (size_t)n, (size_t)k)) ||
        arr_need(&sc, "scales", lofp_scales_bytes(&s, (size_t)n, (size_t)k)))
        goto out;
    b = PyMem_Calloc(1, sizeof *b);
    if (!b) { PyErr_NoMemory(); goto out; }
    b->device_id = c.device_id;
    if (dev_enter(&c, &dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_w4_prepare(&s, (uint8_t *)c.ptr, (uint8_t *)sc.ptr, (const float *)g.ptr, (size_t)n, (size_t)k, &b->w, stream.s);
    Py_END_ALLOW_THREADS
    if (st == LOFP_ERR_SHAPE) { raise_error(st, -1, "W4A16 weights need K %% 128 == 0 and N %% 16 == 0 (got N %zd, K %zd)", n, k); goto out; }
    if (st != LOFP_OK) { raise_call(st, "cuda w4 prepare"); goto out; }
    ret = PyCapsule_New(b, "lofp.cuda_w4", w4_capsule_free);
    if (ret) b = NULL;
    else lofp_cuda_w4_free(&b->w);
out:
    dev_leave(&dg);
    PyMem_Free(b);
    arr_release(&c); arr_release(&sc); arr_release(&g);
    Py_XDECREF(stream.dl);
    return ret;
}

/* The arguments both array GEMM bindings share: the weight handle, a (bf16 [m, k], 16-byte
 * aligned) and out ([m, n] of out_dt) as arrays on the weight's device, and the stream. On success
 * the caller owns g's references and releases them with gemm_args_release (also after a failure:
 * whatever was taken is given back). */
typedef struct { w4_box *b; arr_t a, c; stream_t stream; devguard_t dg; } gemm_args_t;

static void gemm_args_release(gemm_args_t *g)
{
    dev_leave(&g->dg);
    arr_release(&g->a); arr_release(&g->c);
    Py_XDECREF(g->stream.dl);
}

static int gemm_args_get(gemm_args_t *g, PyObject *cap, PyObject *ao, Py_ssize_t m, int dt, PyObject *co, PyObject *sto,
                         const char *what)
{
    memset(g, 0, sizeof *g);
    if (!(g->b = PyCapsule_GetPointer(cap, "lofp.cuda_w4"))) return -1;
    if (m <= 0) { raise_error(LOFP_ERR_INVALID_ARG, -1, "m must be > 0"); return -1; }
    if (dt != LOFP_DTYPE_F32 && dt != LOFP_DTYPE_BF16) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "%s output is float32 or bfloat16", what);
        return -1;
    }
    if (get_stream(sto, &g->stream)) return -1;
    if (arr_get(ao, "a", 0, WANT_CUDA, g->stream.dl, &g->a) || arr_get(co, "out", 1, WANT_CUDA, g->stream.dl, &g->c)) return -1;
    if (g->a.device_id != g->b->device_id) {
        raise_error(LOFP_ERR_INVALID_ARG, -1, "a is on cuda:%d, the weight on cuda:%d", g->a.device_id, g->b->device_id);
        return -1;
    }
    if (same_device(&g->a, &g->c, "out")) return -1;
    if (arr_need(&g->a, "a", (size_t)m * g->b->w.k * 2) || arr_need(&g->c, "out", (size_t)m * g->b->w.n * dtype_size(dt))) return -1;
    if ((uintptr_t)g->a.ptr % 16) { raise_error(LOFP_ERR_INVALID_ARG, -1, "a must be 16-byte aligned"); return -1; }
    return 0;
}

/* cuda_w4a16_gemm(handle, a_bf16, m, out_dt, c, stream) */
static PyObject *py_cuda_w4a16_gemm(PyObject *self, PyObject *args)
{
    PyObject *cap, *ao, *co, *sto;
    Py_ssize_t m;
    int dt;
    if (!PyArg_ParseTuple(args, "OOniOO", &cap, &ao, &m, &dt, &co, &sto)) return NULL;
    PyObject *ret = NULL;
    gemm_args_t g;
    if (gemm_args_get(&g, cap, ao, m, dt, co, sto, "W4A16") || dev_enter(&g.a, &g.dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_w4a16_gemm(&g.b->w, g.a.ptr, (size_t)m, (lofp_dtype)dt, g.c.ptr, g.stream.s);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "cuda w4a16 gemm"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    gemm_args_release(&g);
    return ret;
}

/* W4A8 failures: the library's UNSUPPORTED covers two cases the caller can act on. */
static PyObject *raise_w4a8(lofp_status st)
{
    if (st == LOFP_ERR_UNSUPPORTED)
        return raise_error(st, -1, "cuda w4a8 gemm: needs MXFP4 weights (NVFP4's 16-element blocks are not supported) "
                                   "and a compute capability 9.0 GPU (sm_90a)");
    return raise_call(st, "cuda w4a8 gemm");
}

static PyObject *py_cuda_w4a8_workspace_bytes(PyObject *self, PyObject *args)
{
    Py_ssize_t m, k;
    if (!PyArg_ParseTuple(args, "nn", &m, &k)) return NULL;
    if (m <= 0 || k <= 0) return raise_error(LOFP_ERR_INVALID_ARG, -1, "m and k must be > 0");
    return PyLong_FromSize_t(lofp_cuda_w4a8_workspace_bytes((size_t)m, (size_t)k));
}

/* cuda_large_test_algo(index): the cuBLASLt heuristic's candidate every later plan takes (0, the
 * default, is the production choice; cached plans are dropped) -- a benchmark hook */
static PyObject *py_cuda_large_test_algo(PyObject *self, PyObject *args)
{
    int index;
    if (!PyArg_ParseTuple(args, "i", &index)) return NULL;
    lofp_cuda_large_test_algo(index);
    Py_RETURN_NONE;
}

/* cuda_large_test_config(cap_bytes, lt_off): the benchmark hook of the large-M routes (transient
 * chunk bound, 0 = default; cuBLASLt switched off) -- process-wide, not for production use */
static PyObject *py_cuda_large_test_config(PyObject *self, PyObject *args)
{
    unsigned long long cap;
    int off;
    if (!PyArg_ParseTuple(args, "Kp", &cap, &off)) return NULL;
    lofp_cuda_large_test_config((size_t)cap, off);
    Py_RETURN_NONE;
}

/* cuda_w4a8_gemm(handle, a_bf16, m, out_dt, c, ws, stream) */
static PyObject *py_cuda_w4a8_gemm(PyObject *self, PyObject *args)
{
    PyObject *cap, *ao, *co, *wso, *sto;
    Py_ssize_t m;
    int dt;
    if (!PyArg_ParseTuple(args, "OOniOOO", &cap, &ao, &m, &dt, &co, &wso, &sto)) return NULL;
    PyObject *ret = NULL;
    gemm_args_t g;
    arr_t ws;
    memset(&ws, 0, sizeof ws);
    if (gemm_args_get(&g, cap, ao, m, dt, co, sto, "W4A8") ||
        arr_get(wso, "workspace", 1, WANT_CUDA, g.stream.dl, &ws) || same_device(&g.a, &ws, "workspace") ||
        arr_need_at_least(&ws, "workspace", lofp_cuda_w4a8_workspace_bytes((size_t)m, g.b->w.k)))
        goto out;
    if ((uintptr_t)ws.ptr % 256) { raise_error(LOFP_ERR_INVALID_ARG, -1, "the workspace must be 256-byte aligned"); goto out; }
    if (dev_enter(&g.a, &g.dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_w4a8_gemm(&g.b->w, g.a.ptr, (size_t)m, (lofp_dtype)dt, g.c.ptr, ws.ptr, ws.nbytes, g.stream.s);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_w4a8(st); goto out; }
    ret = Py_NewRef(Py_None);
out:
    arr_release(&ws);
    gemm_args_release(&g);
    return ret;
}

/* The eager fast path of lofp.torch (W4A16Linear.forward) takes plain integers instead of arrays:
 * one capsule lookup and a few integer conversions per call, where the array entry points above
 * cost four Python method calls per torch tensor (or a DLPack export) and a tuple parse. What
 * arr_get / arr_need check there is then the caller's promise (lofp/torch.py makes it): the
 * pointers address live device buffers of the right sizes (a: bf16 [m, k]; c: [m, n] of out_dt;
 * ws: ws_bytes) on the weight's device, ordered on `stream` (0 = the legacy default stream).
 * The scalars and the alignments are still checked here, since a bad one would fault on the GPU. */
static int fast_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *fn)
{
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, want, nargs);
    return -1;
}

static int fast_ptr(PyObject *o, const char *name, void **p)
{
    *p = PyLong_AsVoidPtr(o);
    if (*p) return 0;
    if (!PyErr_Occurred()) raise_error(LOFP_ERR_INVALID_ARG, -1, "%s is a null pointer", name);
    return -1;
}

/* The leading arguments of both fast entry points: (handle, a_ptr, m, out_dt, c_ptr). */
static w4_box *fast_common(PyObject *const *args, void **a, size_t *m, int *dt, void **c)
{
    w4_box *b = PyCapsule_GetPointer(args[0], "lofp.cuda_w4");
    if (!b || fast_ptr(args[1], "a", a)) return NULL;
    Py_ssize_t mm = PyLong_AsSsize_t(args[2]);
    if (mm == -1 && PyErr_Occurred()) return NULL;
    long d = PyLong_AsLong(args[3]);
    if (d == -1 && PyErr_Occurred()) return NULL;
    if (fast_ptr(args[4], "out", c)) return NULL;
    if (mm <= 0) { raise_error(LOFP_ERR_INVALID_ARG, -1, "m must be > 0"); return NULL; }
    if (d != LOFP_DTYPE_F32 && d != LOFP_DTYPE_BF16) { raise_error(LOFP_ERR_INVALID_ARG, -1, "the output is float32 or bfloat16"); return NULL; }
    if ((uintptr_t)*a % 16) { raise_error(LOFP_ERR_INVALID_ARG, -1, "a must be 16-byte aligned"); return NULL; }
    *m = (size_t)mm;
    *dt = (int)d;
    return b;
}

static int fast_stream(PyObject *o, lofp_cuda_stream *s)
{
    unsigned long long h = PyLong_AsUnsignedLongLong(o);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *s = (lofp_cuda_stream)(uintptr_t)h;
    return 0;
}

/* cuda_w4a16_gemm_ptr(handle, a_ptr, m, out_dt, c_ptr, stream) */
static PyObject *py_cuda_w4a16_gemm_ptr(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *a, *c;
    size_t m;
    int dt;
    lofp_cuda_stream s;
    if (fast_nargs(nargs, 6, "cuda_w4a16_gemm_ptr")) return NULL;
    w4_box *b = fast_common(args, &a, &m, &dt, &c);
    if (!b || fast_stream(args[5], &s)) return NULL;
    devguard_t dg;
    if (dev_enter_id(b->device_id, &dg)) return NULL;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_w4a16_gemm(&b->w, a, m, (lofp_dtype)dt, c, s);
    Py_END_ALLOW_THREADS
    dev_leave(&dg);
    if (st != LOFP_OK) return raise_call(st, "cuda w4a16 gemm");
    Py_RETURN_NONE;
}

/* cuda_w4a8_gemm_ptr(handle, a_ptr, m, out_dt, c_ptr, ws_ptr, ws_bytes, ws_state, stream) -> ws_state
 * (lofp_cuda_w4a8_gemm_reuse: ws_state 0 = LOFP_W4A8_WS_EMPTY, or what a previous call returned
 * for the same a and workspace) */
static PyObject *py_cuda_w4a8_gemm_ptr(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *a, *c, *ws;
    size_t m;
    int dt;
    lofp_cuda_stream s;
    if (fast_nargs(nargs, 9, "cuda_w4a8_gemm_ptr")) return NULL;
    w4_box *b = fast_common(args, &a, &m, &dt, &c);
    if (!b || fast_ptr(args[5], "workspace", &ws)) return NULL;
    size_t wsb = PyLong_AsSize_t(args[6]);
    if (wsb == (size_t)-1 && PyErr_Occurred()) return NULL;
    const long held_in = PyLong_AsLong(args[7]);
    if (held_in == -1 && PyErr_Occurred()) return NULL;
    if (fast_stream(args[8], &s)) return NULL;
    if (wsb < lofp_cuda_w4a8_workspace_bytes(m, b->w.k))
        return raise_error(LOFP_ERR_BUFFER_TOO_SMALL, -1, "the workspace has %zu bytes, needs at least %zu", wsb,
                           lofp_cuda_w4a8_workspace_bytes(m, b->w.k));
    if ((uintptr_t)ws % 256) return raise_error(LOFP_ERR_INVALID_ARG, -1, "the workspace must be 256-byte aligned");
    if (held_in != LOFP_W4A8_WS_EMPTY && held_in != LOFP_W4A8_WS_KERNEL && held_in != LOFP_W4A8_WS_PLAIN)
        return raise_error(LOFP_ERR_INVALID_ARG, -1, "unknown workspace state %ld", held_in);
    int held = (int)held_in;
    devguard_t dg;
    if (dev_enter_id(b->device_id, &dg)) return NULL;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_w4a8_gemm_reuse(&b->w, a, m, (lofp_dtype)dt, c, ws, wsb, &held, s);
    Py_END_ALLOW_THREADS
    dev_leave(&dg);
    if (st != LOFP_OK) return raise_w4a8(st);
    return PyLong_FromLong(held);
}

static PyObject *py_cuda_w4_shape(PyObject *self, PyObject *args)
{
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    w4_box *b = PyCapsule_GetPointer(cap, "lofp.cuda_w4");
    if (!b) return NULL;
    return Py_BuildValue("(nni)", (Py_ssize_t)b->w.n, (Py_ssize_t)b->w.k, b->device_id);
}

/* cuda_uq_store(blob, dt, k, v, tokens, hk, D, slot_mapping_i64, cache, block_size, stream) */
static PyObject *py_cuda_uq_store(PyObject *self, PyObject *args)
{
    PyObject *blob, *ko, *vo, *smo, *cao, *sto;
    int dt;
    Py_ssize_t nt, hk, D, bs;
    lofp_scheme s;
    stream_t stream = {0};
    if (!PyArg_ParseTuple(args, "OiOOnnnOOnO", &blob, &dt, &ko, &vo, &nt, &hk, &D, &smo, &cao, &bs, &sto) ||
        get_scheme(blob, &s) || check_dtype(dt) || get_stream(sto, &stream))
        return NULL;
    PyObject *ret = NULL;
    arr_t k, v, sm, ca;
    memset(&k, 0, sizeof k); memset(&v, 0, sizeof v); memset(&sm, 0, sizeof sm); memset(&ca, 0, sizeof ca);
    devguard_t dg = {0, 0};
    if (nt <= 0) { ret = Py_NewRef(Py_None); goto out; }
    if (arr_get(ko, "k", 0, WANT_CUDA, stream.dl, &k) || arr_get(vo, "v", 0, WANT_CUDA, stream.dl, &v) ||
        arr_get(smo, "slot_mapping", 0, WANT_CUDA, stream.dl, &sm) || arr_get(cao, "cache", 1, WANT_CUDA, stream.dl, &ca))
        goto out;
    if (same_device(&k, &v, "v") || same_device(&k, &sm, "slot_mapping") || same_device(&k, &ca, "cache")) goto out;
    size_t per = (size_t)nt * (size_t)hk * (size_t)D * dtype_size(dt);
    if (arr_need(&k, "k", per) || arr_need(&v, "v", per) || arr_need(&sm, "slot_mapping", (size_t)nt * 8)) goto out;
    if (dev_enter(&k, &dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_uq_store(&s, (lofp_dtype)dt, k.ptr, v.ptr, (size_t)nt, (size_t)hk, (size_t)D, (const int64_t *)sm.ptr,
                            (uint8_t *)ca.ptr, (size_t)bs, stream.s);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "cuda ultraquant store"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    dev_leave(&dg);
    arr_release(&k); arr_release(&v); arr_release(&sm); arr_release(&ca);
    Py_XDECREF(stream.dl);
    return ret;
}

static void fill_uq_args(lofp_cuda_uq_attention_args *a, Py_ssize_t maxb, Py_ssize_t maxlen, Py_ssize_t batch, Py_ssize_t hq,
                         Py_ssize_t hk, Py_ssize_t D, Py_ssize_t bs, int splits)
{
    memset(a, 0, sizeof *a);
    a->max_blocks_per_seq = (size_t)maxb;
    a->max_seq_len = (size_t)maxlen;
    a->batch = (size_t)batch; a->hq = (size_t)hq; a->hk = (size_t)hk; a->head_dim = (size_t)D; a->block_size = (size_t)bs;
    a->num_splits = splits;
}

/* cuda_uq_attention_ws_bytes(max_blocks, max_seq_len, batch, hq, hk, D, block_size, num_splits) */
static PyObject *py_cuda_uq_attention_ws_bytes(PyObject *self, PyObject *args)
{
    Py_ssize_t maxb, maxlen, batch, hq, hk, D, bs;
    int splits;
    if (!PyArg_ParseTuple(args, "nnnnnnni", &maxb, &maxlen, &batch, &hq, &hk, &D, &bs, &splits)) return NULL;
    lofp_cuda_uq_attention_args a;
    fill_uq_args(&a, maxb, maxlen, batch, hq, hk, D, bs, splits);
    return PyLong_FromSize_t(lofp_cuda_uq_attention_workspace_bytes(&a));
}

/* cuda_uq_attention(q, q_dt, cache, block_tables, max_blocks, seq_lens, max_seq_len, batch, hq, hk, D,
 *                   block_size, scale, sinks|None, num_splits, out, workspace, stream) */
static PyObject *py_cuda_uq_attention(PyObject *self, PyObject *args)
{
    PyObject *qo, *cao, *bto, *slo, *sko, *oo, *wso, *sto;
    int qdt, splits;
    Py_ssize_t maxb, maxlen, batch, hq, hk, D, bs;
    double scale;
    stream_t stream = {0};
    if (!PyArg_ParseTuple(args, "OiOOnOnnnnnndOiOOO", &qo, &qdt, &cao, &bto, &maxb, &slo, &maxlen, &batch, &hq, &hk, &D, &bs,
                          &scale, &sko, &splits, &oo, &wso, &sto) ||
        check_dtype(qdt) || get_stream(sto, &stream))
        return NULL;
    PyObject *ret = NULL;
    arr_t q, ca, bt, sl, sk, o, ws;
    memset(&q, 0, sizeof q); memset(&ca, 0, sizeof ca); memset(&bt, 0, sizeof bt); memset(&sl, 0, sizeof sl);
    memset(&sk, 0, sizeof sk); memset(&o, 0, sizeof o); memset(&ws, 0, sizeof ws);
    devguard_t dg = {0, 0};
    lofp_cuda_uq_attention_args a;
    fill_uq_args(&a, maxb, maxlen, batch, hq, hk, D, bs, splits);
    if (arr_get(qo, "q", 0, WANT_CUDA, stream.dl, &q) || arr_get(cao, "cache", 0, WANT_CUDA, stream.dl, &ca) ||
        arr_get(bto, "block_tables", 0, WANT_CUDA, stream.dl, &bt) || arr_get(slo, "seq_lens", 0, WANT_CUDA, stream.dl, &sl) ||
        arr_get(oo, "out", 1, WANT_CUDA, stream.dl, &o) || arr_get(wso, "workspace", 1, WANT_CUDA, stream.dl, &ws))
        goto out;
    if (sko != Py_None && arr_get(sko, "sinks", 0, WANT_CUDA, stream.dl, &sk)) goto out;
    if (same_device(&q, &ca, "cache") || same_device(&q, &bt, "block_tables") || same_device(&q, &sl, "seq_lens") ||
        same_device(&q, &o, "out") || same_device(&q, &ws, "workspace") || same_device(&q, &sk, "sinks"))
        goto out;
    size_t per = (size_t)batch * (size_t)hq * (size_t)D;
    if (arr_need(&q, "q", per * dtype_size(qdt)) || arr_need(&o, "out", per * 4) ||
        arr_need(&bt, "block_tables", (size_t)batch * (size_t)maxb * 4) || arr_need(&sl, "seq_lens", (size_t)batch * 4) ||
        arr_need_at_least(&ws, "workspace", lofp_cuda_uq_attention_workspace_bytes(&a)) || (sk.ptr && arr_need(&sk, "sinks", (size_t)hq * 4)))
        goto out;
    a.d_q = q.ptr; a.q_dtype = (lofp_dtype)qdt; a.d_cache = (const uint8_t *)ca.ptr; a.d_block_tables = (const int32_t *)bt.ptr;
    a.d_seq_lens = (const int32_t *)sl.ptr; a.scale = (float)scale; a.d_sinks = (const float *)sk.ptr; a.d_out = (float *)o.ptr;
    a.d_workspace = ws.ptr;
    if (dev_enter(&q, &dg)) goto out;
    lofp_status st;
    Py_BEGIN_ALLOW_THREADS
    st = lofp_cuda_uq_decode_attention(&a, stream.s);
    Py_END_ALLOW_THREADS
    if (st != LOFP_OK) { raise_call(st, "cuda ultraquant attention"); goto out; }
    ret = Py_NewRef(Py_None);
out:
    dev_leave(&dg);
    arr_release(&q); arr_release(&ca); arr_release(&bt); arr_release(&sl); arr_release(&sk); arr_release(&o); arr_release(&ws);
    Py_XDECREF(stream.dl);
    return ret;
}
#endif /* LOFP_PY_CUDA */

/* ------------------------------------------------------------------------------------------ */
/* Module                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"noop", py_noop, METH_VARARGS, "noop(*args) -> None: does nothing (binding-overhead baseline)."},
    {"register_tensor_type", py_register_tensor_type, METH_VARARGS, "register_tensor_type(torch.Tensor)"},
    {"tensor_path", py_tensor_path, METH_VARARGS, "tensor_path(mode=None) -> previous mode ('direct' or 'dlpack')"},
    {"from_dlpack", py_from_dlpack, METH_VARARGS, "from_dlpack(obj, name, stream=None, writable=False) -> DLTensor (the capsule consumed)"},
    {"version", py_version, METH_NOARGS, "version() -> str: the C library's version."},
    {"gemm_verify", py_gemm_verify, METH_VARARGS, "gemm_verify(a_op, b_op, c_f32, tol, threads) -> dict: lofp_gemm_verify's report."},
    {"kernel_name", py_kernel_name, METH_VARARGS, "kernel_name(scheme, op) -> str: the CPU kernel variant that runs."},
    {"scheme", py_scheme, METH_VARARGS, "scheme(name, rounding, scale_rule, block, two_level, pad, propagate, c, rotate, hadamard, seed) -> bytes"},
    {"scheme_info", py_scheme_info, METH_VARARGS, "scheme_info(scheme) -> dict"},
    {"sizes", py_sizes, METH_VARARGS, "sizes(scheme, rows, k) -> (padded_k, codes_bytes, scales_bytes)"},
    {"quantize_method", py_quantize_method, METH_VARARGS, "quantize_method(scheme, dtype, x, rows, k, codes, scales, global|None, threads, method, importance|None, hessian|None, damp, act_order, mse_scales) -> (global, padded_k)"},
    {"quantize", py_quantize, METH_VARARGS, "quantize(scheme, dtype, x, rows, k, codes, scales, global|None, threads) -> (global, nonfinite_blocks, padded_k)"},
    {"dequantize", py_dequantize, METH_VARARGS, "dequantize(scheme, codes, scales, global, rows, k, dtype, out, threads)"},
    {"nvfp4_scales", py_nvfp4_scales, METH_VARARGS, "nvfp4_scales(dtype, x) -> (encode_global, decode_scale)"},
    {"decode_from_encode", py_decode_from_encode, METH_VARARGS, "decode_from_encode(g) -> float"},
    {"encode_from_decode", py_encode_from_decode, METH_VARARGS, "encode_from_decode(d) -> float"},
    {"elem_info", py_elem_info, METH_VARARGS, "elem_info(name) -> dict"},
    {"encode", py_encode, METH_VARARGS, "encode(elem, x, out, rounding, overflow, rbits|None)"},
    {"decode", py_decode, METH_VARARGS, "decode(elem, codes, out)"},
    {"layout_bytes", py_layout_bytes, METH_VARARGS, "layout_bytes(rows, k, block, layout) -> int"},
    {"layout_convert", py_layout_convert, METH_VARARGS, "layout_convert(scales, rows, cols, from, to, pad_byte, out)"},
    {"diagnose", py_diagnose, METH_VARARGS, "diagnose(buf, rows, k, block, expected, alt_block, expected_alt|None) -> dict"},
    {"fp4_repack", py_fp4_repack, METH_VARARGS, "fp4_repack(codes, out, rows, k, block, from_gguf, to_gguf)"},
    {"hadamard", py_hadamard, METH_VARARGS, "hadamard(x, d, dense): in place, per row"},
    {"gemm", py_gemm, METH_VARARGS, "gemm(m, n, k, a|None, a_dtype, a_quant|None, aq|None, b, out, threads, ref) -> kernel name"},
    {"weight_pack", py_weight_pack, METH_VARARGS, "weight_pack(scheme, codes, scales, n, k, layout, packed, unpack)"},
    {"weight_packed_bytes", py_weight_packed_bytes, METH_VARARGS, "weight_packed_bytes(scheme, n, k, layout) -> int"},
    {"kv_desc", py_kv_desc, METH_VARARGS, "kv_desc(format, head_dim, hk, block_size, num_blocks, c, hadamard, rotate_k) -> (desc, cache_bytes, slot_bytes, offsets)"},
    {"kv_store", py_kv_store, METH_VARARGS, "kv_store(desc, cache, dtype, k, v, num_tokens, slot_mapping, flags) -> (stored, skipped, zeroed)"},
    {"kv_gather", py_kv_gather, METH_VARARGS, "kv_gather(desc, cache, block_table, num_tokens, k_out|None, v_out|None)"},
    {"attention", py_attention, METH_VARARGS, "attention(desc, cache, num_seqs, qsl|None, q_dtype, q, block_tables, stride, seq_lens, hq, scale, sinks|None, path, threads, split, ws|None, out) -> (path, partitions, saturated_q)"},
    {"attention_ws_bytes", py_attention_ws_bytes, METH_VARARGS, "attention_ws_bytes(desc, hq, stride, path, threads, split, num_seqs, num_query_tokens, max_seq_len) -> int"},
    {"file_open", py_file_open, METH_VARARGS, "file_open(path) -> (handle, format, tensors, metadata)"},
    {"file_read", py_file_read, METH_VARARGS, "file_read(handle, index, out)"},
    {"file_write", py_file_write, METH_VARARGS, "file_write(path, tensors, metadata)"},
    {"qfile_describe", py_qfile_describe, METH_VARARGS, "qfile_describe(name, scheme, layout, pad_byte, shape, padded_k, source_dtype) -> dict"},
    {"qfile_load", py_qfile_load, METH_VARARGS, "qfile_load(handle, path, name) -> dict"},
    {"ckpt_convert", py_ckpt_convert, METH_VARARGS, "ckpt_convert(in, out, to, scheme, include, exclude, no_fuse, pad, input_scales, jobs, threads[, requantize_unfit[, profile]]) -> notes"},
    {"ckpt_verify", py_ckpt_verify, METH_VARARGS, "ckpt_verify(original, quantized, quiet) -> (description, n_quantized, n_ok, n_bad, lines)"},
    {"ckpt_import", py_ckpt_import, METH_VARARGS, "ckpt_import(in, out, dtype) -> notes"},
    {"calib_open", py_calib_open, METH_VARARGS, "calib_open(path) -> (handle, statistic, source, names)"},
    {"calib_meta", py_calib_meta, METH_VARARGS, "calib_meta(handle, key) -> str | None"},
    {"calib_find", py_calib_find, METH_VARARGS, "calib_find(handle, weight, k, diag|None, hess|None) -> tokens"},
    {"ckpt_open", py_ckpt_open, METH_VARARGS, "ckpt_open(path) -> (handle, format, description, count)"},
    {"ckpt_tensor", py_ckpt_tensor, METH_VARARGS, "ckpt_tensor(handle, i, codes|None, scales|None, data|None) -> dict"},
    {"ckpt_dequantize", py_ckpt_dequantize, METH_VARARGS, "ckpt_dequantize(handle, i, dtype, out)"},
#ifdef LOFP_PY_CUDA
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS, "cuda_device_count() -> int"},
    {"cuda_workspace_bytes", py_cuda_workspace_bytes, METH_NOARGS, "cuda_workspace_bytes() -> int"},
    {"cuda_quantize", py_cuda_quantize, METH_VARARGS, "cuda_quantize(...)"},
    {"cuda_dequantize", py_cuda_dequantize, METH_VARARGS, "cuda_dequantize(...)"},
    {"cuda_w4_prepare", py_cuda_w4_prepare, METH_VARARGS, "cuda_w4_prepare(...) -> handle"},
    {"cuda_w4_shape", py_cuda_w4_shape, METH_VARARGS, "cuda_w4_shape(handle) -> (n, k, device)"},
    {"cuda_w4a16_gemm", py_cuda_w4a16_gemm, METH_VARARGS, "cuda_w4a16_gemm(...)"},
    {"cuda_w4a16_gemm_ptr", (PyCFunction)(void (*)(void))py_cuda_w4a16_gemm_ptr, METH_FASTCALL,
     "cuda_w4a16_gemm_ptr(handle, a_ptr, m, out_dt, c_ptr, stream): unchecked pointers (lofp.torch's fast path)"},
    {"cuda_large_test_config", py_cuda_large_test_config, METH_VARARGS,
     "cuda_large_test_config(cap_bytes, lt_off): benchmark hook of the large-M routes (process-wide)"},
    {"cuda_large_test_algo", py_cuda_large_test_algo, METH_VARARGS,
     "cuda_large_test_algo(index): benchmark hook, the cuBLASLt heuristic candidate (process-wide)"},
    {"cuda_w4a8_workspace_bytes", py_cuda_w4a8_workspace_bytes, METH_VARARGS, "cuda_w4a8_workspace_bytes(m, k) -> int"},
    {"cuda_w4a8_gemm", py_cuda_w4a8_gemm, METH_VARARGS, "cuda_w4a8_gemm(handle, a_bf16, m, out_dt, c, ws, stream)"},
    {"cuda_w4a8_gemm_ptr", (PyCFunction)(void (*)(void))py_cuda_w4a8_gemm_ptr, METH_FASTCALL,
     "cuda_w4a8_gemm_ptr(handle, a_ptr, m, out_dt, c_ptr, ws_ptr, ws_bytes, ws_state, stream) -> ws_state: unchecked pointers"},
    {"cuda_uq_store", py_cuda_uq_store, METH_VARARGS, "cuda_uq_store(...)"},
    {"cuda_uq_attention_ws_bytes", py_cuda_uq_attention_ws_bytes, METH_VARARGS, "cuda_uq_attention_ws_bytes(...) -> int"},
    {"cuda_uq_attention", py_cuda_uq_attention, METH_VARARGS, "cuda_uq_attention(...)"},
#endif
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "lofp._lofp",
                                    "The C extension under lofp (use the lofp package, not this module).", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__lofp(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    LofpError = PyErr_NewExceptionWithDoc(
        "lofp.Error",
        "An error reported by lofp. str(e) is '<status>: <what went wrong>'; e.status is the status name\n"
        "('invalid argument', 'shape', 'non-finite input', ...), e.code the library's lofp_status value\n"
        "and e.index the flat index it concerns, or None.",
        PyExc_ValueError, NULL);
    if (!LofpError || PyModule_AddObjectRef(m, "Error", LofpError) < 0) { Py_DECREF(m); return NULL; }
    DLHeldType = (PyTypeObject *)PyType_FromSpec(&dlheld_spec);
    if (!DLHeldType || PyModule_AddObjectRef(m, "DLTensor", (PyObject *)DLHeldType) < 0) { Py_DECREF(m); return NULL; }
    PyObject *ver = Py_BuildValue("(iii)", LOFP_VERSION_MAJOR, LOFP_VERSION_MINOR, LOFP_VERSION_PATCH);
#ifdef LOFP_PY_CUDA
    PyModule_AddIntConstant(m, "HAVE_CUDA", 1);
#else
    PyModule_AddIntConstant(m, "HAVE_CUDA", 0);
#endif
    PyModule_AddIntConstant(m, "DLPACK_MAJOR", 1);
    PyModule_AddIntConstant(m, "DLPACK_MINOR", 1);
    if (!ver || PyModule_AddObjectRef(m, "VERSION", ver) < 0) { Py_XDECREF(ver); Py_DECREF(m); return NULL; }
    Py_DECREF(ver);
    return m;
}
