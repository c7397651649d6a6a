/*
 * Result sets, for snapshot reads (replicator.snapshot.fastread): the row packets of a
 * text-protocol or binary-protocol result set, straight from the socket's bytes into row
 * tuples of the values the binlog decoders give (text_rows, text_row), or into a block's
 * column buffers (text_block). A binary value is read as it is where the column's buffers take
 * its type, and otherwise as the text the text protocol would send for it.
 * Each column has a kind; a value the kind's fast path does not take (a zero or invalid date,
 * text that is not strict UTF-8, anything unusual) goes to the column's Python function, which
 * returns the value or raises the exact error.
 */
#define _GNU_SOURCE /* strtod_l, newlocale: a decimal point whatever the process's locale */
#include "rowcore.h"

#include <datetime.h>
#include <locale.h>
#include <stdlib.h>

#include "formats.h"

/* The "C" locale, for strtod_l (text_double); made at import (rc_text_init). */
static locale_t c_locale = (locale_t)0;

/* A DOUBLE or FLOAT as the server prints it ([-]digits[.digits][e[+-]digits]) into *out,
 * correctly rounded (glibc's strtod is, as Python's float() is). 1, or 0 for any other text
 * (the caller's fallback decides). Needs no GIL: it touches no Python object. */
static int
text_double(const unsigned char *p, Py_ssize_t n, double *out)
{
    char buf[64];
    if (n < 1 || n >= (Py_ssize_t)sizeof(buf)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = p[i];
        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '-' ||
              ch == '+')) {
            return 0; /* inf, nan, hex, spaces: none is a value the server prints */
        }
    }
    memcpy(buf, p, (size_t)n);
    buf[n] = 0;
    char *end = NULL;
    double d = strtod_l(buf, &end, c_locale);
    if (end != buf + n || !isfinite(d)) {
        return 0;
    }
    *out = d;
    return 1;
}

enum {
    TEXT_BYTES = 0,    /* bytes as sent */
    TEXT_UTF8 = 1,     /* str, strict UTF-8 */
    TEXT_INT = 2,      /* int */
    TEXT_FLOAT = 3,    /* float (correctly rounded) */
    TEXT_PYTHON = 4,   /* the column's function(bytes) */
    TEXT_DATE = 5,     /* datetime.date */
    TEXT_DATETIME = 6, /* naive datetime.datetime */
    TEXT_TIMESTAMP = 7 /* datetime.datetime in UTC */
};

static int
read_lenenc(const unsigned char *p, Py_ssize_t avail, unsigned long long *value, Py_ssize_t *used)
{
    if (avail < 1) {
        return -1;
    }
    unsigned char first = p[0];
    if (first < 0xFB) {
        *value = first;
        *used = 1;
        return 0;
    }
    Py_ssize_t width = first == 0xFC ? 2 : first == 0xFD ? 3 : first == 0xFE ? 8 : -1;
    if (width < 0 || avail < 1 + width) {
        return -1;
    }
    unsigned long long v = 0;
    for (Py_ssize_t i = width; i >= 1; i--) {
        v = (v << 8) | p[i];
    }
    *value = v;
    *used = 1 + width;
    return 0;
}

static int
digits(const unsigned char *p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* 'YYYY-MM-DD[ hh:mm:ss[.f{1,6}]]' into fields; -1 when the text is not that shape */
static int
text_fields(const unsigned char *p, Py_ssize_t n, int with_time, int f[7])
{
    if (n < 10 || p[4] != '-' || p[7] != '-' || digits(p, 4, &f[0]) || digits(p + 5, 2, &f[1])
        || digits(p + 8, 2, &f[2])) {
        return -1;
    }
    f[3] = f[4] = f[5] = f[6] = 0;
    if (!with_time) {
        return n == 10 ? 0 : -1;
    }
    if (n < 19 || p[10] != ' ' || p[13] != ':' || p[16] != ':' || digits(p + 11, 2, &f[3])
        || digits(p + 14, 2, &f[4]) || digits(p + 17, 2, &f[5])) {
        return -1;
    }
    if (n == 19) {
        return 0;
    }
    Py_ssize_t frac = n - 20;
    if (p[19] != '.' || frac < 1 || frac > 6 || digits(p + 20, (int)frac, &f[6])) {
        return -1;
    }
    for (Py_ssize_t i = frac; i < 6; i++) {
        f[6] *= 10;
    }
    return 0;
}

/* Binary result sets (COM_STMT_EXECUTE; the MySQL client/server protocol, "Binary Protocol
 * Resultset Row": https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_binary_resultset.html,
 * MariaDB sql/protocol.cc Protocol_binary): a row packet is 0x00, a NULL bitmap of
 * (columns + 9) / 8 bytes whose first two bits are unused, then each non-NULL value by its
 * column's type in the result's column definitions: integers and floating point
 * little-endian at their width, DATE/DATETIME/TIMESTAMP/TIME as a length byte and that many
 * bytes of fields, every other type a length-encoded string as in a text row. Every function
 * that reads a row takes the columns' wire types (NULL: a text row). */

typedef struct {
    int type, decimals, is_unsigned;
} WireColumn;

enum {
    WIRE_TINY = 1, WIRE_SHORT = 2, WIRE_LONG = 3, WIRE_FLOAT = 4, WIRE_DOUBLE = 5,
    WIRE_TIMESTAMP = 7, WIRE_LONGLONG = 8, WIRE_INT24 = 9, WIRE_DATE = 10, WIRE_TIME = 11,
    WIRE_DATETIME = 12, WIRE_YEAR = 13
};

/* The bytes of a binary value of the column at p (its fixed width, or its length byte and
 * fields); 0 for a length-encoded string; -1 when the value does not fit in avail bytes or
 * its length byte is not one the type has. */
static Py_ssize_t
wire_fixed(const WireColumn *w, const unsigned char *p, Py_ssize_t avail)
{
    Py_ssize_t size;
    switch (w->type) {
    case WIRE_TINY:
        size = 1;
        break;
    case WIRE_SHORT:
    case WIRE_YEAR:
        size = 2;
        break;
    case WIRE_INT24:
    case WIRE_LONG:
    case WIRE_FLOAT:
        size = 4;
        break;
    case WIRE_LONGLONG:
    case WIRE_DOUBLE:
        size = 8;
        break;
    case WIRE_DATE:
    case WIRE_DATETIME:
    case WIRE_TIMESTAMP:
    case WIRE_TIME: {
        if (avail < 1) {
            return -1;
        }
        int n = p[0];
        int ok = w->type == WIRE_DATE   ? (n == 0 || n == 4)
                 : w->type == WIRE_TIME ? (n == 0 || n == 8 || n == 12)
                                        : (n == 0 || n == 4 || n == 7 || n == 11);
        if (!ok) {
            return -1;
        }
        size = 1 + n;
        break;
    }
    default:
        return 0;
    }
    return size <= avail ? size : -1;
}

/* Whether the binary protocol has a reading of this result column type: the types above,
 * and the ones sent as length-encoded strings. */
static int
wire_known(int type)
{
    return (type >= WIRE_TINY && type <= WIRE_YEAR && type != 6 /* NULL */) || type == 0
           || type == 15 /* VARCHAR */ || type == 16 /* BIT */ || type >= 245;
}

/* An integer value of the column (fixed width): its sign and magnitude. */
static void
wire_integer(const WireColumn *w, const unsigned char *p, int *negative, unsigned long long *v)
{
    unsigned long long u = 0;
    int bytes = w->type == WIRE_TINY                              ? 1
                : (w->type == WIRE_SHORT || w->type == WIRE_YEAR) ? 2
                : w->type == WIRE_LONGLONG                        ? 8
                                                                  : 4;
    for (int i = bytes - 1; i >= 0; i--) {
        u = u << 8 | p[i];
    }
    *negative = 0;
    if (!w->is_unsigned && w->type != WIRE_YEAR && (u >> (8 * bytes - 1)) & 1) {
        /* two's complement of the width: the magnitude of a negative value */
        unsigned long long mask = bytes == 8 ? ~0ULL : (1ULL << (8 * bytes)) - 1;
        *negative = 1;
        u = (~u + 1) & mask;
    }
    *v = u;
}

/* The fields of a binary DATE/DATETIME/TIMESTAMP (p at its length byte); 0 for each absent
 * one, as the server leaves them out when they are zero. */
static void
wire_fields(const unsigned char *p, Fields *f)
{
    int n = p[0];
    memset(f, 0, sizeof(*f));
    if (n >= 4) {
        f->year = p[1] | p[2] << 8;
        f->month = p[3];
        f->day = p[4];
    }
    if (n >= 7) {
        f->hour = p[5];
        f->minute = p[6];
        f->second = p[7];
    }
    if (n >= 11) {
        unsigned micro = (unsigned)p[8] | (unsigned)p[9] << 8 | (unsigned)p[10] << 16
                         | (unsigned)p[11] << 24;
        f->micro = micro > 999999 ? 1000000 : (int)micro; /* out of range stays out of range */
    }
}

/* A binary TIME (p at its length byte) as its sign, hours, minutes, seconds, microseconds. */
static void
wire_time(const unsigned char *p, int *negative, long long *hours, int *minute, int *second,
          long long *micro)
{
    int n = p[0];
    *negative = 0;
    *hours = *minute = *second = 0;
    *micro = 0;
    if (n >= 8) {
        unsigned long long days = (unsigned long long)p[2] | (unsigned long long)p[3] << 8
                                  | (unsigned long long)p[4] << 16
                                  | (unsigned long long)p[5] << 24;
        *negative = p[1] != 0;
        *hours = (long long)days * 24 + p[6];
        *minute = p[7];
        *second = p[8];
    }
    if (n >= 12) {
        *micro = (long long)((unsigned)p[9] | (unsigned)p[10] << 8 | (unsigned)p[11] << 16
                             | (unsigned)p[12] << 24);
    }
}

/* A fraction of `decimals` digits (the column's fsp, 0 to 6) of microseconds, as the text
 * protocol prints it after the seconds. Any other decimals (31 or 39: an expression of no
 * fixed precision) prints all six digits of a fraction there is, none of one there is not. */
static int
wire_fraction(char *out, size_t room, int decimals, long long micro)
{
    if (decimals < 0 || decimals > 6 || (decimals == 0 && micro != 0)) {
        decimals = micro != 0 ? 6 : 0;
    }
    if (decimals == 0) {
        return 0;
    }
    long long scaled = micro;
    for (int i = decimals; i < 6; i++) {
        scaled /= 10;
    }
    return snprintf(out, room, ".%0*lld", decimals, scaled);
}

/* A binary value (fixed, at p: the width or the length byte) as the text protocol prints
 * it, into out; its length, or -1 for a value no text has (a malformed one). Numbers print
 * exactly (a DOUBLE with the 17 digits that read back to the same double; the server's own
 * shortest form reads back the same), temporals with the column's fraction digits. */
static Py_ssize_t
wire_text(const WireColumn *w, const unsigned char *p, char *out, size_t room)
{
    int n = 0;
    switch (w->type) {
    case WIRE_TINY:
    case WIRE_SHORT:
    case WIRE_INT24:
    case WIRE_LONG:
    case WIRE_LONGLONG: {
        int negative;
        unsigned long long v;
        wire_integer(w, p, &negative, &v);
        n = snprintf(out, room, "%s%llu", negative ? "-" : "", v);
        break;
    }
    case WIRE_YEAR: {
        int negative;
        unsigned long long v;
        wire_integer(w, p, &negative, &v);
        n = snprintf(out, room, "%04llu", v);
        break;
    }
    case WIRE_FLOAT: {
        float f;
        memcpy(&f, p, 4);
        n = snprintf(out, room, "%.9g", (double)f);
        break;
    }
    case WIRE_DOUBLE: {
        double d;
        memcpy(&d, p, 8);
        n = snprintf(out, room, "%.17g", d);
        break;
    }
    case WIRE_DATE:
    case WIRE_DATETIME:
    case WIRE_TIMESTAMP: {
        Fields f;
        wire_fields(p, &f);
        n = snprintf(out, room, "%04d-%02d-%02d", f.year, f.month, f.day);
        if (w->type != WIRE_DATE && n > 0 && (size_t)n < room) {
            n += snprintf(out + n, room - (size_t)n, " %02d:%02d:%02d", f.hour, f.minute,
                          f.second);
            if (n > 0 && (size_t)n < room) {
                n += wire_fraction(out + n, room - (size_t)n, w->decimals, f.micro);
            }
        }
        break;
    }
    case WIRE_TIME: {
        int negative, minute, second;
        long long hours, micro;
        wire_time(p, &negative, &hours, &minute, &second, &micro);
        n = snprintf(out, room, "%s%02lld:%02d:%02d", negative ? "-" : "", hours, minute,
                     second);
        if (n > 0 && (size_t)n < room) {
            n += wire_fraction(out + n, room - (size_t)n, w->decimals, micro);
        }
        break;
    }
    default:
        return -1;
    }
    return n > 0 && (size_t)n < room ? n : -1;
}

/* The start of a row's values: for a text row 0; for a binary row past its header and NULL
 * bitmap. -1 when the payload is not a binary row of ncols columns. */
static Py_ssize_t
row_start(const WireColumn *wire, Py_ssize_t ncols, const unsigned char *p, Py_ssize_t n)
{
    if (wire == NULL) {
        return 0;
    }
    Py_ssize_t bitmap = (ncols + 9) / 8;
    return n >= 1 + bitmap && p[0] == 0x00 ? 1 + bitmap : -1;
}

/* The next value of a row at *at: NULL (*null), or its bytes (*value, *len), which are a
 * binary value of the column's wire type when *fixed (at its width or length byte), else
 * text as sent. *at moves past it. -1 when the row ends early. */
static int
row_field(const WireColumn *wire, Py_ssize_t k, const unsigned char *p, Py_ssize_t n,
          Py_ssize_t *at, int *null, const unsigned char **value, Py_ssize_t *len, int *fixed)
{
    *fixed = 0;
    if (wire != NULL) {
        Py_ssize_t bit = k + 2;
        *null = (p[1 + bit / 8] >> (bit % 8)) & 1;
        if (*null) {
            return 0;
        }
        Py_ssize_t size = wire_fixed(&wire[k], p + *at, n - *at);
        if (size < 0) {
            return -1;
        }
        if (size > 0) {
            *fixed = 1;
            *value = p + *at;
            *len = size;
            *at += size;
            return 0;
        }
    }
    else {
        if (*at >= n) {
            return -1;
        }
        *null = p[*at] == 0xFB;
        if (*null) {
            *at += 1;
            return 0;
        }
    }
    unsigned long long size;
    Py_ssize_t used;
    if (read_lenenc(p + *at, n - *at, &size, &used) < 0
        || size > (unsigned long long)(n - *at - used)) {
        return -1;
    }
    *value = p + *at + used;
    *len = (Py_ssize_t)size;
    *at += used + (Py_ssize_t)size;
    return 0;
}

/* The wire types argument (a tuple of (type, decimals, unsigned) per column, or None) into
 * *wire (NULL for None); -1 with an exception for a bad one or a type with no reading. */
static int
wire_columns(PyObject *obj, Py_ssize_t ncols, WireColumn **wire)
{
    *wire = NULL;
    if (obj == NULL || obj == Py_None) {
        return 0;
    }
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != ncols) {
        PyErr_SetString(PyExc_TypeError, "wire: a tuple of (type, decimals, unsigned) a column");
        return -1;
    }
    *wire = PyMem_Calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(WireColumn));
    if (*wire == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < ncols; k++) {
        WireColumn *w = &(*wire)[k];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(obj, k), "iip", &w->type, &w->decimals,
                              &w->is_unsigned)) {
            goto fail;
        }
        if (!wire_known(w->type)) {
            PyErr_Format(PyExc_ValueError, "column %zd: wire type %d has no binary reading", k,
                         w->type);
            goto fail;
        }
    }
    return 0;
fail:
    PyMem_Free(*wire);
    *wire = NULL;
    return -1;
}

static PyObject *
text_int(const unsigned char *p, Py_ssize_t n)
{
    if (n >= 1 && n <= 18) {
        Py_ssize_t i = 0;
        int negative = p[0] == '-';
        i = negative;
        if (i < n) {
            long long v = 0;
            for (; i < n; i++) {
                if (p[i] < '0' || p[i] > '9') {
                    break;
                }
                v = v * 10 + (p[i] - '0');
            }
            if (i == n) {
                return PyLong_FromLongLong(negative ? -v : v);
            }
        }
    }
    char buf[32];
    if (n < 1 || n >= (Py_ssize_t)sizeof(buf) || memchr(p, 0, (size_t)n) != NULL) {
        return NULL; /* the Python path (PyLong_FromString would stop at a NUL) */
    }
    memcpy(buf, p, (size_t)n);
    buf[n] = 0;
    return PyLong_FromString(buf, NULL, 10);
}

static PyObject *
text_value(int kind, PyObject *fallback, const unsigned char *p, Py_ssize_t n)
{
    PyObject *value = NULL;
    int f[7];
    switch (kind) {
    case TEXT_BYTES:
        return PyBytes_FromStringAndSize((const char *)p, n);
    case TEXT_UTF8:
        value = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
        if (value == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* the column's function raises the error that names it */
        }
        break;
    case TEXT_INT:
        value = text_int(p, n);
        if (value == NULL) {
            PyErr_Clear();
        }
        break;
    case TEXT_FLOAT: {
        double d;
        if (text_double(p, n, &d)) {
            value = PyFloat_FromDouble(d);
        }
        break;
    }
    case TEXT_DATE:
        if (text_fields(p, n, 0, f) == 0 && valid_date(f[0], f[1], f[2])) {
            value = PyDate_FromDate(f[0], f[1], f[2]);
        }
        break;
    case TEXT_DATETIME:
    case TEXT_TIMESTAMP:
        if (text_fields(p, n, 1, f) == 0 && valid_date(f[0], f[1], f[2]) && f[3] < 24
            && f[4] < 60 && f[5] < 60) {
            value = PyDateTimeAPI->DateTime_FromDateAndTime(
                f[0], f[1], f[2], f[3], f[4], f[5], f[6],
                kind == TEXT_TIMESTAMP ? PyDateTime_TimeZone_UTC : Py_None,
                PyDateTimeAPI->DateTimeType);
        }
        break;
    default:
        break;
    }
    if (value != NULL || PyErr_Occurred()) {
        return value;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, n);
    if (raw == NULL) {
        return NULL;
    }
    value = PyObject_CallOneArg(fallback, raw);
    Py_DECREF(raw);
    return value;
}

/* One row from a row packet's payload (a binary one with wire); NULL with an exception, or
 * with none when the payload is not a row of ncols columns (a protocol error the caller
 * names). A binary value goes to its column's kind as the text the text protocol sends. */
static PyObject *
text_row(const unsigned char *p, Py_ssize_t n, Py_ssize_t ncols, const int *kinds,
         PyObject *fallbacks, const WireColumn *wire)
{
    Py_ssize_t at = row_start(wire, ncols, p, n);
    if (at < 0) {
        return NULL;
    }
    PyObject *row = PyTuple_New(ncols);
    if (row == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ncols; i++) {
        int null, fixed;
        const unsigned char *v = NULL;
        Py_ssize_t len = 0;
        char text[96];
        if (row_field(wire, i, p, n, &at, &null, &v, &len, &fixed) < 0) {
            goto bad;
        }
        if (null) {
            PyTuple_SET_ITEM(row, i, Py_NewRef(Py_None));
            continue;
        }
        if (fixed) {
            len = wire_text(&wire[i], v, text, sizeof(text));
            if (len < 0) {
                goto bad;
            }
            v = (const unsigned char *)text;
        }
        PyObject *value = text_value(kinds[i], PyTuple_GET_ITEM(fallbacks, i), v, len);
        if (value == NULL) {
            Py_DECREF(row);
            return NULL;
        }
        PyTuple_SET_ITEM(row, i, value);
    }
    if (at == n) {
        return row;
    }
bad:
    Py_DECREF(row);
    return NULL;
}

static int
text_kinds(PyObject *kinds_obj, PyObject *fallbacks, Py_ssize_t *ncols, int **kinds)
{
    if (!PyTuple_Check(kinds_obj) || !PyTuple_Check(fallbacks)
        || PyTuple_GET_SIZE(kinds_obj) != PyTuple_GET_SIZE(fallbacks)) {
        PyErr_SetString(PyExc_TypeError, "kinds and fallbacks: tuples of one length");
        return -1;
    }
    *ncols = PyTuple_GET_SIZE(kinds_obj);
    *kinds = PyMem_Malloc(sizeof(int) * (size_t)(*ncols > 0 ? *ncols : 1));
    if (*kinds == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *ncols; i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(kinds_obj, i));
        if (k == -1 && PyErr_Occurred()) {
            PyMem_Free(*kinds);
            return -1;
        }
        (*kinds)[i] = (int)k;
    }
    return 0;
}

/* What the packet at *offset of a text result set is. A row: its payload length in *len.
 * The end of the result set: *offset moves past it. */
enum { PACKET_ROW = 0, PACKET_END = 1, PACKET_ERROR = 2, PACKET_SPLIT = 3, PACKET_INCOMPLETE = 4 };

static int
packet_kind(const unsigned char *buf, Py_ssize_t size, Py_ssize_t *offset, int deprecate_eof,
            Py_ssize_t *len)
{
    Py_ssize_t at = *offset;
    *len = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16;
    const unsigned char *p = buf + at + 4;
    if (*len == MAX_PAYLOAD) {
        return PACKET_SPLIT; /* a row over several packets */
    }
    if (at + 4 + *len > size) {
        return PACKET_INCOMPLETE;
    }
    if (*len > 0 && p[0] == 0xFF) {
        return PACKET_ERROR;
    }
    if (*len > 0 && p[0] == 0xFE && (*len < 9 || deprecate_eof)) {
        *offset = at + 4 + *len;
        return PACKET_END;
    }
    return PACKET_ROW;
}

/* text_rows(buf, offset, kinds, fallbacks, deprecate_eof, wire=None) -> (rows, offset, state):
 * the rows of the whole packets in buf from offset (binary rows with wire). state: 0 more data is needed (offset is
 * the first incomplete packet), 1 the result set ended (offset after its EOF/OK packet),
 * 2 an ERR packet starts at offset, 3 a packet of the maximum payload (a row split over
 * packets) starts at offset. A packet that is not a row of these columns raises
 * ValueError. */
PyObject *
rc_text_rows(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset;
    PyObject *kinds_obj, *fallbacks, *wire_obj = Py_None;
    int deprecate_eof;
    if (!PyArg_ParseTuple(args, "y*nO!O!p|O", &view, &offset, &PyTuple_Type, &kinds_obj,
                          &PyTuple_Type, &fallbacks, &deprecate_eof, &wire_obj)) {
        return NULL;
    }
    Py_ssize_t ncols;
    int *kinds = NULL;
    WireColumn *wire = NULL;
    PyObject *rows = NULL;
    int state = 0;
    if (text_kinds(kinds_obj, fallbacks, &ncols, &kinds) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (wire_columns(wire_obj, ncols, &wire) < 0) {
        goto fail;
    }
    rows = PyList_New(0);
    if (rows == NULL) {
        goto fail;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t size = view.len;
    while (offset + 4 <= size) {
        Py_ssize_t len;
        const unsigned char *p = buf + offset + 4;
        int kind = packet_kind(buf, size, &offset, deprecate_eof, &len);
        if (kind != PACKET_ROW) {
            state = kind == PACKET_INCOMPLETE ? 0 : kind;
            break;
        }
        PyObject *row = text_row(p, len, ncols, kinds, fallbacks, wire);
        if (row == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError,
                             "a row packet of %zd bytes is not a row of %zd columns", len, ncols);
            }
            goto fail;
        }
        int failed = PyList_Append(rows, row);
        Py_DECREF(row);
        if (failed) {
            goto fail;
        }
        offset += 4 + len;
    }
    PyMem_Free(wire);
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nni)", rows, offset, state);
fail:
    Py_XDECREF(rows);
    PyMem_Free(wire);
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return NULL;
}

/* text_row(payload, kinds, fallbacks, wire=None) -> tuple: one row from a whole payload (a
 * row the server split over several packets, joined by the caller; binary with wire). */
PyObject *
rc_text_row_payload(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *kinds_obj, *fallbacks, *wire_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*O!O!|O", &view, &PyTuple_Type, &kinds_obj, &PyTuple_Type,
                          &fallbacks, &wire_obj)) {
        return NULL;
    }
    Py_ssize_t ncols;
    int *kinds = NULL;
    WireColumn *wire = NULL;
    PyObject *row = NULL;
    if (text_kinds(kinds_obj, fallbacks, &ncols, &kinds) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (wire_columns(wire_obj, ncols, &wire) == 0) {
        row = text_row(view.buf, view.len, ncols, kinds, fallbacks, wire);
        if (row == NULL && !PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "a row of %zd bytes is not a row of %zd columns",
                         view.len, ncols);
        }
    }
    PyMem_Free(wire);
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return row;
}

/* text_block(buf, offset, specs, kinds, fallbacks, deprecate_eof, max_rows, wire=None)
 *   -> (columns, count, offset, state, last) (binary rows with wire):
 * the rows of the whole packets in buf from offset, column by column: a column whose spec op
 * is TB_OBJECTS becomes a list of values (text_value with its kind and fallback), every other
 * one buffers (set, values, lengths | None) of the block layout (block.py). count rows were
 * read; last is the offset of the last row's packet (-1: none). state as text_rows', and 4: the
 * row at offset has a value its column's buffers cannot hold (a zero date, text that is not
 * UTF-8 or not ASCII, a number out of range...): the rows before it are in the result, and
 * the caller reads the rest as objects. At most max_rows rows are read (state 0 then). */

typedef struct {
    int op, arg0, arg1;
} TextSpec;

/* An integer (sign and magnitude) into an int of the spec's width and signedness; 0 when it
 * is out of that range. */
static int
int_into(const TextSpec *t, int negative, unsigned long long v, unsigned char out[8])
{
    int bits = 8 * t->arg0;
    if (t->arg1) {
        unsigned long long limit = 1ULL << (bits - 1); /* |min|; max is limit - 1 */
        if (negative ? v > limit : v >= limit) {
            return 0;
        }
        long long s = negative ? (long long)(0 - v) : (long long)v;
        memcpy(out, &s, 8);
    }
    else {
        if (negative && v != 0) {
            return 0;
        }
        if (bits < 64 && v >> bits) {
            return 0;
        }
        memcpy(out, &v, 8);
    }
    return 1;
}

/* A double into a float of the spec's width (4: rounded to float32, as the decoder widens
 * a FLOAT); the width. */
static int
float_into(const TextSpec *t, double d, unsigned char out[8])
{
    if (t->arg0 == 4) {
        float fl = (float)d;
        memcpy(out, &fl, 4);
    }
    else {
        memcpy(out, &d, 8);
    }
    return t->arg0;
}

static int
tb_int(const TextSpec *t, const unsigned char *p, Py_ssize_t n, unsigned char out[8])
{
    Py_ssize_t i = 0;
    int negative = n > 0 && p[0] == '-';
    i = negative;
    if (i >= n || n - i > 20) {
        return 0;
    }
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return 0;
        }
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (~0ULL - d) / 10) {
            return 0;
        }
        v = v * 10 + d;
    }
    return int_into(t, negative, v, out);
}

static int
tb_decimal(const TextSpec *t, const unsigned char *p, Py_ssize_t n, unsigned char out[16])
{
    Py_ssize_t i = 0;
    int negative = n > 0 && p[0] == '-';
    i = negative;
    unsigned __int128 v = 0;
    int whole = 0, fraction = 0, seen_point = 0; /* whole: digits before the point past zeros */
    int any_whole = 0;
    for (; i < n; i++) {
        unsigned char c = p[i];
        if (c == '.' && !seen_point) {
            seen_point = 1;
            continue;
        }
        if (c < '0' || c > '9') {
            return 0;
        }
        if (seen_point) {
            fraction++;
        }
        else {
            any_whole = 1;
            whole += whole > 0 || c != '0';
        }
        v = v * 10 + (unsigned)(c - '0');
        if (whole + fraction > 38) {
            return 0;
        }
    }
    /* SELECT prints exactly the scale's digits after the point; anything else is unusual */
    if (!any_whole || fraction != t->arg1 || (t->arg1 > 0) != seen_point
        || whole > t->arg0 - t->arg1) {
        return 0;
    }
    __int128 s = negative ? -(__int128)v : (__int128)v;
    memcpy(out, &s, 16);
    return 1;
}

/* TIME as SELECT prints it ([-]H:MM:SS[.f], 1 to 6 fraction digits, the hours' digits as
 * many as there are: temporal.time_from_text's grammar) as signed microseconds */
static int
tb_time(const unsigned char *p, Py_ssize_t n, long long *out)
{
    Py_ssize_t i = 0;
    int negative = n > 0 && p[0] == '-';
    i = negative;
    long long hours = 0;
    Py_ssize_t start = i;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        if (i - start >= 9) {
            return 0; /* more hours than any TIME holds: the converter decides */
        }
        hours = hours * 10 + (p[i] - '0');
        i++;
    }
    if (i == start || n - i < 6 || p[i] != ':' || p[i + 3] != ':') {
        return 0;
    }
    int two[2];
    for (int k = 0; k < 2; k++) {
        const unsigned char *d = p + i + 1 + 3 * k;
        if (d[0] < '0' || d[0] > '9' || d[1] < '0' || d[1] > '9') {
            return 0;
        }
        two[k] = (d[0] - '0') * 10 + (d[1] - '0');
    }
    i += 6;
    long long micro = 0;
    if (i < n) {
        if (p[i] != '.' || n - i - 1 < 1 || n - i - 1 > 6) {
            return 0;
        }
        int digits = 0;
        for (i++; i < n; i++, digits++) {
            if (p[i] < '0' || p[i] > '9') {
                return 0;
            }
            micro = micro * 10 + (p[i] - '0');
        }
        for (; digits < 6; digits++) {
            micro *= 10;
        }
    }
    long long total = (hours * 3600 + two[0] * 60 + two[1]) * 1000000LL + micro;
    *out = negative ? -total : total;
    return 1;
}

/* one non-NULL value into its column; 1 done, 0 the buffers cannot hold it, -1 error */
static int
tb_value(const TextSpec *t, const unsigned char *p, Py_ssize_t n, LaneColumn *c)
{
    unsigned char out[16];
    int width = 0, f[7];
    long long i;
    switch (t->op) {
    case TB_INT:
        if (!tb_int(t, p, n, out)) {
            return 0;
        }
        width = t->arg0;
        break;
    case TB_FLOAT: {
        double d;
        if (!text_double(p, n, &d)) {
            return 0;
        }
        width = float_into(t, d, out);
        break;
    }
    case TB_DECIMAL:
        if (!tb_decimal(t, p, n, out)) {
            return 0;
        }
        width = 16;
        break;
    case TB_DATE: {
        if (text_fields(p, n, 0, f) != 0 || !valid_date(f[0], f[1], f[2])) {
            return 0;
        }
        int days = (int)days_from_civil(f[0], f[1], f[2]);
        memcpy(out, &days, 4);
        width = 4;
        break;
    }
    case TB_DATETIME:
    case TB_TIMESTAMP: {
        if (text_fields(p, n, 1, f) != 0) {
            return 0;
        }
        Fields fields = {f[0], f[1], f[2], f[3], f[4], f[5], f[6]};
        if (!valid_fields(&fields)) {
            return 0; /* the zero date or TIMESTAMP, an invalid date: the converter's marker */
        }
        i = fields_micros(&fields);
        memcpy(out, &i, 8);
        width = 8;
        break;
    }
    case TB_TIME:
        if (!tb_time(p, n, &i)) {
            return 0;
        }
        memcpy(out, &i, 8);
        width = 8;
        break;
    case TB_BIT: {
        if (n < 1 || n > 8) {
            return 0;
        }
        unsigned long long v = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            v = v << 8 | p[k];
        }
        if (t->arg1 && v >> 63) {
            return 0;
        }
        memcpy(out, &v, 8);
        width = 8;
        break;
    }
    case TB_UTF8:
    case TB_ASCII:
    case TB_BYTES: {
        if (t->op == TB_UTF8 && !valid_utf8(p, n)) {
            return 0;
        }
        if (t->op == TB_BYTES && t->arg0 > 0 && n < t->arg0) {
            /* BINARY(n): the decoder pads to n bytes as the server stores it */
            if (grow(&c->data, t->arg0) < 0 || grow(&c->lengths, 4) < 0) {
                return -1;
            }
            memcpy(c->data.data + c->data.len, p, (size_t)n);
            memset(c->data.data + c->data.len + n, 0, (size_t)(t->arg0 - n));
            c->data.len += t->arg0;
            memcpy(c->lengths.data + c->lengths.len, &t->arg0, 4);
            c->lengths.len += 4;
            return 1;
        }
        if (t->op == TB_ASCII && ascii_prefix(p, n) != n) {
            return 0;
        }
        if (n > 0x7FFFFFFF || grow(&c->data, n) < 0 || grow(&c->lengths, 4) < 0) {
            return n > 0x7FFFFFFF ? 0 : -1;
        }
        int len = (int)n;
        memcpy(c->data.data + c->data.len, p, (size_t)n);
        c->data.len += n;
        memcpy(c->lengths.data + c->lengths.len, &len, 4);
        c->lengths.len += 4;
        return 1;
    }
    default:
        return 0;
    }
    if (grow(&c->data, width) < 0) {
        return -1;
    }
    memcpy(c->data.data + c->data.len, out, (size_t)width);
    c->data.len += width;
    return 1;
}

/* One non-NULL binary value (fixed: p at its width or length byte) into its column: read
 * as it is where the column's op takes the wire type, otherwise as the text the text
 * protocol sends (tb_value). 1 done, 0 the buffers cannot hold it, -1 error, -2 a value
 * no text has. */
static int
bb_value(const TextSpec *t, const WireColumn *w, const unsigned char *p, LaneColumn *c)
{
    unsigned char out[8];
    int width = 0;
    switch (t->op) {
    case TB_INT:
        if (w->type == WIRE_TINY || w->type == WIRE_SHORT || w->type == WIRE_INT24
            || w->type == WIRE_LONG || w->type == WIRE_LONGLONG) {
            int negative;
            unsigned long long v;
            wire_integer(w, p, &negative, &v);
            if (!int_into(t, negative, v, out)) {
                return 0;
            }
            width = t->arg0;
        }
        break;
    case TB_FLOAT:
        if (w->type == WIRE_DOUBLE || w->type == WIRE_FLOAT) {
            double d;
            if (w->type == WIRE_DOUBLE) {
                memcpy(&d, p, 8);
            }
            else {
                float f;
                memcpy(&f, p, 4);
                d = f;
            }
            if (!isfinite(d)) {
                return 0;
            }
            width = float_into(t, d, out);
        }
        break;
    case TB_DATE:
    case TB_DATETIME:
    case TB_TIMESTAMP:
        if (w->type == WIRE_DATE || w->type == WIRE_DATETIME || w->type == WIRE_TIMESTAMP) {
            Fields f;
            wire_fields(p, &f);
            if ((t->op == TB_DATE) != (w->type == WIRE_DATE)) {
                break; /* as text: the other shape, which the op refuses */
            }
            if (t->op == TB_DATE) {
                if (!valid_date(f.year, f.month, f.day)) {
                    return 0;
                }
                int days = (int)days_from_civil(f.year, f.month, f.day);
                memcpy(out, &days, 4);
                width = 4;
            }
            else {
                if (!valid_fields(&f)) {
                    return 0; /* the zero date or TIMESTAMP, an invalid date */
                }
                long long micros = fields_micros(&f);
                memcpy(out, &micros, 8);
                width = 8;
            }
        }
        break;
    case TB_TIME:
        if (w->type == WIRE_TIME) {
            int negative, minute, second;
            long long hours, micro;
            wire_time(p, &negative, &hours, &minute, &second, &micro);
            if (p[0] >= 8 && p[6] > 23) {
                return 0; /* an hour of a day past 23: not a TIME the server sends */
            }
            if (hours > 838 || minute > 59 || second > 59 || micro > 999999) {
                return 0; /* past TIME's range: as text, where the converter decides */
            }
            long long total = (hours * 3600 + minute * 60 + second) * 1000000LL + micro;
            total = negative ? -total : total;
            memcpy(out, &total, 8);
            width = 8;
        }
        break;
    default:
        break;
    }
    if (width == 0) {
        char text[96];
        Py_ssize_t n = wire_text(w, p, text, sizeof(text));
        return n < 0 ? -2 : tb_value(t, (const unsigned char *)text, n, c);
    }
    if (grow(&c->data, width) < 0) {
        return -1;
    }
    memcpy(c->data.data + c->data.len, out, (size_t)width);
    c->data.len += width;
    return 1;
}

static int
tb_variable(int op)
{
    return op == TB_UTF8 || op == TB_ASCII || op == TB_BYTES;
}

static int
tb_null(const TextSpec *t, LaneColumn *c)
{
    Py_ssize_t width = t->op == TB_DECIMAL ? 16
                       : t->op == TB_DATE ? 4
                       : (t->op == TB_DATETIME || t->op == TB_TIMESTAMP || t->op == TB_TIME
                          || t->op == TB_BIT)
                           ? 8
                           : t->arg0;
    return null_slot(c, tb_variable(t->op), width);
}

static int
tb_check(const TextSpec *t)
{
    switch (t->op) {
    case TB_OBJECTS:
        return 1;
    case TB_INT:
        return (t->arg0 == 1 || t->arg0 == 2 || t->arg0 == 4 || t->arg0 == 8) &&
               (t->arg1 == 0 || t->arg1 == 1);
    case TB_FLOAT:
        return t->arg0 == 4 || t->arg0 == 8;
    case TB_DECIMAL:
        return t->arg0 >= 1 && t->arg0 <= 38 && t->arg1 >= 0 && t->arg1 <= t->arg0;
    case TB_DATE:
    case TB_DATETIME:
    case TB_TIMESTAMP:
    case TB_UTF8:
    case TB_ASCII:
    case TB_TIME:
        return 1;
    case TB_BYTES:
        return t->arg0 >= 0 && t->arg0 <= 255;
    case TB_BIT:
        return t->arg1 == 0 || t->arg1 == 1;
    default:
        return 0;
    }
}

/* One row into the columns (a binary row with wire); 1 done, 0 a value the buffers cannot
 * hold (nothing of the row kept), -1 an exception, -2 not a row of these columns. */
static int
tb_row(const unsigned char *p, Py_ssize_t n, Py_ssize_t ncols, const TextSpec *specs,
       const int *kinds, PyObject *fallbacks, LaneColumn *cols, PyObject **lists,
       const WireColumn *wire)
{
    Py_ssize_t at = row_start(wire, ncols, p, n), k;
    int result = at < 0 ? -2 : 1;
    for (k = 0; result == 1 && k < ncols; k++) {
        LaneColumn *c = &cols[k];
        int null, fixed;
        const unsigned char *v = NULL;
        Py_ssize_t len = 0;
        if (row_field(wire, k, p, n, &at, &null, &v, &len, &fixed) < 0) {
            result = -2;
            break;
        }
        if (specs[k].op == TB_OBJECTS) {
            PyObject *value;
            char text[96];
            if (!null && fixed) {
                len = wire_text(&wire[k], v, text, sizeof(text));
                if (len < 0) {
                    result = -2;
                    break;
                }
                v = (const unsigned char *)text;
            }
            if (null) {
                value = Py_NewRef(Py_None);
            }
            else {
                value = text_value(kinds[k], PyTuple_GET_ITEM(fallbacks, k), v, len);
            }
            if (value == NULL) {
                result = -1;
                break;
            }
            int failed = PyList_Append(lists[k], value);
            Py_DECREF(value);
            if (failed) {
                result = -1;
                break;
            }
        }
        else {
            int done = null    ? (tb_null(&specs[k], c) == 0 ? 1 : -1)
                       : fixed ? bb_value(&specs[k], &wire[k], v, c)
                               : tb_value(&specs[k], v, len, c);
            if (done != 1) {
                result = done;
                break;
            }
            if (grow(&c->valid, 1) < 0) {
                result = -1;
                break;
            }
            c->valid.data[c->valid.len++] = null ? 0 : 1;
        }
    }
    if (result == 1 && at != n) {
        result = -2;
    }
    return result;
}

PyObject *
rc_text_block(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset, max_rows;
    PyObject *specs_obj, *kinds_obj, *fallbacks, *wire_obj = Py_None;
    int deprecate_eof;
    if (!PyArg_ParseTuple(args, "y*nO!O!O!pn|O", &view, &offset, &PyTuple_Type, &specs_obj,
                          &PyTuple_Type, &kinds_obj, &PyTuple_Type, &fallbacks, &deprecate_eof,
                          &max_rows, &wire_obj)) {
        return NULL;
    }
    Py_ssize_t ncols;
    int *kinds = NULL;
    WireColumn *wire = NULL;
    TextSpec *specs = NULL;
    LaneColumn *cols = NULL;
    PyObject **lists = NULL;
    PyObject *columns = NULL, *result = NULL;
    Py_ssize_t count = 0, last = -1;
    int state = 0;
    if (text_kinds(kinds_obj, fallbacks, &ncols, &kinds) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (PyTuple_GET_SIZE(specs_obj) != ncols) {
        PyErr_SetString(PyExc_TypeError, "specs: one per column");
        goto done;
    }
    if (wire_columns(wire_obj, ncols, &wire) < 0) {
        goto done;
    }
    specs = PyMem_Calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(TextSpec));
    cols = PyMem_Calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(LaneColumn));
    lists = PyMem_Calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(PyObject *));
    if (specs == NULL || cols == NULL || lists == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < ncols; k++) {
        TextSpec *t = &specs[k];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs_obj, k), "iii", &t->op, &t->arg0,
                              &t->arg1)) {
            goto done;
        }
        if (!tb_check(t)) {
            PyErr_Format(PyExc_ValueError, "column %zd: bad text block spec", k);
            goto done;
        }
        if (t->op == TB_OBJECTS && (lists[k] = PyList_New(0)) == NULL) {
            goto done;
        }
    }
    Py_ssize_t *marks = PyMem_Malloc(sizeof(Py_ssize_t) * 4 * (size_t)(ncols > 0 ? ncols : 1));
    if (marks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t size = view.len, len = 0;
    /* columns of buffers only: no Python object is touched, so other threads (the event loop,
     * the Parquet writer) run meanwhile, when there is enough to read */
    int objects = 0, failed = 0;
    for (Py_ssize_t k = 0; k < ncols; k++) {
        objects |= specs[k].op == TB_OBJECTS;
    }
    PyThreadState *saved =
        !objects && size - offset >= GIL_RELEASE_BYTES ? PyEval_SaveThread() : NULL;
    while (offset + 4 <= size && count < max_rows) {
        const unsigned char *p = buf + offset + 4;
        int kind = packet_kind(buf, size, &offset, deprecate_eof, &len);
        if (kind != PACKET_ROW) {
            state = kind == PACKET_INCOMPLETE ? 0 : kind;
            break;
        }
        for (Py_ssize_t k = 0; k < ncols; k++) {
            marks[4 * k] = cols[k].valid.len;
            marks[4 * k + 1] = cols[k].data.len;
            marks[4 * k + 2] = cols[k].lengths.len;
            marks[4 * k + 3] = lists[k] ? PyList_GET_SIZE(lists[k]) : 0;
        }
        int done = tb_row(p, len, ncols, specs, kinds, fallbacks, cols, lists, wire);
        if (done != 1) {
            for (Py_ssize_t k = 0; k < ncols; k++) { /* nothing of the row stays */
                cols[k].valid.len = marks[4 * k];
                cols[k].data.len = marks[4 * k + 1];
                cols[k].lengths.len = marks[4 * k + 2];
                if (lists[k] && PyList_GET_SIZE(lists[k]) > marks[4 * k + 3]) {
                    PyObject *err_type, *err_value, *err_tb;
                    PyErr_Fetch(&err_type, &err_value, &err_tb);
                    PyList_SetSlice(lists[k], marks[4 * k + 3], PyList_GET_SIZE(lists[k]), NULL);
                    PyErr_Restore(err_type, err_value, err_tb);
                }
            }
        }
        if (done == 0) {
            state = 4;
            break;
        }
        if (done < 0) {
            failed = done;
            break;
        }
        last = offset;
        count++;
        offset += 4 + len;
    }
    if (saved != NULL) {
        PyEval_RestoreThread(saved);
        if (failed == -1) {
            PyErr_NoMemory(); /* the only error of buffers */
        }
    }
    PyMem_Free(marks);
    if (failed) {
        if (failed == -2 && !PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError,
                         "a row packet of %zd bytes is not a row of %zd columns", len, ncols);
        }
        goto done;
    }
    columns = PyTuple_New(ncols);
    if (columns == NULL) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < ncols; k++) {
        PyObject *item;
        LaneColumn *c = &cols[k];
        if (specs[k].op == TB_OBJECTS) {
            item = Py_NewRef(lists[k]);
        }
        else {
            item = rc_lane_buffers(c, tb_variable(specs[k].op));
        }
        if (item == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(columns, k, item);
    }
    result = Py_BuildValue("(Onnin)", columns, count, offset, state, last);
done:
    Py_XDECREF(columns);
    for (Py_ssize_t k = 0; cols != NULL && k < ncols; k++) {
        PyMem_RawFree(cols[k].valid.data);
        PyMem_RawFree(cols[k].data.data);
        PyMem_RawFree(cols[k].lengths.data);
    }
    for (Py_ssize_t k = 0; lists != NULL && k < ncols; k++) {
        Py_XDECREF(lists[k]);
    }
    PyMem_Free(cols);
    PyMem_Free(lists);
    PyMem_Free(specs);
    PyMem_Free(wire);
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return result;
}

int
rc_text_init(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return -1;
    }
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}
