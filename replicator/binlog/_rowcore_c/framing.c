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
int
rc_whole_event(const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos, int seq, PyObject *crc,
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
 * (256 bytes, one per type code). `position` moves as the parser moves it (`event_end`). */
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
        int found = rc_whole_event(buf, view.len, pos, seq, crc, &event, &size, &packet);
        if (found < 0) {
            goto done;
        }
        if (found == 0) {
            break;
        }
        unsigned long long log_pos = le_uint(event + 13, 4);
        position = event_end(position, size, log_pos);
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

/* split_events(buf, start, seq, crc, stop=None, keep_first=0) -> (offset, seq, events)
 *
 * The whole events (see whole_event) from buf[start:], each as bytes, in order: the stream
 * reader's framing and CRC32 check for a chunk at once, instead of per event in Python.
 * `stop` (256 bytes, one per type code, as step_events takes them): end before the first
 * event of a flagged type (a read of statements only steps over those), the first event
 * itself excepted with `keep_first` (a reader taking runs splits one transaction at a time,
 * up to the next GTID). */
PyObject *
rc_split_events(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *crc, *stopobj = Py_None;
    Py_ssize_t start;
    int seq, keep_first = 0;
    Py_buffer view, stop = {0};
    if (!PyArg_ParseTuple(args, "OniO|Op", &bufobj, &start, &seq, &crc, &stopobj, &keep_first)) {
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
    const Py_ssize_t first = pos;
    PyObject *result = NULL, *events = PyList_New(0);
    if (events == NULL) {
        goto done;
    }
    for (;;) {
        const unsigned char *event;
        Py_ssize_t size, packet;
        /* the type byte is in once the header is: look before checking the CRC */
        if (flagged != NULL && view.len - pos >= 4 + 1 + 19 && flagged[buf[pos + 4 + 1 + 4]] &&
            !(keep_first && pos == first)) {
            break;
        }
        int found = rc_whole_event(buf, view.len, pos, seq, crc, &event, &size, &packet);
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

/* A MySQL GTID or ANONYMOUS_GTID body of `len` bytes that the parser reads without an error
 * (mysql_bodies.decode_gtid, and MysqlGtid's range for a GTID's number): 1, else 0. */
int
rc_mysql_gtid_ok(const unsigned char *b, Py_ssize_t len, int type)
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
int
rc_is_begin(const unsigned char *event, Py_ssize_t size, Py_ssize_t post,
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

/* ------------------------------------------------------------ whole transactions */

/* A walk over whole transactions (skip_transactions here, take_transactions in runs.c): the
 * buffer, the end's bounds (`watch`: pairs of domain and seq_no; more than this holds sets
 * `limit` to 1, so that nothing is taken), the QUERY post-header length and spells_begin
 * (see skip_transactions). 0, or -1 with an exception set. */
int
rc_walk_init(Walk *w, const Py_buffer *view, PyObject *watch, Py_ssize_t budget,
             unsigned long long limit, Py_ssize_t query_post, PyObject *spells_begin,
             PyObject *crc)
{
    memset(w, 0, sizeof(*w));
    w->buf = view->buf;
    w->len = view->len;
    w->crc = crc;
    w->spells_begin = spells_begin;
    w->query_post = query_post;
    w->limit = limit;
    w->budget = budget;
    if (crc == Py_None) {
        PyErr_SetString(PyExc_ValueError, "whole transactions are taken checked: crc needed");
        return -1;
    }
    PyObject *pairs = PySequence_Fast(watch, "watch must be a sequence of (domain, seq_no)");
    if (pairs == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pairs);
    if (n > MAX_WATCHED) {
        w->limit = 1; /* more than `watched` holds: take nothing (no end lies before 1) */
        n = 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(pairs, i), "kK", &w->watched[i].domain,
                              &w->watched[i].seq_no)) {
            Py_DECREF(pairs);
            return -1;
        }
    }
    w->n_watched = n;
    Py_DECREF(pairs);
    return 0;
}

/* Whether a QUERY event with these status variables reads the bytes BEGIN as the statement
 * BEGIN: spells_begin asked once per different block of status variables in a walk. */
static int
spells_begin(Walk *w, const unsigned char *status, Py_ssize_t status_len)
{
    if (w->spelled != NULL && status_len == w->spelled_len &&
        memcmp(status, w->spelled, (size_t)status_len) == 0) {
        return 1;
    }
    PyObject *block = PyBytes_FromStringAndSize((const char *)status, status_len);
    PyObject *got = block ? PyObject_CallOneArg(w->spells_begin, block) : NULL;
    Py_XDECREF(block);
    int truth = got ? PyObject_IsTrue(got) : -1;
    Py_XDECREF(got);
    if (truth == 1) {
        w->spelled = status;
        w->spelled_len = status_len;
    }
    return truth;
}

/* The transaction at `at`, whole in the buffer and every event checked (see rc_whole_event),
 * of the forms
 *
 *     MariaDB: GTID (not standalone, not XA), events `inside` accepts, XID
 *     MySQL:   GTID or ANONYMOUS_GTID, QUERY "BEGIN", events `inside` accepts, XID
 *
 * and within the walk's bounds: not ending at or past `limit`, no MariaDB GTID in a watched
 * domain at or past its seq_no, no MySQL GTID past the `budget` (counting those taken).
 * 1 with *out set; 0 when the transaction is not all of that (or not whole yet); -1 on a
 * Python error. */
int
rc_walk_transaction(Walk *w, Cursor at, InsideCheck inside, void *ctx, Walked *out)
{
    const unsigned char *event;
    Py_ssize_t size, packet;
    memset(out, 0, sizeof(*out));
    out->start = at;
    int found = rc_whole_event(w->buf, w->len, at.offset, at.seq, w->crc, &event, &size, &packet);
    if (found <= 0) {
        return found;
    }
    if (event[17] & EVENT_ARTIFICIAL) {
        return 0;
    }
    int type = event[4], begun = 0;
    const unsigned char *b = event + 19;
    Py_ssize_t body = size - 19 - 4;
    if (type == MARIADB_GTID_EVENT) {
        if (body < 13) {
            return 0;
        }
        unsigned char flags = b[12];
        /* a group the server flags as DDL (CREATE ... SELECT, say) is left to the parser
         * whatever events it holds: its QUERY would stop the walk anyway */
        if ((flags & (GTID_STANDALONE | GTID_XA | GTID_DDL))
            || ((flags & GTID_GROUP_COMMIT_ID) && body < 21)) {
            return 0;
        }
        out->mariadb = (domain_gtid){(unsigned long)le_uint(b + 8, 4),
                                     (unsigned long)le_uint(event + 5, 4), le_uint(b, 8)};
        for (Py_ssize_t i = 0; i < w->n_watched; i++) {
            if (w->watched[i].domain == out->mariadb.domain &&
                out->mariadb.seq_no >= w->watched[i].seq_no) {
                return 0;
            }
        }
        begun = 1; /* a MariaDB GTID opens the group itself */
    }
    else if (type == MYSQL_GTID_EVENT || type == MYSQL_ANONYMOUS_GTID_EVENT) {
        if (!rc_mysql_gtid_ok(b, body, type) ||
            (type == MYSQL_GTID_EVENT && w->budget >= 0 && w->gtids >= w->budget)) {
            return 0;
        }
    }
    else {
        return 0;
    }
    out->gtid_type = type;
    out->gtid_body = b;
    out->gtid_body_len = body;
    for (;;) {
        unsigned long long log_pos = le_uint(event + 13, 4);
        at.position = event_end(at.position, size, log_pos);
        at.seq = (at.seq + 1) & 0xFF;
        at.offset += packet;
        out->events++;
        if (out->events > 1 && event[4] == XID_EVENT) {
            /* the parser takes an 8-byte xid */
            if (!begun || size != 19 + 8 + 4 || (w->limit && at.position >= w->limit)) {
                return 0;
            }
            out->xid_timestamp = (unsigned long)le_uint(event, 4);
            out->end = at;
            return 1;
        }
        found = rc_whole_event(w->buf, w->len, at.offset, at.seq, w->crc, &event, &size, &packet);
        if (found <= 0) {
            return found;
        }
        if (event[17] & EVENT_ARTIFICIAL) {
            return 0;
        }
        if (!begun) { /* MySQL: the event after the GTID must be BEGIN */
            const unsigned char *status;
            Py_ssize_t status_len;
            if (event[4] != QUERY_EVENT ||
                !rc_is_begin(event, size, w->query_post, &status, &status_len)) {
                return 0;
            }
            int truth = spells_begin(w, status, status_len);
            if (truth <= 0) {
                return truth;
            }
            begun = 1;
            continue;
        }
        if (event[4] != XID_EVENT) {
            int allowed = inside(ctx, event, size);
            if (allowed <= 0) {
                return allowed;
            }
        }
    }
}

/* Count a transaction the walk took into its GTIDs: 0, or 1 when they cannot hold it (more
 * domains or runs than they keep; the walk stops before it). */
int
rc_walk_take(Walk *w, const Walked *t)
{
    if (t->gtid_type == MARIADB_GTID_EVENT) { /* the domain's last GTID, moved to the end */
        int i = 0;
        while (i < w->n_last && w->last[i].domain != t->mariadb.domain) {
            i++;
        }
        if (i == w->n_last) {
            if (w->n_last == MAX_DOMAINS) {
                return 1;
            }
            w->n_last++;
        }
        memmove(&w->last[i], &w->last[i + 1], (size_t)(w->n_last - 1 - i) * sizeof(domain_gtid));
        w->last[w->n_last - 1] = t->mariadb;
    }
    else if (t->gtid_type == MYSQL_GTID_EVENT) { /* the run it extends, or a new one */
        const unsigned char *sid = t->gtid_body + 1;
        unsigned long long gno = le_uint(t->gtid_body + 17, 8);
        gno_run *run = w->n_runs ? &w->runs[w->n_runs - 1] : NULL;
        if (run != NULL && memcmp(run->sid, sid, 16) == 0 && gno == run->last + 1) {
            run->last = gno;
        }
        else {
            if (w->n_runs == MAX_RUNS) {
                return 1;
            }
            run = &w->runs[w->n_runs++];
            memcpy(run->sid, sid, 16);
            run->first = run->last = gno;
        }
        w->gtids++;
    }
    return 0;
}

/* The GTIDs of the transactions taken: (mariadb, mysql), the last GTID of each domain as
 * (domain, server_id, seq_no) in the order of those last ones, and the MySQL GTIDs as runs
 * (uuid bytes, first gno, last gno). */
PyObject *
rc_walk_gtids(const Walk *w)
{
    PyObject *mariadb = PyList_New(w->n_last), *mysql = PyList_New(w->n_runs);
    if (mariadb == NULL || mysql == NULL) {
        goto fail;
    }
    for (int i = 0; i < w->n_last; i++) {
        const domain_gtid *g = &w->last[i];
        PyObject *item = Py_BuildValue("(kkK)", g->domain, g->server_id, g->seq_no);
        if (item == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(mariadb, i, item);
    }
    for (int i = 0; i < w->n_runs; i++) {
        const gno_run *r = &w->runs[i];
        PyObject *item =
            Py_BuildValue("(y#KK)", (const char *)r->sid, (Py_ssize_t)16, r->first, r->last);
        if (item == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(mysql, i, item);
    }
    return Py_BuildValue("(NN)", mariadb, mysql);
fail:
    Py_XDECREF(mariadb);
    Py_XDECREF(mysql);
    return NULL;
}

static int
flagged_inside(void *ctx, const unsigned char *event, Py_ssize_t size)
{
    return ((const unsigned char *)ctx)[event[4]];
}

/* skip_transactions(buf, start, seq, position, limit, inside, watch, budget, query_post,
 *                   spells_begin, crc)
 *     -> (offset, seq, position, events, transactions, mariadb, mysql)
 *
 * A read of statements only (a DDL scan) has nothing to deliver from a transaction of rows:
 * between transactions, this passes over whole ones (see rc_walk_transaction) whose events
 * between start and XID are of the types flagged in `inside` (256 bytes, one per type code:
 * ANNOTATE_ROWS, ROWS_QUERY, TABLE_MAP, rows), each event whole and checked (`crc` is
 * required), moving `position` as the parser moves it. `query_post` is the QUERY post-header
 * length of the FORMAT_DESCRIPTION; `spells_begin(status)` tells whether a QUERY event with
 * these status variables reads the bytes BEGIN as the statement BEGIN (its client character
 * set decodes ASCII as ASCII), asked once for each different block of status variables in a
 * call.
 *
 * It stops before the first transaction that is not of those forms, not whole in the buffer
 * yet, or that the stream's end check needs to see: one that ends at or past `limit` (a
 * position in this file; 0 for none), one whose MariaDB GTID is in a domain of `watch` (pairs
 * of domain and seq_no) at or past that seq_no, or a MySQL GTID beyond the first `budget`
 * (-1: no limit); more watched domains than it holds: nothing is passed over. `mariadb`: the
 * last GTID passed over in each domain, as (domain, server_id, seq_no), in the order of those
 * last ones; `mysql`: the MySQL GTIDs passed over, as runs (uuid bytes, first gno, last
 * gno). */
PyObject *
rc_skip_transactions(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *watch, *spells, *crc, *result = NULL;
    Py_ssize_t start, budget, query_post;
    Cursor at;
    unsigned long long limit;
    Py_buffer view, types;
    if (!PyArg_ParseTuple(args, "OniKKy*OnnOO", &bufobj, &start, &at.seq, &at.position, &limit,
                          &types, &watch, &budget, &query_post, &spells, &crc)) {
        return NULL;
    }
    if (types.len != 256) {
        PyBuffer_Release(&types);
        PyErr_SetString(PyExc_ValueError, "inside must be 256 bytes");
        return NULL;
    }
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&types);
        return NULL;
    }
    Walk w;
    Py_ssize_t events = 0, transactions = 0;
    at.offset = start < 0 ? 0 : start;
    if (rc_walk_init(&w, &view, watch, budget, limit, query_post, spells, crc) < 0) {
        goto done;
    }
    for (;;) {
        Walked t;
        int found = rc_walk_transaction(&w, at, flagged_inside, (void *)types.buf, &t);
        if (found < 0) {
            goto done;
        }
        if (found == 0 || rc_walk_take(&w, &t)) {
            break;
        }
        at = t.end;
        events += t.events;
        transactions++;
    }
    PyObject *gtids = rc_walk_gtids(&w);
    if (gtids != NULL) {
        result = Py_BuildValue("niKnnOO", at.offset, at.seq, at.position, events, transactions,
                               PyTuple_GET_ITEM(gtids, 0), PyTuple_GET_ITEM(gtids, 1));
        Py_DECREF(gtids);
    }
done:
    PyBuffer_Release(&view);
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
