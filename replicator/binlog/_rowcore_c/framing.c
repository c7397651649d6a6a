/*
 * Whole events of the dump stream (replicator/binlog/framing.py, stream.py): the packets of
 * COM_BINLOG_DUMP split into events, with the sequence ids, the 0x00 marker, the lengths and
 * the events' CRC32 checked, a buffer at a time instead of per event in Python (split_events),
 * or passed over (step_events, and whole transactions of rows: skip_transactions) by a read
 * of statements only; and the events of a binlog file's bytes (split_file_events).
 */
#include "rowcore.h"

/* Whether the CRC32 stored in the last 4 bytes of the `n`-byte event at `e` is the one `crc`
 * (binascii.crc32) computes over the rest: 1 or 0; -1 on a Python error. */
static int
crc_matches(PyObject *crc, const unsigned char *e, Py_ssize_t n)
{
    PyObject *mv = PyMemoryView_FromMemory((char *)e, n - 4, PyBUF_READ);
    if (mv == NULL) {
        return -1;
    }
    PyObject *got = PyObject_CallOneArg(crc, mv);
    Py_DECREF(mv);
    if (got == NULL) {
        return -1;
    }
    unsigned long long computed = PyLong_AsUnsignedLongLong(got);
    Py_DECREF(got);
    if (computed == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    return computed == le_uint(e + n - 4, 4);
}

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
    Py_ssize_t n = (Py_ssize_t)le_uint(e + 9, 4);
    int checked = crc != Py_None;
    if (n != length - 1 || e[4] == 15 /* FORMAT_DESCRIPTION */ || n < 19 + (checked ? 4 : 0)) {
        return 0;
    }
    if (checked) {
        int matches = crc_matches(crc, e, n);
        if (matches <= 0) {
            return matches; /* 0: the parser raises the mismatch, naming the event */
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
PyObject *
rc_step_events(PyObject *Py_UNUSED(module), PyObject *args)
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
        unsigned long long log_pos = le_uint(event + 13, 4);
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
PyObject *
rc_split_events(PyObject *Py_UNUSED(module), PyObject *args)
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

/* MariaDB's GTID event flags (log_event.h, Gtid_log_event) */
#define GTID_STANDALONE 0x01
#define GTID_GROUP_COMMIT_ID 0x02
#define GTID_XA 0xC0 /* PREPARED_XA | COMPLETED_XA */
#define EVENT_ARTIFICIAL 0x20
#define QUERY_EVENT 2
#define XID_EVENT 16
#define MYSQL_GTID_EVENT 33
#define MYSQL_ANONYMOUS_GTID_EVENT 34
#define MARIADB_GTID_EVENT 162
#define GNO_MAX 0x7FFFFFFFFFFFFFFEULL
#define MAX_DOMAINS 32
#define MAX_WATCHED 64
#define MAX_RUNS 64

typedef struct {
    unsigned long domain, server_id;
    unsigned long long seq_no;
} domain_gtid;

typedef struct {
    unsigned char sid[16];
    unsigned long long first, last;
} gno_run;

/* A MySQL GTID or ANONYMOUS_GTID body of `len` bytes that the parser reads without an error
 * (mysql_bodies.decode_gtid, and MysqlGtid's range for a GTID's number): 1, else 0. */
static int
mysql_gtid_ok(const unsigned char *b, Py_ssize_t len, int type)
{
    if (len < 25) {
        return 0;
    }
    unsigned long long gno = le_uint(b + 17, 8);
    if (gno >> 63 || (type == MYSQL_GTID_EVENT && (gno < 1 || gno > GNO_MAX))) {
        return 0;
    }
    Py_ssize_t pos = 25;
    if (pos >= len || b[pos] != 2 /* logical timestamps */) {
        return 1;
    }
    if (pos + 17 > len) {
        return 0;
    }
    pos += 17;
    if (pos + 7 > len) {
        return 1;
    }
    int original_ts = (b[pos + 6] & 0x80) != 0; /* bit 55 of the immediate commit time */
    pos += 7;
    if (original_ts) {
        if (pos + 7 > len) {
            return 0;
        }
        pos += 7;
    }
    if (pos < len) { /* the transaction length, length-encoded */
        unsigned char first = b[pos];
        Py_ssize_t width = first < 0xFB   ? 0
                           : first == 0xFC ? 2
                           : first == 0xFD ? 3
                           : first == 0xFE ? 8
                                           : -1; /* 0xFB and 0xFF are no length */
        if (width < 0 || pos + 1 + width > len) {
            return 0;
        }
        pos += 1 + width;
    }
    if (pos + 4 <= len && (b[pos + 3] & 0x80) && pos + 8 > len) {
        return 0; /* the original server version is announced but missing */
    }
    return 1;
}

/* A QUERY event whose statement is exactly the bytes BEGIN, found where the parser finds it
 * (after the post-header of `post` bytes, the status variables and the schema name); `size`
 * counts the CRC32. Its status variables in *status and *status_len. */
static int
is_begin(const unsigned char *event, Py_ssize_t size, Py_ssize_t post,
         const unsigned char **status, Py_ssize_t *status_len)
{
    const unsigned char *b = event + 19;
    Py_ssize_t len = size - 19 - 4;
    if (post < 13 || len < post) {
        return 0;
    }
    *status = b + post;
    *status_len = (Py_ssize_t)(b[11] | (b[12] << 8));
    Py_ssize_t at = post + *status_len + b[8] + 1;
    return len - at == 5 && memcmp(b + at, "BEGIN", 5) == 0;
}

/* skip_transactions(buf, start, seq, position, limit, inside, watch, budget, query_post,
 *                   spells_begin, crc)
 *     -> (offset, seq, position, events, transactions, mariadb, mysql)
 *
 * A read of statements only (a DDL scan) has nothing to deliver from a transaction of rows:
 * between transactions, this passes over whole ones of the forms
 *
 *     MariaDB: GTID (not standalone, not XA), events flagged in `inside`, XID
 *     MySQL:   GTID or ANONYMOUS_GTID, QUERY "BEGIN", events flagged in `inside`, XID
 *
 * (`inside`: 256 bytes, one per type code: ANNOTATE_ROWS, ROWS_QUERY, TABLE_MAP, rows), each
 * event whole and checked (see whole_event; `crc` is required), moving `position` as the
 * parser moves it. `query_post` is the QUERY post-header length of the FORMAT_DESCRIPTION;
 * `spells_begin(status)` tells whether a QUERY event with these status variables reads the
 * bytes BEGIN as the statement BEGIN (its client character set decodes ASCII as ASCII), asked
 * once for each different block of status variables in a call. More watched domains than
 * this can hold: nothing is passed over.
 *
 * It stops before the first transaction that is not of those forms, not whole in the buffer
 * yet, or that the stream's end check needs to see: one that ends at or past `limit` (a
 * position in this file; 0 for none), one whose MariaDB GTID is in a domain of `watch` (pairs
 * of domain and seq_no) at or past that seq_no, or a MySQL GTID beyond the first `budget`
 * (-1: no limit). `mariadb`: the last GTID passed over in each domain, as (domain,
 * server_id, seq_no), in the order of those last ones; `mysql`: the MySQL GTIDs passed over,
 * as runs (uuid bytes, first gno, last gno). */
PyObject *
rc_skip_transactions(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *watchobj, *spells_begin, *crc;
    Py_ssize_t start, budget, query_post;
    int seq;
    unsigned long long position, limit;
    Py_buffer view, types;
    if (!PyArg_ParseTuple(args, "OniKKy*OnnOO", &bufobj, &start, &seq, &position, &limit,
                          &types, &watchobj, &budget, &query_post, &spells_begin, &crc)) {
        return NULL;
    }
    domain_gtid watched[MAX_WATCHED];
    Py_ssize_t n_watched = 0;
    PyObject *watch = NULL, *result = NULL, *mariadb = NULL, *mysql = NULL;
    if (types.len != 256) {
        PyErr_SetString(PyExc_ValueError, "inside must be 256 bytes");
        goto fail_types;
    }
    if (crc == Py_None) {
        PyErr_SetString(PyExc_ValueError, "skip_transactions checks every event: crc needed");
        goto fail_types;
    }
    watch = PySequence_Fast(watchobj, "watch must be a sequence of (domain, seq_no)");
    if (watch == NULL) {
        goto fail_types;
    }
    n_watched = PySequence_Fast_GET_SIZE(watch);
    if (n_watched > MAX_WATCHED) {
        limit = 1; /* more than `watched` holds: pass nothing over (no end lies before 1) */
        n_watched = 0;
    }
    for (Py_ssize_t i = 0; i < n_watched; i++) {
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(watch, i), "kK", &watched[i].domain,
                              &watched[i].seq_no)) {
            goto fail_watch;
        }
    }
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        goto fail_watch;
    }
    const unsigned char *buf = view.buf, *allowed = types.buf;
    const unsigned char *spelled = NULL; /* the status variables last found to spell BEGIN */
    Py_ssize_t spelled_len = 0;
    Py_ssize_t pos = start < 0 ? 0 : start, events = 0, transactions = 0, gtids = 0;
    domain_gtid last[MAX_DOMAINS];
    gno_run runs[MAX_RUNS];
    int n_last = 0, n_runs = 0;
    for (;;) {
        /* one transaction, from its GTID: taken whole or not at all */
        Py_ssize_t at = pos, count = 0;
        int at_seq = seq;
        unsigned long long moved = position;
        const unsigned char *event;
        Py_ssize_t size, packet;
        int found = whole_event(buf, view.len, at, at_seq, crc, &event, &size, &packet);
        if (found < 0) {
            goto done;
        }
        if (found == 0 || (event[17] & EVENT_ARTIFICIAL)) {
            break;
        }
        int type = event[4], begun = 0;
        const unsigned char *b = event + 19;
        Py_ssize_t body = size - 19 - 4;
        domain_gtid gtid = {0, 0, 0};
        if (type == MARIADB_GTID_EVENT) {
            if (body < 13) {
                break;
            }
            unsigned char flags = b[12];
            if ((flags & (GTID_STANDALONE | GTID_XA)) ||
                ((flags & GTID_GROUP_COMMIT_ID) && body < 21)) {
                break;
            }
            gtid = (domain_gtid){(unsigned long)le_uint(b + 8, 4),
                                  (unsigned long)le_uint(event + 5, 4), le_uint(b, 8)};
            int stop = 0;
            for (Py_ssize_t i = 0; i < n_watched; i++) {
                if (watched[i].domain == gtid.domain && gtid.seq_no >= watched[i].seq_no) {
                    stop = 1;
                }
            }
            if (stop) {
                break;
            }
            begun = 1; /* a MariaDB GTID opens the group itself */
        } else if (type == MYSQL_GTID_EVENT || type == MYSQL_ANONYMOUS_GTID_EVENT) {
            if (!mysql_gtid_ok(b, body, type) ||
                (type == MYSQL_GTID_EVENT && budget >= 0 && gtids >= budget)) {
                break;
            }
        } else {
            break;
        }
        int complete = 0;
        for (;;) {
            unsigned long long log_pos = le_uint(event + 13, 4);
            moved = log_pos ? log_pos : moved + (unsigned long long)size;
            at_seq = (at_seq + 1) & 0xFF;
            at += packet;
            count++;
            if (count > 1 && event[4] == XID_EVENT) {
                complete = begun && size == 19 + 8 + 4; /* the parser takes an 8-byte xid */
                break;
            }
            found = whole_event(buf, view.len, at, at_seq, crc, &event, &size, &packet);
            if (found < 0) {
                goto done;
            }
            if (found == 0 || (event[17] & EVENT_ARTIFICIAL)) {
                break;
            }
            if (!begun) { /* MySQL: the event after the GTID must be BEGIN */
                const unsigned char *status;
                Py_ssize_t status_len;
                if (event[4] != QUERY_EVENT ||
                    !is_begin(event, size, query_post, &status, &status_len)) {
                    break;
                }
                if (spelled == NULL || status_len != spelled_len ||
                    memcmp(status, spelled, (size_t)status_len) != 0) {
                    PyObject *block = PyBytes_FromStringAndSize((const char *)status, status_len);
                    PyObject *got = block ? PyObject_CallOneArg(spells_begin, block) : NULL;
                    Py_XDECREF(block);
                    int truth = got ? PyObject_IsTrue(got) : -1;
                    Py_XDECREF(got);
                    if (truth < 0) {
                        goto done;
                    }
                    if (!truth) {
                        break;
                    }
                    spelled = status;
                    spelled_len = status_len;
                }
                begun = 1;
                continue;
            }
            if (event[4] != XID_EVENT && !allowed[event[4]]) {
                break;
            }
        }
        if (!complete || (limit && moved >= limit)) {
            break;
        }
        if (type == MARIADB_GTID_EVENT) { /* the domain's last GTID, moved to the end */
            int i = 0;
            while (i < n_last && last[i].domain != gtid.domain) {
                i++;
            }
            if (i == n_last) {
                if (n_last == MAX_DOMAINS) {
                    break;
                }
                n_last++;
            }
            memmove(&last[i], &last[i + 1], (size_t)(n_last - 1 - i) * sizeof(domain_gtid));
            last[n_last - 1] = gtid;
        } else if (type == MYSQL_GTID_EVENT) { /* the run it extends, or a new one */
            const unsigned char *sid = b + 1;
            unsigned long long gno = le_uint(b + 17, 8);
            gno_run *run = n_runs ? &runs[n_runs - 1] : NULL;
            if (run != NULL && memcmp(run->sid, sid, 16) == 0 && gno == run->last + 1) {
                run->last = gno;
            } else {
                if (n_runs == MAX_RUNS) {
                    break;
                }
                run = &runs[n_runs++];
                memcpy(run->sid, sid, 16);
                run->first = run->last = gno;
            }
            gtids++;
        }
        pos = at;
        seq = at_seq;
        position = moved;
        events += count;
        transactions++;
    }
    mariadb = PyList_New(n_last);
    mysql = PyList_New(n_runs);
    if (mariadb == NULL || mysql == NULL) {
        goto done;
    }
    for (int i = 0; i < n_last; i++) {
        PyObject *item = Py_BuildValue("(kkK)", last[i].domain, last[i].server_id, last[i].seq_no);
        if (item == NULL) {
            goto done;
        }
        PyList_SET_ITEM(mariadb, i, item);
    }
    for (int i = 0; i < n_runs; i++) {
        PyObject *item = Py_BuildValue("(y#KK)", (const char *)runs[i].sid, (Py_ssize_t)16,
                                       runs[i].first, runs[i].last);
        if (item == NULL) {
            goto done;
        }
        PyList_SET_ITEM(mysql, i, item);
    }
    result = Py_BuildValue("niKnnOO", pos, seq, position, events, transactions, mariadb, mysql);
done:
    Py_XDECREF(mariadb);
    Py_XDECREF(mysql);
    PyBuffer_Release(&view);
fail_watch:
    Py_DECREF(watch);
fail_types:
    PyBuffer_Release(&types);
    return result;
}

/* split_file_events(buf, start, crc) -> (offset, events)
 *
 * The whole events of a binlog file's bytes from buf[start:] (events back to back, each of the
 * size its header gives), each as bytes, in order, with their stored CRC32 checked when `crc`
 * (binascii.crc32) is given: the file reader's framing and check for a chunk at once. It stops
 * before anything the Python framer and parser take the usual way (and raise their errors
 * for): an event not whole yet, one shorter than its header and checksum, a
 * FORMAT_DESCRIPTION (whose checksum rules the parser keeps), a checksum that does not match. */
PyObject *
rc_split_file_events(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *crc;
    Py_ssize_t start;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OnO", &bufobj, &start, &crc)) {
        return NULL;
    }
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t pos = start < 0 ? 0 : start;
    int checked = crc != Py_None;
    PyObject *result = NULL, *events = PyList_New(0);
    if (events == NULL) {
        goto done;
    }
    while (view.len - pos >= 19) {
        const unsigned char *e = buf + pos;
        Py_ssize_t n = (Py_ssize_t)le_uint(e + 9, 4);
        if (n < 19 + (checked ? 4 : 0) || view.len - pos < n || e[4] == 15 /* FD */) {
            break;
        }
        int matches = checked ? crc_matches(crc, e, n) : 1;
        if (matches < 0) {
            goto done;
        }
        if (matches == 0) {
            break; /* the parser raises the mismatch, naming the event */
        }
        PyObject *raw = PyBytes_FromStringAndSize((const char *)e, n);
        if (raw == NULL || PyList_Append(events, raw) < 0) {
            Py_XDECREF(raw);
            goto done;
        }
        Py_DECREF(raw);
        pos += n;
    }
    result = Py_BuildValue("nO", pos, events);
done:
    Py_XDECREF(events);
    PyBuffer_Release(&view);
    return result;
}
