/*
 * The stored formats of the fixed-width values (DECIMAL, DATE, DATETIME2, TIMESTAMP2, TIME2),
 * the proleptic Gregorian calendar, and strict UTF-8: one reading of each, shared by the rows
 * decoders (rows.c), the text result sets (text.c) and the Arrow columns (buffers.c). Static
 * inline, so that the per-value paths of each file keep them inlined.
 */
#ifndef ROWCORE_FORMATS_H
#define ROWCORE_FORMATS_H

#include "rowcore.h"

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const unsigned int POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                       100000000, 1000000000};

/* ---------------------------------------------------------------- the stored formats
 * One reading of each fixed-width format, shared by the values as objects (decode_value) and
 * the column buffers (lane_value). */

/* value's last count decimal digits into out (leading zeros kept); returns the end */
static inline char *
put_digits(char *out, unsigned long long value, int count)
{
    for (int k = count - 1; k >= 0; k--) {
        out[k] = (char)('0' + value % 10);
        value /= 10;
    }
    return out + count;
}

/* The digits of a DECIMAL(intg + scale, scale) stored in w bytes: intg + scale characters
 * '0'-'9' into digits (leading zeros kept), the sign into *negative. 0 for a digit group out
 * of range. Groups of 9 digits take 4 bytes; the integer part's partial group comes first,
 * the fraction's last; a negative value is stored inverted (strings/decimal.cc). */
static inline int
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
            put_digits(digits + n, group, count);
            n += count;
        }
    }
    return 1;
}

typedef struct {
    int year, month, day, hour, minute, second, micro;
} Fields;

static inline void
date_fields(const unsigned char *p, Fields *f)
{
    unsigned long packed = (unsigned long)le_uint(p, 3);
    *f = (Fields){(int)(packed >> 9), (int)((packed >> 5) & 15), (int)(packed & 31), 0, 0, 0, 0};
}

/* DATETIME2: 5 bytes big-endian "1 sign | 17 year*13+month | 5 day | 5 hour | 6 minute |
 * 6 second", then the fraction. 0 when the sign bit says negative (never valid). */
static inline int
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
static inline long long
timestamp2_micros(const unsigned char *p, int w, int frac_bytes, long long unit)
{
    unsigned long long whole = be_uint(p, w);
    int frac_bits = 8 * frac_bytes;
    long long seconds = (long long)(whole >> frac_bits);
    return seconds * 1000000 + (long long)(whole & ((1ULL << frac_bits) - 1)) * unit;
}

/* TIME2: big-endian "1 sign | 1 unused | 10 hour | 6 minute | 6 second" + fraction, offset
 * binary: signed microseconds. */
static inline long long
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

static inline int
leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static inline int
valid_date(long long y, long long m, long long d)
{
    static const int dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || y > 9999 || m < 1 || m > 12 || d < 1) {
        return 0;
    }
    return d <= dim[m] + (m == 2 && leap((int)y));
}

/* What Python's date/datetime constructors accept (else the converter's marker). */
static inline int
valid_fields(const Fields *f)
{
    return valid_date(f->year, f->month, f->day) && f->hour <= 23 && f->minute <= 59 &&
           f->second <= 59 && f->micro <= 999999;
}

/* days from 1970-01-01 to a civil date (proleptic Gregorian) */
static inline long long
days_from_civil(long long y, int m, int d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}


static inline long long
fields_micros(const Fields *f)
{
    long long seconds = ((days_from_civil(f->year, f->month, f->day) * 24 + f->hour) * 60 +
                         f->minute) * 60 + f->second;
    return seconds * 1000000 + f->micro;
}

/* days since 1970-01-01 -> civil date (proleptic Gregorian) */
static inline void
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

/* How many bytes from the start of s are ASCII, eight at a time while they are. */
static inline Py_ssize_t
ascii_prefix(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        if (word & 0x8080808080808080ULL) {
            break;
        }
    }
    while (i < n && s[i] < 0x80) {
        i++;
    }
    return i;
}

/* Strict UTF-8 as Python decodes it (no surrogates, no overlong forms, <= U+10FFFF). */
static inline int
valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = ascii_prefix(s, n);
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

#endif /* ROWCORE_FORMATS_H */
