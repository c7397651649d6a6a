/*
 * Arrow buffers (pa.Array.from_buffers) for the Parquet writer (replicator/sink/native_arrow.py):
 * arrow_columns builds Arrow columns of Python values in one pass, and concat_columns joins one
 * column of consecutive blocks' buffers. Also the bytes of one buffer column of a block
 * (rc_lane_buffers, for rows.c and text.c).
 */
#include "rowcore.h"

#include <datetime.h>

#include "formats.h"

/* ------------------------------------------------------------------- Arrow columns */

/* One value of a fixed-width kind into 8 bytes at out; 0 when it is not of the kind (or out
 * of range), so the caller leaves the column to pyarrow. */
static int
fixed_value(PyObject *v, int kind, int width, unsigned char *out)
{
    long long i = 0;
    unsigned long long u = 0;
    double f;
    switch (kind) {
    case ARROW_INT: {
        if (!PyLong_CheckExact(v)) {
            return 0;
        }
        int overflow;
        i = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (i == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        if (width < 8) {
            long long limit = 1LL << (8 * width - 1);
            if (i < -limit || i >= limit) {
                return 0;
            }
        }
        memcpy(out, &i, (size_t)width); /* little-endian hosts (checked at import) */
        return 1;
    }
    case ARROW_UINT:
        if (!PyLong_CheckExact(v)) {
            return 0;
        }
        u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (width < 8 && u >> (8 * width)) {
            return 0;
        }
        memcpy(out, &u, (size_t)width);
        return 1;
    case ARROW_FLOAT32:
    case ARROW_FLOAT64:
        if (!PyFloat_CheckExact(v)) {
            return 0;
        }
        f = PyFloat_AS_DOUBLE(v);
        if (kind == ARROW_FLOAT32) {
            float narrow = (float)f;
            if ((double)narrow != f && f == f) {
                return 0; /* not a float32 value: pyarrow decides */
            }
            memcpy(out, &narrow, 4);
        }
        else {
            memcpy(out, &f, 8);
        }
        return 1;
    case ARROW_DATE32: {
        if (!PyDate_CheckExact(v)) {
            return 0;
        }
        int days = (int)days_from_civil(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v),
                                        PyDateTime_GET_DAY(v));
        memcpy(out, &days, 4);
        return 1;
    }
    case ARROW_TIMESTAMP:
    case ARROW_TIMESTAMP_UTC: {
        if (!PyDateTime_CheckExact(v)) {
            return 0;
        }
        PyObject *tz = PyDateTime_DATE_GET_TZINFO(v);
        if (kind == ARROW_TIMESTAMP ? tz != Py_None : tz != PyDateTime_TimeZone_UTC) {
            return 0;
        }
        long long days = days_from_civil(PyDateTime_GET_YEAR(v), PyDateTime_GET_MONTH(v),
                                         PyDateTime_GET_DAY(v));
        i = ((days * 24 + PyDateTime_DATE_GET_HOUR(v)) * 60 + PyDateTime_DATE_GET_MINUTE(v)) * 60 +
            PyDateTime_DATE_GET_SECOND(v);
        i = i * 1000000 + PyDateTime_DATE_GET_MICROSECOND(v);
        memcpy(out, &i, 8);
        return 1;
    }
    case ARROW_DURATION:
        /* beyond int64 microseconds (about 292,000 years): pyarrow reports it */
        if (!PyDelta_CheckExact(v) || PyDateTime_DELTA_GET_DAYS(v) > 106751 ||
            PyDateTime_DELTA_GET_DAYS(v) < -106751) {
            return 0;
        }
        i = ((long long)PyDateTime_DELTA_GET_DAYS(v) * 86400 + PyDateTime_DELTA_GET_SECONDS(v)) *
                1000000 +
            PyDateTime_DELTA_GET_MICROSECONDS(v);
        memcpy(out, &i, 8);
        return 1;
    default:
        return 0;
    }
}

/* One column being built by arrow_columns. */
typedef struct {
    Py_ssize_t index;
    int kind, width, failed;
    Py_ssize_t nulls;
    PyObject *validity, *data, *offsets; /* bytes: validity bitmap; fixed data; offsets */
    Growable heap;                       /* variable-length data */
    PyObject *last;                      /* the previous value: repeats are common */
    const char *last_bytes;
    Py_ssize_t last_size;
    unsigned char previous[8];
} Column;

static int
column_init(Column *c, Py_ssize_t n)
{
    c->validity = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    if (c->validity == NULL) {
        return -1;
    }
    memset(PyBytes_AS_STRING(c->validity), 0, (size_t)(n + 7) / 8);
    if (c->kind == ARROW_STRING || c->kind == ARROW_BINARY) {
        c->offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
        if (c->offsets == NULL) {
            return -1;
        }
        ((int *)PyBytes_AS_STRING(c->offsets))[0] = 0;
        return 0;
    }
    c->data = PyBytes_FromStringAndSize(NULL, n * c->width);
    if (c->data == NULL) {
        return -1;
    }
    memset(PyBytes_AS_STRING(c->data), 0, (size_t)(n * c->width));
    return 0;
}

/* Row r's value v: 1 when taken, 0 when the column is left to pyarrow, -1 on an error. */
static int
column_add(Column *c, Py_ssize_t r, PyObject *v)
{
    unsigned char *valid = (unsigned char *)PyBytes_AS_STRING(c->validity);
    if (c->kind == ARROW_STRING || c->kind == ARROW_BINARY) {
        int *off = (int *)PyBytes_AS_STRING(c->offsets);
        if (v == Py_None) {
            c->nulls++;
            off[r + 1] = (int)c->heap.len;
            return 1;
        }
        if (v != c->last) {
            if (c->kind == ARROW_STRING) {
                if (!PyUnicode_CheckExact(v)) {
                    return 0;
                }
                c->last_bytes = PyUnicode_AsUTF8AndSize(v, &c->last_size);
                if (c->last_bytes == NULL) {
                    PyErr_Clear(); /* e.g. a lone surrogate: pyarrow reports it */
                    return 0;
                }
            }
            else {
                if (!PyBytes_CheckExact(v)) {
                    return 0;
                }
                c->last_bytes = PyBytes_AS_STRING(v);
                c->last_size = PyBytes_GET_SIZE(v);
            }
            c->last = v;
        }
        if (c->heap.len + c->last_size > 0x7FFFFFFF) {
            return 0; /* past Arrow's 2 GiB per array: the caller splits */
        }
        if (grow(&c->heap, c->last_size) < 0) {
            return -1;
        }
        memcpy(c->heap.data + c->heap.len, c->last_bytes, (size_t)c->last_size);
        c->heap.len += c->last_size;
        off[r + 1] = (int)c->heap.len;
        valid[r >> 3] |= (unsigned char)(1 << (r & 7));
        return 1;
    }
    if (v == Py_None) {
        c->nulls++;
        return 1;
    }
    unsigned char *slot = (unsigned char *)PyBytes_AS_STRING(c->data) + r * c->width;
    if (v == c->last) {
        memcpy(slot, c->previous, (size_t)c->width);
    }
    else {
        if (!fixed_value(v, c->kind, c->width, slot)) {
            return 0;
        }
        memcpy(c->previous, slot, (size_t)c->width);
        c->last = v;
    }
    valid[r >> 3] |= (unsigned char)(1 << (r & 7));
    return 1;
}

static PyObject *
column_finish(Column *c)
{
    if (c->failed) {
        Py_RETURN_NONE;
    }
    if (c->offsets != NULL) {
        c->data = PyBytes_FromStringAndSize(c->heap.data ? c->heap.data : "", c->heap.len);
        if (c->data == NULL) {
            return NULL;
        }
    }
    return Py_BuildValue("(OOOn)", c->nulls ? c->validity : Py_None, c->data,
                         c->offsets ? c->offsets : Py_None, c->nulls);
}

static void
column_clear(Column *c)
{
    Py_CLEAR(c->validity);
    Py_CLEAR(c->data);
    Py_CLEAR(c->offsets);
    PyMem_RawFree(c->heap.data);
    c->heap.data = NULL;
}

/* arrow_columns(rows, width, specs) -> [(validity | None, data, offsets | None, null_count)
 *                                         | None, ...]
 *
 * The buffers of Arrow columns, for pa.Array.from_buffers, each made of one item of every
 * row (a list of tuples of ``width`` items), in one pass over the rows; with width 0, rows
 * is one column's list of values (each spec's item index is then 0). ``specs``: one
 * (index, kind, byte width) per column. A column is None when any of its values is not
 * plainly of the kind (a marker, a value out of range, another type, text past 2 GiB): the
 * caller converts that one with pyarrow and its own checks instead. Every column is None
 * when a row is not a tuple of ``width`` items. */
PyObject *
rc_arrow_columns(PyObject *module, PyObject *args)
{
    PyObject *rows, *specs, *result = NULL;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "O!nO!", &PyList_Type, &rows, &width, &PyTuple_Type, &specs)) {
        return NULL;
    }
    Py_ssize_t ncols = PyTuple_GET_SIZE(specs), n = PyList_GET_SIZE(rows);
    Column *cols = PyMem_Calloc(ncols ? ncols : 1, sizeof(Column));
    if (cols == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t alive = ncols;
    for (Py_ssize_t j = 0; j < ncols; j++) {
        Column *c = &cols[j];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs, j), "nii", &c->index, &c->kind,
                              &c->width)) {
            goto done;
        }
        if (c->index < 0 || c->index >= (width ? width : 1) || c->width < 1 || c->width > 8 ||
            c->kind < 1 || c->kind > ARROW_DURATION) {
            PyErr_SetString(PyExc_ValueError, "bad column spec");
            goto done;
        }
        if (column_init(c, n) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t r = 0; r < n && alive; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (width && (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != width)) {
            for (Py_ssize_t j = 0; j < ncols; j++) {
                cols[j].failed = 1;
            }
            break;
        }
        for (Py_ssize_t j = 0; j < ncols; j++) {
            Column *c = &cols[j];
            if (c->failed) {
                continue;
            }
            int taken = column_add(c, r, width ? PyTuple_GET_ITEM(row, c->index) : row);
            if (taken < 0) {
                goto done;
            }
            if (!taken) {
                c->failed = 1;
                alive--;
            }
        }
    }
    result = PyList_New(ncols);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t j = 0; j < ncols; j++) {
        PyObject *item = column_finish(&cols[j]);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, j, item);
    }
done:
    for (Py_ssize_t j = 0; j < ncols; j++) {
        column_clear(&cols[j]);
    }
    PyMem_Free(cols);
    return result;
}

/* ----------------------------------------------------------------- column buffers */

/* (valid, data, lengths | None) of a lane column as bytes: the tuple a block's buffer
 * column is (built directly, once per column of every rows event). */
PyObject *
rc_lane_buffers(const LaneColumn *c, int with_lengths)
{
    PyObject *out = PyTuple_New(3);
    if (out == NULL) {
        return NULL;
    }
    PyObject *valid = PyBytes_FromStringAndSize(c->valid.data ? c->valid.data : "", c->valid.len);
    PyObject *data = PyBytes_FromStringAndSize(c->data.data ? c->data.data : "", c->data.len);
    PyObject *lengths = with_lengths ? PyBytes_FromStringAndSize(
                                           c->lengths.data ? c->lengths.data : "", c->lengths.len)
                                     : Py_NewRef(Py_None);
    if (valid == NULL || data == NULL || lengths == NULL) {
        Py_XDECREF(valid);
        Py_XDECREF(data);
        Py_XDECREF(lengths);
        Py_DECREF(out);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, valid);
    PyTuple_SET_ITEM(out, 1, data);
    PyTuple_SET_ITEM(out, 2, lengths);
    return out;
}

/* concat_columns(parts, out_width, varlen) -> (validity | None, data, offsets | None, nulls)
 * | None: the (set, values, lengths) parts of one column of consecutive events as one Arrow
 * column's buffers; None past Arrow's 2 GiB of variable-length data. */
PyObject *
rc_concat_columns(PyObject *module, PyObject *args)
{
    PyObject *parts;
    int width, varlen;
    if (!PyArg_ParseTuple(args, "O!ip", &PyList_Type, &parts, &width, &varlen)) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(parts), n = 0, bytes = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *part = PyList_GET_ITEM(parts, j);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 3 ||
            !PyBytes_Check(PyTuple_GET_ITEM(part, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(part, 1)) ||
            (varlen && !PyBytes_Check(PyTuple_GET_ITEM(part, 2)))) {
            PyErr_SetString(PyExc_TypeError, "parts must be (set, values, lengths) bytes");
            return NULL;
        }
        Py_ssize_t rows = PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 0));
        Py_ssize_t size = PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 1));
        if ((varlen && PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 2)) != 4 * rows) ||
            (!varlen && size != rows * width)) {
            PyErr_SetString(PyExc_ValueError, "a part's buffers disagree on its rows");
            return NULL;
        }
        n += rows;
        bytes += size;
    }
    if (varlen && bytes > 0x7FFFFFFF) {
        Py_RETURN_NONE;
    }
    PyObject *validity = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    PyObject *data = PyBytes_FromStringAndSize(NULL, bytes);
    PyObject *offsets = varlen ? PyBytes_FromStringAndSize(NULL, (n + 1) * 4) : NULL;
    if (validity == NULL || data == NULL || (varlen && offsets == NULL)) {
        Py_XDECREF(validity);
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        return NULL;
    }
    /* The parts' buffers, taken while the GIL is held (each part tuple kept alive), so that
       a large copy runs without it, beside the threads that decode and parse. */
    struct concat_part {
        PyObject *part;
        const char *set, *values;
        const int *lengths;
        Py_ssize_t rows, size;
    } *taken = PyMem_Malloc(sizeof(struct concat_part) * (size_t)(count ? count : 1));
    if (taken == NULL) {
        Py_DECREF(validity);
        Py_DECREF(data);
        Py_XDECREF(offsets);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *part = PyList_GET_ITEM(parts, j);
        Py_INCREF(part);
        taken[j].part = part;
        taken[j].set = PyBytes_AS_STRING(PyTuple_GET_ITEM(part, 0));
        taken[j].rows = PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 0));
        taken[j].values = PyBytes_AS_STRING(PyTuple_GET_ITEM(part, 1));
        taken[j].size = PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 1));
        taken[j].lengths =
            varlen ? (const int *)PyBytes_AS_STRING(PyTuple_GET_ITEM(part, 2)) : NULL;
    }
    unsigned char *valid = (unsigned char *)PyBytes_AS_STRING(validity);
    char *out = PyBytes_AS_STRING(data);
    int *off = varlen ? (int *)PyBytes_AS_STRING(offsets) : NULL;
    Py_ssize_t r = 0, at = 0, nulls = 0;
    PyThreadState *saved = bytes + n >= GIL_RELEASE_BYTES ? PyEval_SaveThread() : NULL;
    memset(valid, 0, (size_t)(n + 7) / 8);
    if (off != NULL) {
        off[0] = 0;
    }
    for (Py_ssize_t j = 0; j < count; j++) {
        const char *set = taken[j].set;
        const int *lengths = taken[j].lengths;
        Py_ssize_t rows = taken[j].rows;
        memcpy(out + at, taken[j].values, (size_t)taken[j].size);
        for (Py_ssize_t k = 0; k < rows; k++, r++) {
            if (set[k]) {
                valid[r >> 3] |= (unsigned char)(1 << (r & 7));
            }
            else {
                nulls++;
            }
            if (off != NULL) {
                off[r + 1] = off[r] + lengths[k];
            }
        }
        at += taken[j].size;
    }
    if (saved != NULL) {
        PyEval_RestoreThread(saved);
    }
    for (Py_ssize_t j = 0; j < count; j++) {
        Py_DECREF(taken[j].part);
    }
    PyMem_Free(taken);
    if (!nulls) {
        Py_DECREF(validity);
        validity = Py_None;
        Py_INCREF(validity);
    }
    if (offsets == NULL) {
        offsets = Py_None;
        Py_INCREF(offsets);
    }
    return Py_BuildValue("(NNNn)", validity, data, offsets, nulls);
}


int
rc_buffers_init(void)
{
    PyDateTime_IMPORT;
    return PyDateTimeAPI == NULL ? -1 : 0;
}
