/*
 * Rows events decoded into blocks (replicator/binlog/block.py): the BlockSpec type.
 *
 * A BlockSpec holds, for one row layout (a table map's columns and the set of columns present
 * in an image), two small instructions per present column, built in Python from the column's
 * ColumnPlan (replicator/binlog/native.py): how to make its value an object (Instr,
 * decode_value) and, for the common types, how to append it to buffers (LaneInstr,
 * lane_value). Calling its decode() turns every row image of a rows event into one vector
 * per column: buffers, or a list of objects (replicator/binlog/block.py).
 *
 * This is a fast path, not a second definition of the formats: it raises nothing about the
 * data. Any row it cannot decode (a value past the end of the event, text that is not valid,
 * an ENUM index out of range, a converter that raises) makes it return None, and the caller
 * decodes the event with the reference decoders, which raise the exact error. Unusual values
 * of the native types (zero dates, a DECIMAL digit group out of range) are handed to the
 * column's Python converter, which is the reference for them. The stored formats are read by
 * formats.h.
 */
#include "rowcore.h"

#include <datetime.h>

#include "formats.h"

static PyObject *Decimal = NULL;

/* The Python converter of a fixed-width value (the reference for unusual values). */
static PyObject *
convert(PyObject *converter, const unsigned char *p, int width)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, width);
    if (raw == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(converter, raw);
    Py_DECREF(raw);
    return value;
}

/* ------------------------------------------------------------------ Python objects */

/* A DECIMAL's text into text (at least 84 bytes): its sign where it is not zero, its integer
 * digits without leading zeros (one 0 at least), then the point and the scale's digits:
 * what format(Decimal, "f") writes of it. 0 for a digit group out of range. */
static int
decimal_text(const unsigned char *p, int width, int intg, int scale, char *text, Py_ssize_t *len)
{
    char digits[80];
    int negative;
    if (!decimal_digits(p, width, intg, scale, digits, &negative)) {
        return 0;
    }
    int n = 0, zero = 1, lead = 0;
    for (int k = 0; k < intg + scale; k++) {
        zero &= digits[k] == '0';
    }
    if (negative && !zero) {
        text[n++] = '-';
    }
    while (lead < intg - 1 && digits[lead] == '0') {
        lead++;
    }
    if (intg == 0) {
        text[n++] = '0';
    }
    memcpy(text + n, digits + lead, (size_t)(intg - lead));
    n += intg - lead;
    if (scale) {
        text[n++] = '.';
        memcpy(text + n, digits + intg, (size_t)scale);
        n += scale;
    }
    *len = n;
    return 1;
}

static PyObject *
decode_decimal(const unsigned char *p, int width, int intg, int scale, PyObject *converter,
               int as_text)
{
    char text[84];
    Py_ssize_t n;
    if (!decimal_text(p, width, intg, scale, text, &n)) {
        return convert(converter, p, width); /* raises the digit group error */
    }
    PyObject *s = PyUnicode_DecodeASCII(text, n, NULL);
    if (s == NULL || as_text) {
        return s;
    }
    PyObject *value = PyObject_CallOneArg(Decimal, s);
    Py_DECREF(s);
    return value;
}

/* Valid fields as `replicator dump` writes them (orjson's forms, replicator/dump.py): a date
 * "YYYY-MM-DD" (sep 0), else the date, sep, "HH:MM:SS", ".ffffff" where the microseconds are
 * not 0, and "Z" for a TIMESTAMP (zulu). */
static PyObject *
fields_text(const Fields *f, char sep, int zulu)
{
    char text[32], *o = text;
    o = put_digits(o, f->year, 4);
    *o++ = '-';
    o = put_digits(o, f->month, 2);
    *o++ = '-';
    o = put_digits(o, f->day, 2);
    if (sep) {
        *o++ = sep;
        o = put_digits(o, f->hour, 2);
        *o++ = ':';
        o = put_digits(o, f->minute, 2);
        *o++ = ':';
        o = put_digits(o, f->second, 2);
        if (f->micro) {
            *o++ = '.';
            o = put_digits(o, f->micro, 6);
        }
        if (zulu) {
            *o++ = 'Z';
        }
    }
    return PyUnicode_DecodeASCII(text, o - text, NULL);
}

/* A valid date (tz NULL) or datetime, else NULL with no exception set (the caller asks the
 * converter). */
static PyObject *
try_datetime(const Fields *f, PyObject *tz)
{
    PyObject *value;
    if (!valid_fields(f)) {
        return NULL;
    }
    if (tz == NULL) {
        value = PyDate_FromDate(f->year, f->month, f->day);
    }
    else {
        value = PyDateTimeAPI->DateTime_FromDateAndTime(f->year, f->month, f->day, f->hour,
                                                        f->minute, f->second, f->micro, tz,
                                                        PyDateTimeAPI->DateTimeType);
    }
    if (value == NULL) {
        PyErr_Clear(); /* out of memory: the converter decides */
    }
    return value;
}

static PyObject *
decode_date(const unsigned char *p, PyObject *converter, int as_text)
{
    Fields f;
    date_fields(p, &f);
    if (as_text && valid_fields(&f)) {
        return fields_text(&f, 0, 0);
    }
    PyObject *value = as_text ? NULL : try_datetime(&f, NULL);
    return value != NULL ? value : convert(converter, p, 3);
}

static PyObject *
decode_datetime2(const unsigned char *p, int width, int frac_bytes, long long unit,
                 PyObject *converter, int as_text)
{
    Fields f;
    PyObject *value = NULL;
    if (datetime2_fields(p, width, frac_bytes, unit, &f)) {
        if (as_text && valid_fields(&f)) {
            return fields_text(&f, ' ', 0);
        }
        value = as_text ? NULL : try_datetime(&f, Py_None);
    }
    return value != NULL ? value : convert(converter, p, width);
}

static PyObject *
decode_timestamp2(const unsigned char *p, int width, int frac_bytes, long long unit,
                  PyObject *converter, int as_text)
{
    long long micros = timestamp2_micros(p, width, frac_bytes, unit);
    if (micros == 0) {
        return convert(converter, p, width); /* the zero timestamp */
    }
    long long seconds = micros / 1000000, rest = seconds % 86400;
    Fields f = {0, 0, 0, (int)(rest / 3600), (int)(rest / 60 % 60), (int)(rest % 60),
                (int)(micros % 1000000)};
    civil(seconds / 86400, &f.year, &f.month, &f.day);
    if (as_text && valid_fields(&f)) {
        return fields_text(&f, 'T', 1);
    }
    PyObject *value = as_text ? NULL : try_datetime(&f, PyDateTime_TimeZone_UTC);
    return value != NULL ? value : convert(converter, p, width);
}

static PyObject *
decode_time2(const unsigned char *p, int width, int frac_bytes, long long unit)
{
    long long micros = time2_micros(p, width, frac_bytes, unit);
    return PyDelta_FromDSU(0, (int)(micros / 1000000), (int)(micros % 1000000));
}

/* One non-NULL value at *pos (bounded by end); NULL when it does not decode. */
static PyObject *
decode_value(const Instr *in, PyObject *bufobj, const unsigned char *buf, Py_ssize_t *pos,
             Py_ssize_t end)
{
    const unsigned char *p = buf + *pos;
    Py_ssize_t avail = end - *pos;
    int w = in->width;
    switch (in->op) {
    case OP_INT: {
        if (avail < w) {
            return NULL;
        }
        *pos += w;
        unsigned long long u = le_uint(p, w);
        if (!in->arg0) {
            return PyLong_FromUnsignedLongLong(u);
        }
        if (w < 8 && (u >> (8 * w - 1))) {
            u |= ~0ULL << (8 * w); /* sign-extend */
        }
        return PyLong_FromLongLong((long long)u);
    }
    case OP_FLOAT: {
        if (avail < 4) {
            return NULL;
        }
        *pos += 4;
        double d = PyFloat_Unpack4((const char *)p, 1);
        if (d == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        return PyFloat_FromDouble(d);
    }
    case OP_DOUBLE: {
        if (avail < 8) {
            return NULL;
        }
        *pos += 8;
        double d = PyFloat_Unpack8((const char *)p, 1);
        if (d == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        return PyFloat_FromDouble(d);
    }
    case OP_YEAR:
        if (avail < 1) {
            return NULL;
        }
        *pos += 1;
        return PyLong_FromLong(p[0] ? 1900 + p[0] : 0);
    case OP_DECIMAL:
    case OP_DATE:
    case OP_DATETIME2:
    case OP_TIMESTAMP2:
    case OP_TIME2:
    case OP_DECIMAL_TEXT:
    case OP_DATE_TEXT:
    case OP_DATETIME2_TEXT:
    case OP_TIMESTAMP2_TEXT:
        if (avail < w) {
            return NULL;
        }
        *pos += w;
        switch (in->op) {
        case OP_DECIMAL:
        case OP_DECIMAL_TEXT:
            return decode_decimal(p, w, (int)in->arg0, (int)in->arg1, in->obj,
                                  in->op == OP_DECIMAL_TEXT);
        case OP_DATE:
        case OP_DATE_TEXT:
            return decode_date(p, in->obj, in->op == OP_DATE_TEXT);
        case OP_DATETIME2:
        case OP_DATETIME2_TEXT:
            return decode_datetime2(p, w, (int)in->arg0, in->arg1, in->obj,
                                    in->op == OP_DATETIME2_TEXT);
        case OP_TIMESTAMP2:
        case OP_TIMESTAMP2_TEXT:
            return decode_timestamp2(p, w, (int)in->arg0, in->arg1, in->obj,
                                     in->op == OP_TIMESTAMP2_TEXT);
        default:
            return decode_time2(p, w, (int)in->arg0, in->arg1);
        }
    case OP_UTF8:
    case OP_LATIN1:
    case OP_TEXT:
    case OP_BYTES: {
        if (avail < w) {
            return NULL;
        }
        unsigned long long n = le_uint(p, w);
        if (n > (unsigned long long)(avail - w)) {
            return NULL;
        }
        const char *data = (const char *)p + w;
        *pos += w + (Py_ssize_t)n;
        if (in->op == OP_UTF8) {
            return PyUnicode_DecodeUTF8(data, (Py_ssize_t)n, NULL);
        }
        if (in->op == OP_LATIN1) {
            Py_ssize_t i = 0;
            while (i < (Py_ssize_t)n && !(data[i] & 0x80)) {
                i++;
            }
            if (i == (Py_ssize_t)n) {
                return PyUnicode_DecodeASCII(data, (Py_ssize_t)n, NULL);
            }
        }
        if (in->op == OP_BYTES && (long long)n < in->arg0) {
            PyObject *padded = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)in->arg0);
            if (padded != NULL) {
                memcpy(PyBytes_AS_STRING(padded), data, (size_t)n);
                memset(PyBytes_AS_STRING(padded) + n, 0, (size_t)(in->arg0 - (long long)n));
            }
            return padded;
        }
        PyObject *raw = PyBytes_FromStringAndSize(data, (Py_ssize_t)n);
        if (raw == NULL || in->op == OP_BYTES) {
            return raw;
        }
        PyObject *text = PyObject_CallOneArg(in->obj, raw);
        Py_DECREF(raw);
        return text;
    }
    case OP_ENUM: {
        if (avail < w) {
            return NULL;
        }
        *pos += w;
        Py_ssize_t index = (Py_ssize_t)le_uint(p, w);
        if (index >= PyTuple_GET_SIZE(in->obj)) {
            return NULL;
        }
        PyObject *label = PyTuple_GET_ITEM(in->obj, index);
        Py_INCREF(label);
        return label;
    }
    case OP_CALL: {
        PyObject *at = PyLong_FromSsize_t(*pos);
        if (at == NULL) {
            return NULL;
        }
        PyObject *args[2] = {bufobj, at};
        PyObject *result = PyObject_Vectorcall(in->obj, args, 2, NULL);
        Py_DECREF(at);
        if (result == NULL) {
            return NULL;
        }
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            Py_DECREF(result);
            return NULL;
        }
        Py_ssize_t next = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
        if (next == -1 && PyErr_Occurred()) {
            Py_DECREF(result);
            return NULL;
        }
        *pos = next;
        PyObject *value = PyTuple_GET_ITEM(result, 0);
        Py_INCREF(value);
        Py_DECREF(result);
        return value;
    }
    default:
        return NULL;
    }
}

static int
append_new(PyObject *list, PyObject *item)
{
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

static int
check_instr(const Instr *in)
{
    int w = in->width;
    switch (in->op) {
    case OP_INT:
        return w == 1 || w == 2 || w == 3 || w == 4 || w == 8;
    case OP_FLOAT:
        return w == 4;
    case OP_DOUBLE:
        return w == 8;
    case OP_YEAR:
        return w == 1;
    case OP_DECIMAL:
    case OP_DECIMAL_TEXT:
        return w >= 1 && w <= 40 && in->arg0 >= 0 && in->arg1 >= 0 && in->arg0 + in->arg1 <= 65 &&
               in->obj != Py_None;
    case OP_DATE:
    case OP_DATE_TEXT:
        return w == 3 && in->obj != Py_None;
    case OP_DATETIME2:
    case OP_TIMESTAMP2:
    case OP_TIME2:
    case OP_DATETIME2_TEXT:
    case OP_TIMESTAMP2_TEXT:
        return in->arg0 >= 0 && in->arg0 <= 3 && in->arg1 > 0 && w >= 3 && w <= 8 &&
               (in->op == OP_TIME2 || in->obj != Py_None);
    case OP_UTF8:
    case OP_BYTES:
        return w >= 1 && w <= 4;
    case OP_LATIN1:
    case OP_TEXT:
        return w >= 1 && w <= 4 && PyCallable_Check(in->obj);
    case OP_ENUM:
        return (w == 1 || w == 2) && PyTuple_Check(in->obj);
    case OP_CALL:
        return PyCallable_Check(in->obj);
    default:
        return 0;
    }
}

/* ----------------------------------------------------------------- column buffers */

/* A column's values decoded straight into buffers (no Python object per value), for the
 * Parquet writer: one byte per row saying whether it is set, the values (out_width bytes
 * each, or the bytes of variable-length values) and, for those, a 4-byte length per row.
 * lane_value gives up (-1) on a value the buffers cannot hold exactly: the block decoder then
 * takes that column as objects (see BlockSpec). */

/* One non-NULL value at p (avail bytes left) into the column; bytes used, or -1. */
static Py_ssize_t
lane_value(const LaneInstr *in, const unsigned char *p, Py_ssize_t avail, LaneColumn *c)
{
    int w = in->in_width;
    unsigned char out[16];
    long long i = 0;
    switch (in->op) {
    case LANE_INT: {
        if (avail < w) {
            return -1;
        }
        unsigned long long u = le_uint(p, w);
        if (in->arg0 && w < 8 && (u >> (8 * w - 1))) {
            u |= ~0ULL << (8 * w);
        }
        memcpy(out, &u, 8);
        if (grow(&c->data, in->out_width) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, out, (size_t)in->out_width);
        c->data.len += in->out_width;
        return w;
    }
    case LANE_YEAR: {
        if (avail < 1) {
            return -1;
        }
        short y = (short)(p[0] ? 1900 + p[0] : 0);
        if (grow(&c->data, 2) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, &y, 2);
        c->data.len += 2;
        return 1;
    }
    case LANE_COPY:
        if (avail < w) {
            return -1;
        }
        if (grow(&c->data, w) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, p, (size_t)w);
        c->data.len += w;
        return w;
    case LANE_DECIMAL: {
        char digits[80];
        int negative;
        if (avail < w || !decimal_digits(p, w, (int)in->arg0, (int)in->arg1, digits, &negative)) {
            return -1;
        }
        unsigned __int128 v = 0;
        for (int k = 0; k < in->arg0 + in->arg1; k++) {
            v = v * 10 + (unsigned)(digits[k] - '0');
        }
        __int128 s = negative ? -(__int128)v : (__int128)v;
        if (grow(&c->data, 16) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, &s, 16);
        c->data.len += 16;
        return w;
    }
    case LANE_DATE: {
        Fields f;
        if (avail < 3) {
            return -1;
        }
        date_fields(p, &f);
        if (!valid_fields(&f)) {
            return -1;
        }
        int days = (int)days_from_civil(f.year, f.month, f.day);
        if (grow(&c->data, 4) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, &days, 4);
        c->data.len += 4;
        return 3;
    }
    case LANE_DATETIME2:
    case LANE_TIMESTAMP2:
    case LANE_TIME2: {
        if (avail < w) {
            return -1;
        }
        if (in->op == LANE_DATETIME2) {
            Fields f;
            if (!datetime2_fields(p, w, (int)in->arg0, in->arg1, &f) || !valid_fields(&f)) {
                return -1;
            }
            i = fields_micros(&f);
        }
        else if (in->op == LANE_TIMESTAMP2) {
            i = timestamp2_micros(p, w, (int)in->arg0, in->arg1);
            if (i == 0) {
                return -1; /* the zero timestamp */
            }
        }
        else {
            i = time2_micros(p, w, (int)in->arg0, in->arg1);
        }
        if (grow(&c->data, 8) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, &i, 8);
        c->data.len += 8;
        return w;
    }
    case LANE_UTF8:
    case LANE_ASCII:
    case LANE_BYTES:
    case LANE_ENUM: {
        const unsigned char *src;
        Py_ssize_t size, used;
        if (avail < w) {
            return -1;
        }
        if (in->op == LANE_ENUM) {
            Py_ssize_t index = (Py_ssize_t)le_uint(p, w);
            if (index >= PyTuple_GET_SIZE(in->obj)) {
                return -1;
            }
            PyObject *label = PyTuple_GET_ITEM(in->obj, index);
            src = (const unsigned char *)PyBytes_AS_STRING(label);
            size = PyBytes_GET_SIZE(label);
            used = w;
        }
        else {
            unsigned long long len = le_uint(p, w);
            if (len > (unsigned long long)(avail - w)) {
                return -1;
            }
            src = p + w;
            size = (Py_ssize_t)len;
            used = w + size;
            if (in->op == LANE_UTF8 && !valid_utf8(src, size)) {
                return -1;
            }
            if (in->op == LANE_ASCII) {
                for (Py_ssize_t k = 0; k < size; k++) {
                    if (src[k] & 0x80) {
                        return -1;
                    }
                }
            }
        }
        Py_ssize_t stored = size;
        if (in->op == LANE_BYTES && size < in->arg0) {
            stored = (Py_ssize_t)in->arg0;
        }
        if (grow(&c->data, stored) < 0 || grow(&c->lengths, 4) < 0) {
            return -2;
        }
        memcpy(c->data.data + c->data.len, src, (size_t)size);
        memset(c->data.data + c->data.len + size, 0, (size_t)(stored - size));
        c->data.len += stored;
        int length = (int)stored;
        memcpy(c->lengths.data + c->lengths.len, &length, 4);
        c->lengths.len += 4;
        return used;
    }
    default:
        return -1;
    }
}

static int
lane_null(const LaneInstr *in, LaneColumn *c)
{
    return null_slot(c, in->op >= LANE_UTF8, in->out_width);
}

static int
check_lane(const LaneInstr *in)
{
    int w = in->in_width, o = in->out_width;
    switch (in->op) {
    case LANE_INT:
        return (w == 1 || w == 2 || w == 3 || w == 4 || w == 8) &&
               (o == 1 || o == 2 || o == 4 || o == 8) && o >= w;
    case LANE_YEAR:
        return w == 1 && o == 2;
    case LANE_COPY:
        return (w == 4 || w == 8) && o == w;
    case LANE_DECIMAL:
        return w >= 1 && w <= 40 && o == 16 && in->arg0 >= 0 && in->arg1 >= 0 &&
               in->arg0 + in->arg1 <= 38;
    case LANE_DATE:
        return w == 3 && o == 4;
    case LANE_DATETIME2:
    case LANE_TIMESTAMP2:
    case LANE_TIME2:
        return w >= 3 && w <= 8 && o == 8 && in->arg0 >= 0 && in->arg0 <= 3 && in->arg1 > 0;
    case LANE_UTF8:
    case LANE_ASCII:
    case LANE_BYTES:
        return w >= 1 && w <= 4;
    case LANE_ENUM:
        if (!((w == 1 || w == 2) && PyTuple_Check(in->obj))) {
            return 0;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(in->obj); k++) {
            if (!PyBytes_Check(PyTuple_GET_ITEM(in->obj, k))) {
                return 0;
            }
        }
        return 1;
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------ row blocks */

/* BlockSpec: the images of one row layout (a table map's columns and the columns present in
 * an image) decoded column by column into a block, the one form every rows event takes.
 * Each present column becomes either buffers (its lane instruction: no Python object per
 * value; see the column buffers above) or a list of objects (its object instruction, with
 * the column's Python converter behind it for unusual values). A value a column's buffers
 * cannot hold (a zero date, text that is not UTF-8, an ENUM index past the labels...) turns
 * that column into objects for the event and decoding starts again, so every value lands in
 * the form that holds it exactly. A row that does not decode at all (a value past the end of
 * the event, a converter that raises) makes the call return None: the caller decodes the
 * event with the reference decoders, which raise the exact error. */

void
rc_side_clear(Side *s)
{
    for (Py_ssize_t k = 0; s->cols != NULL && k < s->spec->npresent; k++) {
        PyMem_RawFree(s->cols[k].valid.data);
        PyMem_RawFree(s->cols[k].data.data);
        PyMem_RawFree(s->cols[k].lengths.data);
        memset(&s->cols[k], 0, sizeof(LaneColumn));
        Py_CLEAR(s->lists[k]);
    }
}

int
rc_side_start(Side *s)
{
    for (Py_ssize_t k = 0; k < s->spec->npresent; k++) {
        if (s->as_objects[k]) {
            s->lists[k] = PyList_New(0);
            if (s->lists[k] == NULL) {
                return -1;
            }
        }
    }
    return 0;
}

int
rc_side_alloc(Side *s, BlockSpec *spec, int objects)
{
    Py_ssize_t n = spec->npresent ? spec->npresent : 1;
    s->spec = spec;
    s->as_objects = PyMem_Calloc(n, 1);
    s->cols = PyMem_Calloc(n, sizeof(LaneColumn));
    s->lists = PyMem_Calloc(n, sizeof(PyObject *));
    if (s->as_objects == NULL || s->cols == NULL || s->lists == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < spec->npresent; k++) {
        s->as_objects[k] = (char)(objects || spec->lanes[k].op == 0);
    }
    return 0;
}

void
rc_side_free(Side *s)
{
    if (s->spec == NULL) {
        return;
    }
    rc_side_clear(s);
    PyMem_Free(s->as_objects);
    PyMem_Free(s->cols);
    PyMem_Free(s->lists);
}

int
rc_side_has_objects(const Side *s)
{
    for (Py_ssize_t k = 0; k < s->spec->npresent; k++) {
        if (s->as_objects[k]) {
            return 1;
        }
    }
    return 0;
}

/* One image at *pos into the side's columns: 0 decoded; 1 it does not decode (*bad: the
 * present column whose buffers could not hold its value, else -1); 2 an error is raised. */
int
rc_side_image(Side *s, PyObject *bufobj, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end,
           Py_ssize_t *bad)
{
    const BlockSpec *spec = s->spec;
    *bad = -1;
    if (end - *pos < spec->null_bytes) {
        return 1;
    }
    const unsigned char *nulls = buf + *pos;
    *pos += spec->null_bytes;
    for (Py_ssize_t k = 0; k < spec->npresent; k++) {
        int isnull = nulls[k >> 3] >> (k & 7) & 1;
        if (s->as_objects[k]) {
            PyObject *value;
            if (isnull) {
                value = Py_None;
                Py_INCREF(value);
            }
            else {
                value = decode_value(&spec->instr[k], bufobj, buf, pos, end);
                if (value == NULL || *pos > end || *pos < 0) {
                    Py_XDECREF(value);
                    PyErr_Clear();
                    return 1;
                }
            }
            if (append_new(s->lists[k], value) < 0) {
                return 2;
            }
            continue;
        }
        LaneColumn *c = &s->cols[k];
        const LaneInstr *in = &spec->lanes[k];
        if (grow(&c->valid, 1) < 0) {
            return 2;
        }
        c->valid.data[c->valid.len++] = (char)!isnull;
        if (isnull) {
            if (lane_null(in, c) < 0) {
                return 2;
            }
            continue;
        }
        Py_ssize_t used = lane_value(in, buf + *pos, end - *pos, c);
        if (used == -2) {
            return 2;
        }
        if (used < 0) {
            *bad = k;
            return 1;
        }
        *pos += used;
    }
    return 0;
}

/* The side's columns: a list of objects, or (set, values, lengths | None) buffers. */
PyObject *
rc_side_result(Side *s)
{
    const BlockSpec *spec = s->spec;
    PyObject *columns = PyTuple_New(spec->npresent);
    if (columns == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < spec->npresent; k++) {
        PyObject *item;
        if (s->as_objects[k]) {
            item = s->lists[k];
            s->lists[k] = NULL;
        }
        else {
            item = rc_lane_buffers(&s->cols[k], spec->lanes[k].op >= LANE_UTF8);
        }
        if (item == NULL) {
            Py_DECREF(columns);
            return NULL;
        }
        PyTuple_SET_ITEM(columns, k, item);
    }
    return columns;
}

/* spec.decode(buf, pos, end, after=None, objects=False) -> (rows, columns, after columns |
 * None) | None. ``after``: the BlockSpec of update after images (images alternate before,
 * after); ``objects``: every column as objects (for callers that want row tuples). */
static PyObject *
BlockSpec_decode(PyObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *bufobj, *after = Py_None;
    Py_ssize_t start, end;
    int objects = 0;
    static char *kwlist[] = {"buf", "pos", "end", "after", "objects", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Onn|Op", kwlist, &bufobj, &start, &end, &after,
                                     &objects)) {
        return NULL;
    }
    if (after != Py_None && !PyObject_TypeCheck(after, &rc_BlockSpecType)) {
        PyErr_SetString(PyExc_TypeError, "after must be a BlockSpec or None");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (end > view.len) {
        end = view.len;
    }
    if (start < 0) {
        start = 0;
    }
    const unsigned char *buf = view.buf;
    Side sides[2];
    memset(sides, 0, sizeof(sides));
    int nsides = after == Py_None ? 1 : 2;
    PyObject *result = NULL;
    if (rc_side_alloc(&sides[0], (BlockSpec *)self, objects) < 0 ||
        (nsides == 2 && rc_side_alloc(&sides[1], (BlockSpec *)after, objects) < 0)) {
        goto done;
    }
    for (;;) {
        Py_ssize_t rows = 0, pos = start, bad = -1;
        int outcome = 0, side = 0;
        for (int i = 0; i < nsides && outcome == 0; i++) {
            if (rc_side_start(&sides[i]) < 0) {
                outcome = 2;
            }
        }
        /* buffers only: no Python object is touched, so other threads (the event loop, the
         * Parquet writer) run meanwhile, when there is enough to decode */
        int free_threads = outcome == 0 && end - start >= GIL_RELEASE_BYTES &&
                           !rc_side_has_objects(&sides[0]) &&
                           (nsides == 1 || !rc_side_has_objects(&sides[1]));
        PyThreadState *saved = free_threads ? PyEval_SaveThread() : NULL;
        while (outcome == 0 && pos < end) {
            for (side = 0; side < nsides && outcome == 0; side++) {
                outcome = rc_side_image(&sides[side], bufobj, buf, &pos, end, &bad);
            }
            side--;
            rows++;
        }
        if (saved != NULL) {
            PyEval_RestoreThread(saved);
            if (outcome == 2) {
                PyErr_NoMemory(); /* the only error of buffers */
            }
        }
        if (outcome == 0) {
            PyObject *first = rc_side_result(&sides[0]);
            PyObject *second = nsides == 2 && first != NULL ? rc_side_result(&sides[1]) : NULL;
            if (first != NULL && nsides == 1) {
                result = Py_BuildValue("(nNO)", rows, first, Py_None);
            }
            else if (first != NULL && second != NULL) {
                result = Py_BuildValue("(nNN)", rows, first, second);
            }
            else {
                Py_XDECREF(first);
                Py_XDECREF(second);
            }
            break;
        }
        for (int i = 0; i < nsides; i++) {
            rc_side_clear(&sides[i]);
        }
        if (outcome == 2) {
            break;
        }
        if (bad < 0 || sides[side].as_objects[bad]) {
            result = Py_None; /* not decodable here: the reference decoders take the event */
            Py_INCREF(result);
            break;
        }
        sides[side].as_objects[bad] = 1; /* this column as objects, from the first row */
    }
done:
    for (int i = 0; i < nsides; i++) {
        rc_side_free(&sides[i]);
    }
    PyBuffer_Release(&view);
    return result;
}

static void
BlockSpec_dealloc(BlockSpec *self)
{
    PyObject_GC_UnTrack(self);
    PyMem_Free(self->instr);
    PyMem_Free(self->lanes);
    Py_CLEAR(self->objects);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
BlockSpec_traverse(BlockSpec *self, visitproc visit, void *arg)
{
    Py_VISIT(self->objects);
    return 0;
}

/* BlockSpec(instructions, lanes): per present column, in column order, its object
 * instruction (op, width, arg0, arg1, obj) and its lane instruction (op, in width, out width,
 * arg0, arg1, obj) or None. */
static PyObject *
BlockSpec_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *instructions, *lanes;
    static char *kwlist[] = {"instructions", "lanes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyTuple_Type, &instructions,
                                     &PyTuple_Type, &lanes)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(instructions);
    if (PyTuple_GET_SIZE(lanes) != n) {
        PyErr_SetString(PyExc_ValueError, "one lane instruction (or None) per column");
        return NULL;
    }
    BlockSpec *self = (BlockSpec *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->npresent = n;
    self->null_bytes = (n + 7) / 8;
    self->instr = PyMem_Calloc(n ? n : 1, sizeof(Instr));
    self->lanes = PyMem_Calloc(n ? n : 1, sizeof(LaneInstr));
    self->objects = PyTuple_New(2 * n);
    if (self->instr == NULL || self->lanes == NULL || self->objects == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Instr *in = &self->instr[k];
        PyObject *obj;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(instructions, k), "iiLLO", &in->op, &in->width,
                              &in->arg0, &in->arg1, &obj)) {
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(obj);
        PyTuple_SET_ITEM(self->objects, 2 * k, obj);
        in->obj = obj;
        if (!check_instr(in)) {
            Py_DECREF(self);
            PyErr_Format(PyExc_ValueError, "invalid instruction for column %zd", k);
            return NULL;
        }
        PyObject *lane = PyTuple_GET_ITEM(lanes, k);
        LaneInstr *li = &self->lanes[k];
        PyObject *lane_obj = Py_None;
        if (lane != Py_None) {
            if (!PyArg_ParseTuple(lane, "iiiLLO", &li->op, &li->in_width, &li->out_width,
                                  &li->arg0, &li->arg1, &lane_obj)) {
                Py_DECREF(self);
                return NULL;
            }
            li->obj = lane_obj;
            if (!check_lane(li)) {
                Py_DECREF(self);
                PyErr_Format(PyExc_ValueError, "invalid lane instruction for column %zd", k);
                return NULL;
            }
        }
        Py_INCREF(lane_obj);
        PyTuple_SET_ITEM(self->objects, 2 * k + 1, lane_obj);
    }
    return (PyObject *)self;
}

static PyMethodDef BlockSpec_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))BlockSpec_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(buf, pos, end, after=None, objects=False) -> (rows, columns, after) | None"},
    {NULL},
};

PyTypeObject rc_BlockSpecType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "replicator.binlog._rowcore.BlockSpec",
    .tp_basicsize = sizeof(BlockSpec),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Decodes the row images of one layout into a block (see the module doc).",
    .tp_new = BlockSpec_new,
    .tp_dealloc = (destructor)BlockSpec_dealloc,
    .tp_traverse = (traverseproc)BlockSpec_traverse,
    .tp_methods = BlockSpec_methods,
};

int
rc_rows_init(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return -1;
    }
    PyObject *decimal = PyImport_ImportModule("decimal");
    if (decimal == NULL) {
        return -1;
    }
    Decimal = PyObject_GetAttrString(decimal, "Decimal");
    Py_DECREF(decimal);
    return Decimal == NULL ? -1 : 0;
}
