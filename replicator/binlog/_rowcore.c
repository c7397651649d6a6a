/*
 * The native core of replicator.binlog: rows events decoded into blocks, and the Arrow buffers
 * the Parquet writer and the snapshot reader build from them.
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
 * column's Python converter, which is the reference for them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stddef.h>
#include <string.h>

enum {
    OP_INT = 1,      /* width 1/2/3/4/8, little-endian, arg0: signed */
    OP_FLOAT = 2,    /* float32 widened to double */
    OP_DOUBLE = 3,
    OP_YEAR = 4,     /* one byte: 0, or 1900 + n */
    OP_DECIMAL = 5,  /* arg0: integer digits, arg1: scale; obj: converter (invalid values) */
    OP_DATE = 6,     /* obj: converter */
    OP_DATETIME2 = 7,  /* arg0: fraction bytes, arg1: unit; obj: converter */
    OP_TIMESTAMP2 = 8, /* arg0: fraction bytes, arg1: unit; obj: converter */
    OP_TIME2 = 9,      /* arg0: fraction bytes, arg1: unit */
    OP_UTF8 = 10,      /* width: length prefix; strict UTF-8 text */
    OP_LATIN1 = 11,    /* width: length prefix; ASCII here, else obj(bytes) */
    OP_TEXT = 12,      /* width: length prefix; obj(bytes) -> str */
    OP_BYTES = 13,     /* width: length prefix; arg0: pad to this many bytes with 0x00 */
    OP_ENUM = 14,      /* width 1/2; obj: labels tuple */
    OP_CALL = 15,      /* obj(buf, pos) -> (value, pos) */
};

typedef struct {
    int op;
    int width;
    long long arg0;
    long long arg1;
    PyObject *obj; /* borrowed from BlockSpec.objects */
} Instr;

static PyObject *Decimal = NULL;

/* ---------------------------------------------------------------------------- values */

static inline unsigned long long
le_uint(const unsigned char *p, int width)
{
    unsigned long long v = 0;
    for (int i = width - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline unsigned long long
be_uint(const unsigned char *p, int width)
{
    unsigned long long v = 0;
    for (int i = 0; i < width; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

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

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const unsigned int POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                       100000000, 1000000000};

/* ---------------------------------------------------------------- the stored formats
 * One reading of each fixed-width format, shared by the values as objects (decode_value) and
 * the column buffers (lane_value). */

/* The digits of a DECIMAL(intg + scale, scale) stored in w bytes: intg + scale characters
 * '0'-'9' into digits (leading zeros kept), the sign into *negative. 0 for a digit group out
 * of range. Groups of 9 digits take 4 bytes; the integer part's partial group comes first,
 * the fraction's last; a negative value is stored inverted (strings/decimal.cc). */
static int
decimal_digits(const unsigned char *p, int w, int intg, int scale, char *digits, int *negative)
{
    unsigned char b[40];
    if (w > (int)sizeof(b)) {
        return 0;
    }
    memcpy(b, p, (size_t)w);
    *negative = !(b[0] & 0x80);
    if (*negative) {
        for (int k = 0; k < w; k++) {
            b[k] = (unsigned char)~b[k];
        }
    }
    b[0] &= 0x7F;
    int at = 0, n = 0;
    for (int part = 0; part < 2; part++) {
        int count_digits = part == 0 ? intg : scale;
        int whole = count_digits / 9, partial = count_digits % 9;
        for (int g = 0; g < whole + (partial ? 1 : 0); g++) {
            int count = 9;
            if (partial && ((part == 0 && g == 0) || (part == 1 && g == whole))) {
                count = partial;
            }
            int width = count == 9 ? 4 : DIG2BYTES[count];
            unsigned long long group = be_uint(b + at, width);
            at += width;
            if (group >= POW10[count]) {
                return 0;
            }
            for (int k = count - 1; k >= 0; k--) {
                digits[n + k] = (char)('0' + group % 10);
                group /= 10;
            }
            n += count;
        }
    }
    return 1;
}

typedef struct {
    int year, month, day, hour, minute, second, micro;
} Fields;

static void
date_fields(const unsigned char *p, Fields *f)
{
    unsigned long packed = (unsigned long)le_uint(p, 3);
    *f = (Fields){(int)(packed >> 9), (int)((packed >> 5) & 15), (int)(packed & 31), 0, 0, 0, 0};
}

/* DATETIME2: 5 bytes big-endian "1 sign | 17 year*13+month | 5 day | 5 hour | 6 minute |
 * 6 second", then the fraction. 0 when the sign bit says negative (never valid). */
static int
datetime2_fields(const unsigned char *p, int w, int frac_bytes, long long unit, Fields *f)
{
    unsigned long long whole = be_uint(p, w);
    int frac_bits = 8 * frac_bytes;
    unsigned long long top = whole >> frac_bits;
    if (top < 0x8000000000ULL) {
        return 0;
    }
    unsigned long long packed = top - 0x8000000000ULL;
    unsigned long long ymd = packed >> 17, year_month = ymd >> 5;
    long long micro = (long long)(whole & ((1ULL << frac_bits) - 1)) * unit;
    *f = (Fields){(int)(year_month / 13), (int)(year_month % 13), (int)(ymd & 31),
                  (int)((packed >> 12) & 31), (int)((packed >> 6) & 63), (int)(packed & 63),
                  micro > 999999 ? 1000000 : (int)micro};
    return 1;
}

/* TIMESTAMP2: 4 bytes big-endian epoch seconds, then the fraction: microseconds since the
 * epoch (0 is the zero timestamp). */
static long long
timestamp2_micros(const unsigned char *p, int w, int frac_bytes, long long unit)
{
    unsigned long long whole = be_uint(p, w);
    int frac_bits = 8 * frac_bytes;
    long long seconds = (long long)(whole >> frac_bits);
    return seconds * 1000000 + (long long)(whole & ((1ULL << frac_bits) - 1)) * unit;
}

/* TIME2: big-endian "1 sign | 1 unused | 10 hour | 6 minute | 6 second" + fraction, offset
 * binary: signed microseconds. */
static long long
time2_micros(const unsigned char *p, int w, int frac_bytes, long long unit)
{
    long long value = (long long)be_uint(p, w) - (1LL << (8 * w - 1));
    long long magnitude = value < 0 ? -value : value;
    int frac_bits = 8 * frac_bytes;
    long long hms = magnitude >> frac_bits;
    long long seconds = ((hms >> 12) & 1023) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63);
    long long micros = seconds * 1000000 + (magnitude & ((1LL << frac_bits) - 1)) * unit;
    return value < 0 ? -micros : micros;
}

static int
leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
valid_date(long long y, long long m, long long d)
{
    static const int dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1) {
        return 0;
    }
    return d <= dim[m] + (m == 2 && leap((int)y));
}

/* What Python's date/datetime constructors accept (else the converter's marker). */
static int
valid_fields(const Fields *f)
{
    return valid_date(f->year, f->month, f->day) && f->hour <= 23 && f->minute <= 59 &&
           f->second <= 59 && f->micro <= 999999;
}

/* days from 1970-01-01 to a civil date (proleptic Gregorian) */
static long long
days_from_civil(long long y, int m, int d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}


static long long
fields_micros(const Fields *f)
{
    long long seconds = ((days_from_civil(f->year, f->month, f->day) * 24 + f->hour) * 60 +
                         f->minute) * 60 + f->second;
    return seconds * 1000000 + f->micro;
}

/* days since 1970-01-01 -> civil date (proleptic Gregorian) */
static void
civil(long long days, int *year, int *month, int *day)
{
    days += 719468;
    long long era = (days >= 0 ? days : days - 146096) / 146097;
    long long doe = days - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
    *month = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = (int)(yoe + era * 400 + (*month <= 2));
}

/* ------------------------------------------------------------------ Python objects */

static PyObject *
decode_decimal(const unsigned char *p, int width, int intg, int scale, PyObject *converter)
{
    char digits[80], text[84];
    int negative;
    if (!decimal_digits(p, width, intg, scale, digits, &negative)) {
        return convert(converter, p, width); /* raises the digit group error */
    }
    int n = 0, zero = 1;
    for (int k = 0; k < intg + scale; k++) {
        zero &= digits[k] == '0';
    }
    if (negative && !zero) {
        text[n++] = '-';
    }
    if (intg == 0) {
        text[n++] = '0';
    }
    memcpy(text + n, digits, (size_t)intg);
    n += intg;
    if (scale) {
        text[n++] = '.';
        memcpy(text + n, digits + intg, (size_t)scale);
        n += scale;
    }
    PyObject *s = PyUnicode_FromStringAndSize(text, n);
    if (s == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(Decimal, s);
    Py_DECREF(s);
    return value;
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
decode_date(const unsigned char *p, PyObject *converter)
{
    Fields f;
    date_fields(p, &f);
    PyObject *value = try_datetime(&f, NULL);
    return value != NULL ? value : convert(converter, p, 3);
}

static PyObject *
decode_datetime2(const unsigned char *p, int width, int frac_bytes, long long unit,
                 PyObject *converter)
{
    Fields f;
    PyObject *value = NULL;
    if (datetime2_fields(p, width, frac_bytes, unit, &f)) {
        value = try_datetime(&f, Py_None);
    }
    return value != NULL ? value : convert(converter, p, width);
}

static PyObject *
decode_timestamp2(const unsigned char *p, int width, int frac_bytes, long long unit,
                  PyObject *converter)
{
    long long micros = timestamp2_micros(p, width, frac_bytes, unit);
    if (micros == 0) {
        return convert(converter, p, width); /* the zero timestamp */
    }
    long long seconds = micros / 1000000, rest = seconds % 86400;
    Fields f = {0, 0, 0, (int)(rest / 3600), (int)(rest / 60 % 60), (int)(rest % 60),
                (int)(micros % 1000000)};
    civil(seconds / 86400, &f.year, &f.month, &f.day);
    PyObject *value = try_datetime(&f, PyDateTime_TimeZone_UTC);
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
        if (avail < w) {
            return NULL;
        }
        *pos += w;
        switch (in->op) {
        case OP_DECIMAL:
            return decode_decimal(p, w, (int)in->arg0, (int)in->arg1, in->obj);
        case OP_DATE:
            return decode_date(p, in->obj);
        case OP_DATETIME2:
            return decode_datetime2(p, w, (int)in->arg0, in->arg1, in->obj);
        case OP_TIMESTAMP2:
            return decode_timestamp2(p, w, (int)in->arg0, in->arg1, in->obj);
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
        return w >= 1 && w <= 40 && in->arg0 >= 0 && in->arg1 >= 0 && in->arg0 + in->arg1 <= 65 &&
               in->obj != Py_None;
    case OP_DATE:
        return w == 3 && in->obj != Py_None;
    case OP_DATETIME2:
    case OP_TIMESTAMP2:
    case OP_TIME2:
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

/* ------------------------------------------------------------------- Arrow columns */

enum {
    ARROW_INT = 1,       /* width 1/2/4/8 */
    ARROW_UINT = 2,      /* width 1/2/4/8 */
    ARROW_FLOAT32 = 3,
    ARROW_FLOAT64 = 4,
    ARROW_STRING = 5,    /* str -> UTF-8, int32 offsets */
    ARROW_BINARY = 6,    /* bytes, int32 offsets */
    ARROW_DATE32 = 7,    /* date -> days since 1970-01-01 */
    ARROW_TIMESTAMP = 8, /* naive datetime -> microseconds */
    ARROW_TIMESTAMP_UTC = 9, /* datetime in timezone.utc -> microseconds */
    ARROW_DURATION = 10, /* timedelta -> microseconds */
};

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Growable;

static int
grow(Growable *g, Py_ssize_t extra)
{
    if (g->len + extra <= g->cap) {
        return 0;
    }
    Py_ssize_t cap = g->cap ? g->cap : 1024;
    while (cap < g->len + extra) {
        cap *= 2;
    }
    /* the raw allocator: the block decoder grows buffers without holding the GIL */
    char *data = PyMem_RawRealloc(g->data, (size_t)cap);
    if (data == NULL) {
        if (PyGILState_Check()) {
            PyErr_NoMemory();
        }
        return -1;
    }
    g->data = data;
    g->cap = cap;
    return 0;
}

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
static PyObject *
arrow_columns(PyObject *module, PyObject *args)
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

/* A column's values decoded straight into buffers (no Python object per value), for the
 * Parquet writer: one byte per row saying whether it is set, the values (out_width bytes
 * each, or the bytes of variable-length values) and, for those, a 4-byte length per row.
 * lane_value gives up (-1) on a value the buffers cannot hold exactly: the block decoder then
 * takes that column as objects (see BlockSpec). */

enum {
    LANE_INT = 1,     /* in width 1/2/3/4/8, arg0 signed -> out width 1/2/4/8 */
    LANE_YEAR = 2,    /* one byte -> int16: 0 or 1900 + n */
    LANE_COPY = 3,    /* FLOAT/DOUBLE: the bytes as they are */
    LANE_DECIMAL = 4, /* arg0 integer digits, arg1 scale -> decimal128 (16 bytes) */
    LANE_DATE = 5,    /* -> int32 days */
    LANE_DATETIME2 = 6, /* arg0 fraction bytes, arg1 unit -> int64 microseconds */
    LANE_TIMESTAMP2 = 7,
    LANE_TIME2 = 8,
    LANE_UTF8 = 9,    /* in width: length prefix; strict UTF-8 */
    LANE_ASCII = 10,  /* in width: length prefix; ASCII only (MySQL latin1) */
    LANE_BYTES = 11,  /* in width: length prefix; arg0: pad to this many bytes with 0x00 */
    LANE_ENUM = 12,   /* in width 1/2; obj: tuple of label bytes */
};

typedef struct {
    int op, in_width, out_width;
    long long arg0, arg1;
    PyObject *obj;
} LaneInstr;

/* Strict UTF-8 as Python decodes it (no surrogates, no overlong forms, <= U+10FFFF). */
static int
valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) {
                lo = 0xA0;
            }
            else if (c == 0xED) {
                hi = 0x9F;
            }
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) {
                lo = 0x90;
            }
            else if (c == 0xF4) {
                hi = 0x8F;
            }
        }
        else {
            return 0;
        }
        if (n - i <= need) {
            return 0;
        }
        if (s[i + 1] < lo || s[i + 1] > hi) {
            return 0;
        }
        for (int k = 2; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += need + 1;
    }
    return 1;
}

typedef struct {
    Growable valid, data, lengths;
} LaneColumn;

/* (valid, data, lengths | None) of a lane column as bytes: the tuple a block's buffer
 * column is (built directly, once per column of every rows event). */
static PyObject *
lane_buffers(const LaneColumn *c, int with_lengths)
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

/* A NULL's slot: a zero length for variable-length kinds, else width zero bytes. */
static int
null_slot(LaneColumn *c, int varlen, Py_ssize_t width)
{
    Py_ssize_t size = varlen ? 4 : width;
    Growable *g = varlen ? &c->lengths : &c->data;
    if (grow(g, size) < 0) {
        return -1;
    }
    memset(g->data + g->len, 0, (size_t)size);
    g->len += size;
    return 0;
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

typedef struct {
    PyObject_HEAD
    Py_ssize_t npresent;
    Py_ssize_t null_bytes;
    Instr *instr;      /* one per present column: the value as an object */
    LaneInstr *lanes;  /* one per present column: op 0 when it has no buffer form */
    PyObject *objects; /* keeps every instruction's object alive */
} BlockSpec;

/* One image kind of a block being decoded (before or after images). */
typedef struct {
    BlockSpec *spec;
    char *as_objects; /* per present column */
    LaneColumn *cols;
    PyObject **lists;
} Side;

static void
side_clear(Side *s)
{
    for (Py_ssize_t k = 0; s->cols != NULL && k < s->spec->npresent; k++) {
        PyMem_RawFree(s->cols[k].valid.data);
        PyMem_RawFree(s->cols[k].data.data);
        PyMem_RawFree(s->cols[k].lengths.data);
        memset(&s->cols[k], 0, sizeof(LaneColumn));
        Py_CLEAR(s->lists[k]);
    }
}

static int
side_start(Side *s)
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

static int
side_alloc(Side *s, BlockSpec *spec, int objects)
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

static void
side_free(Side *s)
{
    if (s->spec == NULL) {
        return;
    }
    side_clear(s);
    PyMem_Free(s->as_objects);
    PyMem_Free(s->cols);
    PyMem_Free(s->lists);
}

static int
side_has_objects(const Side *s)
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
static int
side_image(Side *s, PyObject *bufobj, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end,
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
static PyObject *
side_result(Side *s)
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
            item = lane_buffers(&s->cols[k], spec->lanes[k].op >= LANE_UTF8);
        }
        if (item == NULL) {
            Py_DECREF(columns);
            return NULL;
        }
        PyTuple_SET_ITEM(columns, k, item);
    }
    return columns;
}

static PyTypeObject BlockSpecType;

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
    if (after != Py_None && !PyObject_TypeCheck(after, &BlockSpecType)) {
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
    if (side_alloc(&sides[0], (BlockSpec *)self, objects) < 0 ||
        (nsides == 2 && side_alloc(&sides[1], (BlockSpec *)after, objects) < 0)) {
        goto done;
    }
    for (;;) {
        Py_ssize_t rows = 0, pos = start, bad = -1;
        int outcome = 0, side = 0;
        for (int i = 0; i < nsides && outcome == 0; i++) {
            if (side_start(&sides[i]) < 0) {
                outcome = 2;
            }
        }
        /* buffers only: no Python object is touched, so other threads (the event loop, the
         * Parquet writer) run meanwhile */
        int free_threads = outcome == 0 && !side_has_objects(&sides[0]) &&
                           (nsides == 1 || !side_has_objects(&sides[1]));
        PyThreadState *saved = free_threads ? PyEval_SaveThread() : NULL;
        while (outcome == 0 && pos < end) {
            for (side = 0; side < nsides && outcome == 0; side++) {
                outcome = side_image(&sides[side], bufobj, buf, &pos, end, &bad);
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
            PyObject *first = side_result(&sides[0]);
            PyObject *second = nsides == 2 && first != NULL ? side_result(&sides[1]) : NULL;
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
            side_clear(&sides[i]);
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
        side_free(&sides[i]);
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

static PyTypeObject BlockSpecType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "replicator.binlog._rowcore.BlockSpec",
    .tp_basicsize = sizeof(BlockSpec),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Decodes the row images of one layout into a block (see the module doc).",
    .tp_new = BlockSpec_new,
    .tp_dealloc = (destructor)BlockSpec_dealloc,
    .tp_traverse = (traverseproc)BlockSpec_traverse,
    .tp_methods = BlockSpec_methods,
};

/* concat_columns(parts, out_width, varlen) -> (validity | None, data, offsets | None, nulls)
 * | None: the (set, values, lengths) parts of one column of consecutive events as one Arrow
 * column's buffers; None past Arrow's 2 GiB of variable-length data. */
static PyObject *
concat_columns(PyObject *module, PyObject *args)
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
    /* The parts' buffers, taken while the GIL is held (each part tuple kept alive), so the
       copy itself runs without it, beside the threads that decode and parse. */
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
    Py_BEGIN_ALLOW_THREADS
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
    Py_END_ALLOW_THREADS
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


/* ------------------------------------------------------------------ text result sets */

/* Snapshot reads (replicator.snapshot.fastread): the row packets of a text-protocol result
 * set, straight from the socket's bytes into row tuples of the values the binlog decoders
 * give. Each column has a kind; a value the kind's fast path does not take (a zero or
 * invalid date, text that is not strict UTF-8, anything unusual) goes to the column's Python
 * function, which returns the value or raises the exact error. */

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

#define MAX_PAYLOAD 0xFFFFFF

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
    if (n < 1 || n >= (Py_ssize_t)sizeof(buf)) {
        return NULL; /* the Python path */
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
        char buf[64];
        if (n > 0 && n < (Py_ssize_t)sizeof(buf)) {
            char *end = NULL;
            memcpy(buf, p, (size_t)n);
            buf[n] = 0;
            double d = PyOS_string_to_double(buf, &end, NULL);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
            }
            else if (end == buf + n) {
                value = PyFloat_FromDouble(d);
            }
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

/* One row from a row packet's payload; NULL with an exception, or with none when the
 * payload is not a row of ncols columns (a protocol error the caller names). */
static PyObject *
text_row(const unsigned char *p, Py_ssize_t n, Py_ssize_t ncols, const int *kinds,
         PyObject *fallbacks)
{
    PyObject *row = PyTuple_New(ncols);
    if (row == NULL) {
        return NULL;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < ncols; i++) {
        if (at >= n) {
            goto bad;
        }
        if (p[at] == 0xFB) {
            at++;
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(row, i, Py_None);
            continue;
        }
        unsigned long long len;
        Py_ssize_t used;
        if (read_lenenc(p + at, n - at, &len, &used) < 0 || len > (unsigned long long)(n - at - used)) {
            goto bad;
        }
        at += used;
        PyObject *value = text_value(kinds[i], PyTuple_GET_ITEM(fallbacks, i), p + at,
                                     (Py_ssize_t)len);
        if (value == NULL) {
            Py_DECREF(row);
            return NULL;
        }
        PyTuple_SET_ITEM(row, i, value);
        at += (Py_ssize_t)len;
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

/* text_rows(buf, offset, kinds, fallbacks, deprecate_eof) -> (rows, offset, state):
 * the rows of the whole packets in buf from offset. state: 0 more data is needed (offset is
 * the first incomplete packet), 1 the result set ended (offset after its EOF/OK packet),
 * 2 an ERR packet starts at offset, 3 a packet of the maximum payload (a row split over
 * packets) starts at offset. A packet that is not a row of these columns raises
 * ValueError. */
static PyObject *
text_rows(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset;
    PyObject *kinds_obj, *fallbacks;
    int deprecate_eof;
    if (!PyArg_ParseTuple(args, "y*nO!O!p", &view, &offset, &PyTuple_Type, &kinds_obj,
                          &PyTuple_Type, &fallbacks, &deprecate_eof)) {
        return NULL;
    }
    Py_ssize_t ncols;
    int *kinds = NULL;
    PyObject *rows = NULL;
    int state = 0;
    if (text_kinds(kinds_obj, fallbacks, &ncols, &kinds) < 0) {
        PyBuffer_Release(&view);
        return NULL;
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
        PyObject *row = text_row(p, len, ncols, kinds, fallbacks);
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
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nni)", rows, offset, state);
fail:
    Py_XDECREF(rows);
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return NULL;
}

/* text_row(payload, kinds, fallbacks) -> tuple: one row from a whole payload (a row the
 * server split over several packets, joined by the caller). */
static PyObject *
text_row_payload(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *kinds_obj, *fallbacks;
    if (!PyArg_ParseTuple(args, "y*O!O!", &view, &PyTuple_Type, &kinds_obj, &PyTuple_Type,
                          &fallbacks)) {
        return NULL;
    }
    Py_ssize_t ncols;
    int *kinds = NULL;
    if (text_kinds(kinds_obj, fallbacks, &ncols, &kinds) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *row = text_row(view.buf, view.len, ncols, kinds, fallbacks);
    if (row == NULL && !PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "a row of %zd bytes is not a row of %zd columns",
                     view.len, ncols);
    }
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return row;
}

/* text_block(buf, offset, specs, kinds, fallbacks, deprecate_eof, max_rows)
 *   -> (columns, count, offset, state, last):
 * the rows of the whole packets in buf from offset, column by column: a column whose spec op
 * is TB_OBJECTS becomes a list of values (text_value with its kind and fallback), every other
 * one buffers (set, values, lengths | None) of the block layout (block.py). count rows were
 * read; last is the offset of the last row's packet (-1: none). state as text_rows', and 4: the
 * row at offset has a value its column's buffers cannot hold (a zero date, text that is not
 * UTF-8 or not ASCII, a number out of range...): the rows before it are in the result, and
 * the caller reads the rest as objects. At most max_rows rows are read (state 0 then). */

enum {
    TB_OBJECTS = 0,
    TB_INT = 1,       /* arg0: bytes out (1, 2, 4, 8); arg1: 1 signed */
    TB_FLOAT = 2,     /* arg0: 4 or 8 */
    TB_DECIMAL = 3,   /* arg0: precision (<= 38); arg1: scale */
    TB_DATE = 4,      /* days since 1970-01-01 (int32) */
    TB_DATETIME = 5,  /* microseconds (int64) */
    TB_TIMESTAMP = 6, /* microseconds (int64), UTC as the session prints it */
    TB_UTF8 = 7,      /* strict UTF-8 */
    TB_ASCII = 8,     /* ASCII only (MySQL latin1 text) */
    TB_BYTES = 9      /* bytes as sent */
};

typedef struct {
    int op, arg0, arg1;
} TextSpec;

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
        char buf[64];
        if (n < 1 || n >= (Py_ssize_t)sizeof(buf)) {
            return 0;
        }
        char *end = NULL;
        memcpy(buf, p, (size_t)n);
        buf[n] = 0;
        double d = PyOS_string_to_double(buf, &end, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (end != buf + n) {
            return 0;
        }
        if (t->arg0 == 4) {
            float fl = (float)d;
            memcpy(out, &fl, 4);
        }
        else {
            memcpy(out, &d, 8);
        }
        width = t->arg0;
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
    case TB_UTF8:
    case TB_ASCII:
    case TB_BYTES: {
        if (t->op == TB_UTF8 && !valid_utf8(p, n)) {
            return 0;
        }
        if (t->op == TB_ASCII) {
            for (Py_ssize_t k = 0; k < n; k++) {
                if (p[k] >= 0x80) {
                    return 0;
                }
            }
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

static int
tb_null(const TextSpec *t, LaneColumn *c)
{
    Py_ssize_t width = t->op == TB_DECIMAL ? 16
                       : t->op == TB_DATE ? 4
                       : (t->op == TB_DATETIME || t->op == TB_TIMESTAMP) ? 8
                                                                           : t->arg0;
    return null_slot(c, t->op >= TB_UTF8, width);
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
    case TB_BYTES:
        return 1;
    default:
        return 0;
    }
}

/* One row into the columns; 1 done, 0 a value the buffers cannot hold (nothing of the row
 * kept), -1 an exception, -2 not a row of these columns. */
static int
tb_row(const unsigned char *p, Py_ssize_t n, Py_ssize_t ncols, const TextSpec *specs,
       const int *kinds, PyObject *fallbacks, LaneColumn *cols, PyObject **lists)
{
    Py_ssize_t at = 0, k;
    int result = 1;
    for (k = 0; k < ncols; k++) {
        LaneColumn *c = &cols[k];
        if (at >= n) {
            result = -2;
            break;
        }
        int null = p[at] == 0xFB;
        unsigned long long len = 0;
        if (null) {
            at++;
        }
        else {
            Py_ssize_t used;
            if (read_lenenc(p + at, n - at, &len, &used) < 0
                || len > (unsigned long long)(n - at - used)) {
                result = -2;
                break;
            }
            at += used;
        }
        if (specs[k].op == TB_OBJECTS) {
            PyObject *value;
            if (null) {
                value = Py_NewRef(Py_None);
            }
            else {
                value = text_value(kinds[k], PyTuple_GET_ITEM(fallbacks, k), p + at,
                                   (Py_ssize_t)len);
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
            int done = null ? (tb_null(&specs[k], c) == 0 ? 1 : -1)
                            : tb_value(&specs[k], p + at, (Py_ssize_t)len, c);
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
        at += (Py_ssize_t)len;
    }
    if (result == 1 && at != n) {
        result = -2;
    }
    return result;
}

static PyObject *
text_block(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset, max_rows;
    PyObject *specs_obj, *kinds_obj, *fallbacks;
    int deprecate_eof;
    if (!PyArg_ParseTuple(args, "y*nO!O!O!pn", &view, &offset, &PyTuple_Type, &specs_obj,
                          &PyTuple_Type, &kinds_obj, &PyTuple_Type, &fallbacks, &deprecate_eof,
                          &max_rows)) {
        return NULL;
    }
    Py_ssize_t ncols;
    int *kinds = NULL;
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
    Py_ssize_t size = view.len;
    while (offset + 4 <= size && count < max_rows) {
        Py_ssize_t len;
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
        int done = tb_row(p, len, ncols, specs, kinds, fallbacks, cols, lists);
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
            if (done == -2 && !PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError,
                             "a row packet of %zd bytes is not a row of %zd columns", len, ncols);
            }
            PyMem_Free(marks);
            goto done;
        }
        last = offset;
        count++;
        offset += 4 + len;
    }
    PyMem_Free(marks);
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
            item = lane_buffers(c, specs[k].op >= TB_UTF8);
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
    PyMem_Free(kinds);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------ whole events of the dump stream */

/* The next whole event packet at buf[pos:]: one packet (shorter than 0xFFFFFF) with sequence
 * id `seq`, the 0x00 marker and one event of exactly the packet's length less one, not a
 * FORMAT_DESCRIPTION (whose checksum rules the parser keeps), and, with `crc`
 * (binascii.crc32, or None when events carry no checksum), a stored CRC32 that matches.
 * 1 with *event, *size and *packet set; 0 for anything else or a packet not whole yet (the
 * framer and parser then take it the usual way and raise their errors for a bad one); -1 on
 * a Python error. */
static int
whole_event(const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos, int seq, PyObject *crc,
            const unsigned char **event, Py_ssize_t *size, Py_ssize_t *packet)
{
    if (len - pos < 4 + 1 + 19) {
        return 0;
    }
    const unsigned char *p = buf + pos;
    Py_ssize_t length = p[0] | (p[1] << 8) | ((Py_ssize_t)p[2] << 16);
    if (length >= MAX_PAYLOAD || p[3] != seq || p[4] != 0x00 || len - pos < 4 + length) {
        return 0;
    }
    const unsigned char *e = p + 5;
    Py_ssize_t n = (Py_ssize_t)e[9] | ((Py_ssize_t)e[10] << 8) | ((Py_ssize_t)e[11] << 16) |
                   ((Py_ssize_t)e[12] << 24);
    int checked = crc != Py_None;
    if (n != length - 1 || e[4] == 15 /* FORMAT_DESCRIPTION */ || n < 19 + (checked ? 4 : 0)) {
        return 0;
    }
    if (checked) {
        PyObject *mv = PyMemoryView_FromMemory((char *)e, n - 4, PyBUF_READ);
        if (mv == NULL) {
            return -1;
        }
        PyObject *got = PyObject_CallOneArg(crc, mv);
        Py_DECREF(mv);
        if (got == NULL) {
            return -1;
        }
        unsigned long computed = PyLong_AsUnsignedLong(got);
        Py_DECREF(got);
        if (computed == (unsigned long)-1 && PyErr_Occurred()) {
            return -1;
        }
        const unsigned char *stored = e + n - 4;
        unsigned long expected = (unsigned long)stored[0] | ((unsigned long)stored[1] << 8) |
                                 ((unsigned long)stored[2] << 16) |
                                 ((unsigned long)stored[3] << 24);
        if (computed != expected) {
            return 0; /* the parser raises the mismatch, naming the event */
        }
    }
    *event = e;
    *size = n;
    *packet = 4 + length;
    return 1;
}

/* step_events(buf, start, seq, position, types, crc) -> (offset, seq, position, stepped)
 *
 * A read of statements only (a DDL scan) passes over rows and TABLE_MAP events: this walks
 * whole events (see whole_event) from buf[start:] while their type is flagged in `types`
 * (256 bytes, one per type code). `position` moves as the parser moves it: to the event's
 * log_pos, or past it when log_pos is 0. */
static PyObject *
step_events(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *crc;
    Py_ssize_t start;
    int seq;
    unsigned long long position;
    Py_buffer view, types;
    if (!PyArg_ParseTuple(args, "OniKy*O", &bufobj, &start, &seq, &position, &types, &crc)) {
        return NULL;
    }
    if (types.len != 256) {
        PyBuffer_Release(&types);
        PyErr_SetString(PyExc_ValueError, "types must be 256 bytes");
        return NULL;
    }
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&types);
        return NULL;
    }
    const unsigned char *buf = view.buf, *flagged = types.buf;
    Py_ssize_t pos = start < 0 ? 0 : start, stepped = 0;
    PyObject *result = NULL;
    for (;;) {
        const unsigned char *event;
        Py_ssize_t size, packet;
        /* the type byte is in once the header is: look before checking the CRC */
        if (view.len - pos >= 4 + 1 + 19 && !flagged[buf[pos + 4 + 1 + 4]]) {
            break;
        }
        int found = whole_event(buf, view.len, pos, seq, crc, &event, &size, &packet);
        if (found < 0) {
            goto done;
        }
        if (found == 0) {
            break;
        }
        unsigned long long log_pos = (unsigned long long)event[13] |
                                     ((unsigned long long)event[14] << 8) |
                                     ((unsigned long long)event[15] << 16) |
                                     ((unsigned long long)event[16] << 24);
        position = log_pos ? log_pos : position + (unsigned long long)size;
        seq = (seq + 1) & 0xFF;
        pos += packet;
        stepped++;
    }
    result = Py_BuildValue("niKn", pos, seq, position, stepped);
done:
    PyBuffer_Release(&types);
    PyBuffer_Release(&view);
    return result;
}

/* split_events(buf, start, seq, crc, stop=None) -> (offset, seq, events)
 *
 * The whole events (see whole_event) from buf[start:], each as bytes, in order: the stream
 * reader's framing and CRC32 check for a chunk at once, instead of per event in Python.
 * `stop` (256 bytes, one per type code, as step_events takes them): end before the first
 * event of a flagged type (a read of statements only steps over those). */
static PyObject *
split_events(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *crc, *stopobj = Py_None;
    Py_ssize_t start;
    int seq;
    Py_buffer view, stop = {0};
    if (!PyArg_ParseTuple(args, "OniO|O", &bufobj, &start, &seq, &crc, &stopobj)) {
        return NULL;
    }
    if (stopobj != Py_None) {
        if (PyObject_GetBuffer(stopobj, &stop, PyBUF_SIMPLE) < 0) {
            return NULL;
        }
        if (stop.len != 256) {
            PyBuffer_Release(&stop);
            PyErr_SetString(PyExc_ValueError, "stop must be 256 bytes or None");
            return NULL;
        }
    }
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        if (stop.obj != NULL) {
            PyBuffer_Release(&stop);
        }
        return NULL;
    }
    const unsigned char *buf = view.buf, *flagged = stop.buf;
    Py_ssize_t pos = start < 0 ? 0 : start;
    PyObject *result = NULL, *events = PyList_New(0);
    if (events == NULL) {
        goto done;
    }
    for (;;) {
        const unsigned char *event;
        Py_ssize_t size, packet;
        /* the type byte is in once the header is: look before checking the CRC */
        if (flagged != NULL && view.len - pos >= 4 + 1 + 19 && flagged[buf[pos + 4 + 1 + 4]]) {
            break;
        }
        int found = whole_event(buf, view.len, pos, seq, crc, &event, &size, &packet);
        if (found < 0) {
            goto done;
        }
        if (found == 0) {
            break;
        }
        PyObject *raw = PyBytes_FromStringAndSize((const char *)event, size);
        if (raw == NULL || PyList_Append(events, raw) < 0) {
            Py_XDECREF(raw);
            goto done;
        }
        Py_DECREF(raw);
        seq = (seq + 1) & 0xFF;
        pos += packet;
    }
    result = Py_BuildValue("niO", pos, seq, events);
done:
    Py_XDECREF(events);
    PyBuffer_Release(&view);
    if (stop.obj != NULL) {
        PyBuffer_Release(&stop);
    }
    return result;
}

static PyMethodDef rowcore_methods[] = {
    {"concat_columns", concat_columns, METH_VARARGS,
     "concat_columns(parts, width, varlen): one column of consecutive blocks' buffers as "
     "Arrow buffers."},
    {"text_rows", text_rows, METH_VARARGS,
     "text_rows(buf, offset, kinds, fallbacks, deprecate_eof): rows of a text result set."},
    {"text_block", text_block, METH_VARARGS,
     "text_block(buf, offset, specs, kinds, fallbacks, deprecate_eof, max_rows): rows of a "
     "text result set as block columns."},
    {"text_row", text_row_payload, METH_VARARGS,
     "text_row(payload, kinds, fallbacks): one row from a whole row payload."},
    {"split_events", split_events, METH_VARARGS,
     "split_events(buf, start, seq, crc, stop=None): the whole, checked events of a dump "
     "stream's buffered packets, as bytes, up to the first of a type flagged in stop."},
    {"step_events", step_events, METH_VARARGS,
     "step_events(buf, start, seq, position, types, crc): pass over whole event packets of "
     "the flagged types (a read of statements only)."},
    {"arrow_columns", arrow_columns, METH_VARARGS,
     "arrow_columns(rows, width, specs): the Arrow buffers of columns of row tuples, each "
     "or None to leave it to pyarrow."},
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------------------------- module */

static struct PyModuleDef rowcore_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "replicator.binlog._rowcore",
    .m_doc = "Native row decoders (the optional compiled core of replicator.binlog.rows).",
    .m_size = -1,
    .m_methods = rowcore_methods,
};

#define OP_CONSTANT(m, name)                                                                   \
    if (PyModule_AddIntConstant(m, #name, name) < 0) {                                         \
        goto fail;                                                                             \
    }

PyMODINIT_FUNC
PyInit__rowcore(void)
{
    PyObject *m = NULL, *decimal = NULL;
    const unsigned short probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "the native core supports little-endian hosts only");
        return NULL;
    }
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return NULL;
    }
    decimal = PyImport_ImportModule("decimal");
    if (decimal == NULL) {
        return NULL;
    }
    Decimal = PyObject_GetAttrString(decimal, "Decimal");
    Py_DECREF(decimal);
    if (Decimal == NULL) {
        return NULL;
    }
    if (PyType_Ready(&BlockSpecType) < 0) {
        return NULL;
    }
    m = PyModule_Create(&rowcore_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&BlockSpecType);
    if (PyModule_AddObject(m, "BlockSpec", (PyObject *)&BlockSpecType) < 0) {
        Py_DECREF(&BlockSpecType);
        goto fail;
    }
    OP_CONSTANT(m, OP_INT);
    OP_CONSTANT(m, OP_FLOAT);
    OP_CONSTANT(m, OP_DOUBLE);
    OP_CONSTANT(m, OP_YEAR);
    OP_CONSTANT(m, OP_DECIMAL);
    OP_CONSTANT(m, OP_DATE);
    OP_CONSTANT(m, OP_DATETIME2);
    OP_CONSTANT(m, OP_TIMESTAMP2);
    OP_CONSTANT(m, OP_TIME2);
    OP_CONSTANT(m, OP_UTF8);
    OP_CONSTANT(m, OP_LATIN1);
    OP_CONSTANT(m, OP_TEXT);
    OP_CONSTANT(m, OP_BYTES);
    OP_CONSTANT(m, OP_ENUM);
    OP_CONSTANT(m, OP_CALL);
    OP_CONSTANT(m, ARROW_INT);
    OP_CONSTANT(m, ARROW_UINT);
    OP_CONSTANT(m, ARROW_FLOAT32);
    OP_CONSTANT(m, ARROW_FLOAT64);
    OP_CONSTANT(m, ARROW_STRING);
    OP_CONSTANT(m, ARROW_BINARY);
    OP_CONSTANT(m, ARROW_DATE32);
    OP_CONSTANT(m, ARROW_TIMESTAMP);
    OP_CONSTANT(m, ARROW_TIMESTAMP_UTC);
    OP_CONSTANT(m, ARROW_DURATION);
    OP_CONSTANT(m, LANE_INT);
    OP_CONSTANT(m, LANE_YEAR);
    OP_CONSTANT(m, LANE_COPY);
    OP_CONSTANT(m, LANE_DECIMAL);
    OP_CONSTANT(m, LANE_DATE);
    OP_CONSTANT(m, LANE_DATETIME2);
    OP_CONSTANT(m, LANE_TIMESTAMP2);
    OP_CONSTANT(m, LANE_TIME2);
    OP_CONSTANT(m, LANE_UTF8);
    OP_CONSTANT(m, LANE_ASCII);
    OP_CONSTANT(m, LANE_BYTES);
    OP_CONSTANT(m, LANE_ENUM);
    OP_CONSTANT(m, TB_OBJECTS);
    OP_CONSTANT(m, TB_INT);
    OP_CONSTANT(m, TB_FLOAT);
    OP_CONSTANT(m, TB_DECIMAL);
    OP_CONSTANT(m, TB_DATE);
    OP_CONSTANT(m, TB_DATETIME);
    OP_CONSTANT(m, TB_TIMESTAMP);
    OP_CONSTANT(m, TB_UTF8);
    OP_CONSTANT(m, TB_ASCII);
    OP_CONSTANT(m, TB_BYTES);
    return m;
fail:
    Py_XDECREF(m);
    return NULL;
}
