/*
 * Runs: many whole transactions of rows taken from the dump stream at once (replicator/binlog/
 * runs.py). Between transactions the reader hands the buffered packets here; the transactions
 * of rows only (GTID, BEGIN on MySQL, TABLE_MAP, rows events, XID) whose table maps it knows
 * are walked with every event checked (framing.c, rc_walk_transaction), and their row images
 * decoded into blocks, consecutive rows events of one table and kind into one block (rows.c's
 * sides), with where each rows event came from beside them (its position, server id, GTID and
 * commit time): the metadata the landing zone gives each row. What a Python object per event
 * and per transaction cost (the reader's parser and assembler, the hand-over, the pipeline)
 * is paid once per run.
 *
 * Like every fast path here it raises nothing about the data: anything it does not take (an
 * unknown table map, a partial row image, compressed or partial JSON rows, a value that does
 * not decode, a transaction of another form) ends the run before that transaction, which the
 * parser then reads the usual way, and raises the exact error for when it is bad. The last
 * transaction it could take is always left to the parser too: it closes the run (the
 * pipeline's batch may end there, and a batch's last transaction is kept whole for its proof).
 */
#include "rowcore.h"

#define ANNOTATE_ROWS_EVENT 160
#define ROWS_QUERY_EVENT 29
#define MAX_MAPPED 64 /* table ids one transaction may map */
#define MAX_LATEST 256 /* table ids one run may map (the parser reads on from there) */
#define RECENT 8      /* TABLE_MAP bodies remembered in a call */

/* The kind of a rows event type taken here: 0 write, 1 update, 2 delete; -1 for the others
 * (MariaDB's compressed rows, PARTIAL_UPDATE_ROWS, pre-GA rows). v1: MySQL 5.1-5.5 and MariaDB;
 * v2: MySQL 5.6 on. */
static int
rows_kind(int type)
{
    switch (type) {
    case 23: /* WRITE_ROWS_V1 */
    case 30: /* WRITE_ROWS */
        return 0;
    case 24:
    case 31:
        return 1;
    case 25:
    case 32:
        return 2;
    default:
        return -1;
    }
}

/* ------------------------------------------------------------------- event heads */

/* A rows event's head, read as the parser reads it (parser._rows): its table id, column
 * count and where its row images are in the event. */
typedef struct {
    unsigned long long table_id;
    Py_ssize_t ncols;
    Py_ssize_t data, end; /* the row images: event[data:end] */
} RowsHead;

/* 1 when the rows event is one taken here: a known kind, its head whole, and every column in
 * its image (both images of an update: binlog_row_image=FULL); else 0. `posts`: the post-header
 * length of each event type (0: the parser's default). */
static int
rows_head(const unsigned char *posts, const unsigned char *event, Py_ssize_t size, RowsHead *h)
{
    int type = event[4], kind = rows_kind(type);
    if (kind < 0) {
        return 0;
    }
    int v2 = type >= 30;
    Py_ssize_t post = posts[type] ? posts[type] : (v2 ? 10 : 8);
    int id_width = post == 6 ? 4 : 6;
    const unsigned char *b = event + 19;
    Py_ssize_t len = size - 19 - 4, pos = id_width + 2;
    if (len < pos + (v2 ? 2 : 0)) {
        return 0;
    }
    h->table_id = le_uint(b, id_width);
    if (v2) { /* extra data: its length counts its own 2 bytes */
        Py_ssize_t extra = b[pos] | (b[pos + 1] << 8);
        if (extra < 2) {
            return 0;
        }
        pos += extra;
    }
    if (pos >= len) {
        return 0;
    }
    if (b[pos] < 0xFB) {
        h->ncols = b[pos];
        pos += 1;
    }
    else if (b[pos] == 0xFC && pos + 3 <= len) {
        h->ncols = b[pos + 1] | (b[pos + 2] << 8);
        pos += 3;
    }
    else {
        return 0;
    }
    Py_ssize_t width = (h->ncols + 7) / 8;
    int bitmaps = kind == 1 ? 2 : 1;
    if (h->ncols < 1 || pos + bitmaps * width > len) {
        return 0;
    }
    for (int m = 0; m < bitmaps; m++, pos += width) {
        for (Py_ssize_t i = 0; i < h->ncols; i++) {
            if (!(b[pos + (i >> 3)] >> (i & 7) & 1)) {
                return 0; /* a partial image: the parser's layouts take it */
            }
        }
    }
    h->data = 19 + pos;
    h->end = 19 + len;
    return h->end > h->data; /* an event of no rows: the parser takes it */
}

/* ------------------------------------------------------------------ table maps */

/* The table maps known: `tables` maps a TABLE_MAP body (as the parser keys its decodes) to
 * (spec, columns, token): the BlockSpec of images of every column, their count, and what the
 * run hands back for the table. Lookups of the same bytes are remembered for the call. */
typedef struct {
    PyObject *tables;
    const unsigned char *posts;
    struct {
        const unsigned char *body;
        Py_ssize_t len;
        PyObject *entry;
    } recent[RECENT];
    int n_recent, next_recent;
} Maps;

/* The entry of a TABLE_MAP event (borrowed), or NULL: unknown (no exception), or an error. */
static PyObject *
known_map(Maps *m, const unsigned char *event, Py_ssize_t size, unsigned long long *table_id)
{
    const unsigned char *body = event + 19;
    Py_ssize_t len = size - 19 - 4;
    int post = m->posts[TABLE_MAP_EVENT] ? m->posts[TABLE_MAP_EVENT] : 8;
    int id_width = post == 6 ? 4 : 6;
    if (len < id_width) {
        return NULL;
    }
    *table_id = le_uint(body, id_width);
    for (int i = 0; i < m->n_recent; i++) {
        if (m->recent[i].len == len && memcmp(m->recent[i].body, body, (size_t)len) == 0) {
            return m->recent[i].entry;
        }
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)body, len);
    if (key == NULL) {
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(m->tables, key);
    Py_DECREF(key);
    if (entry == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3 ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(entry, 0), &rc_BlockSpecType) ||
        !PyLong_Check(PyTuple_GET_ITEM(entry, 1))) {
        PyErr_SetString(PyExc_TypeError, "tables maps TABLE_MAP bodies to (spec, columns, token)");
        return NULL;
    }
    int at = m->next_recent;
    m->recent[at].body = body;
    m->recent[at].len = len;
    m->recent[at].entry = entry;
    m->next_recent = (at + 1) % RECENT;
    if (m->n_recent < RECENT) {
        m->n_recent++;
    }
    return entry;
}

static Py_ssize_t
entry_columns(PyObject *entry)
{
    return PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 1));
}

/* The table ids a transaction mapped so far, each to its entry. */
typedef struct {
    unsigned long long id[MAX_MAPPED];
    PyObject *entry[MAX_MAPPED];
    int n;
} Mapped;

/* The latest TABLE_MAP of each table id a run mapped, for the parser to take over. */
typedef struct {
    unsigned long long id[MAX_LATEST];
    PyObject *entry[MAX_LATEST];
    int n;
} Latest;

/* 1 mapped, 0 when the transaction maps more tables than this holds */
static int
map_table(Mapped *mapped, unsigned long long id, PyObject *entry)
{
    for (int i = 0; i < mapped->n; i++) {
        if (mapped->id[i] == id) {
            mapped->entry[i] = entry;
            return 1;
        }
    }
    if (mapped->n == MAX_MAPPED) {
        return 0;
    }
    mapped->id[mapped->n] = id;
    mapped->entry[mapped->n++] = entry;
    return 1;
}

static PyObject *
mapped_entry(const Mapped *mapped, unsigned long long id)
{
    for (int i = 0; i < mapped->n; i++) {
        if (mapped->id[i] == id) {
            return mapped->entry[i];
        }
    }
    return NULL;
}

/* -------------------------------------------------- the first pass: what may be taken */

typedef struct {
    Maps *maps;
    Mapped mapped;
    Py_ssize_t images;     /* bytes of row images in the transaction so far */
    Py_ssize_t max_images; /* fewer than this per transaction */
} Scan;

/* rc_walk_transaction's check of the events inside a transaction taken here: annotations,
 * known table maps, and rows events of mapped tables with whole images. A transaction's row
 * images stay under `max_images` bytes: a row image takes a byte at least, so it has fewer
 * rows than that, and the parser never hands it out in parts (sink.large_transaction_rows). */
static int
scan_inside(void *ctx, const unsigned char *event, Py_ssize_t size)
{
    Scan *s = ctx;
    int type = event[4];
    if (type == ANNOTATE_ROWS_EVENT || type == ROWS_QUERY_EVENT) {
        return 1;
    }
    if (type == TABLE_MAP_EVENT) {
        unsigned long long id;
        PyObject *entry = known_map(s->maps, event, size, &id);
        if (entry == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        return map_table(&s->mapped, id, entry);
    }
    RowsHead h;
    if (!rows_head(s->maps->posts, event, size, &h)) {
        return 0;
    }
    PyObject *entry = mapped_entry(&s->mapped, h.table_id);
    if (entry == NULL || entry_columns(entry) != h.ncols) {
        return 0;
    }
    s->images += h.end - h.data;
    return s->images < s->max_images;
}

/* ------------------------------------------------------------------ segments */

/* Where a side's columns stood, to go back there. */
typedef struct {
    Py_ssize_t valid, data, lengths, items;
} ColumnMark;

/* Where a segment stood (before an event, or before a transaction). */
typedef struct {
    ColumnMark *columns; /* per side, per present column */
    Py_ssize_t rows, events, gtid_bytes;
} SegmentMark;

/* What the landing zone gives each row of a rows event: where the event is, its server id,
 * its transaction's GTID (text) and commit time, and where its rows end in the segment. */
typedef struct {
    long long row_end, position, server_id, ts;
    int gtid_end, gtid_null;
} EventMeta;

/* Consecutive rows events of one table map entry and one event type, decoded into one
 * block. */
typedef struct {
    PyObject *entry; /* strong */
    int type;
    int nsides;
    Side sides[2];
    Py_ssize_t rows, events;
    Growable meta; /* EventMeta per event */
    Growable gtids; /* the GTID texts, back to back */
    SegmentMark event_mark, txn_mark;
} Segment;

static Py_ssize_t
segment_columns(const Segment *s)
{
    return s->sides[0].spec->npresent;
}

static void
segment_free(Segment *s)
{
    for (int i = 0; i < s->nsides; i++) {
        rc_side_free(&s->sides[i]);
    }
    PyMem_RawFree(s->meta.data);
    PyMem_RawFree(s->gtids.data);
    PyMem_Free(s->event_mark.columns);
    PyMem_Free(s->txn_mark.columns);
    Py_CLEAR(s->entry);
    memset(s, 0, sizeof(*s));
}

/* The lists of the columns taken as objects (those that have none yet). */
static int
segment_lists(Segment *s)
{
    for (int i = 0; i < s->nsides; i++) {
        Side *side = &s->sides[i];
        for (Py_ssize_t k = 0; k < side->spec->npresent; k++) {
            if (side->as_objects[k] && side->lists[k] == NULL &&
                (side->lists[k] = PyList_New(0)) == NULL) {
                return -1;
            }
        }
    }
    return 0;
}

/* A new segment of `entry`'s table and event type `type`; `like` (or NULL): a segment of the
 * same whose columns taken as objects this one takes as objects too. */
static int
segment_init(Segment *s, PyObject *entry, int type, const Segment *like)
{
    memset(s, 0, sizeof(*s));
    BlockSpec *spec = (BlockSpec *)PyTuple_GET_ITEM(entry, 0);
    s->nsides = rows_kind(type) == 1 ? 2 : 1;
    s->type = type;
    Py_INCREF(entry);
    s->entry = entry;
    Py_ssize_t n = spec->npresent ? spec->npresent : 1;
    s->event_mark.columns = PyMem_Calloc(2 * n, sizeof(ColumnMark));
    s->txn_mark.columns = PyMem_Calloc(2 * n, sizeof(ColumnMark));
    if (s->event_mark.columns == NULL || s->txn_mark.columns == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < s->nsides; i++) {
        if (rc_side_alloc(&s->sides[i], spec, 0) < 0) {
            return -1;
        }
        if (like != NULL) {
            memcpy(s->sides[i].as_objects, like->sides[i].as_objects, (size_t)spec->npresent);
        }
    }
    return segment_lists(s);
}

static void
segment_mark(Segment *s, SegmentMark *m)
{
    Py_ssize_t n = segment_columns(s);
    for (int i = 0; i < s->nsides; i++) {
        Side *side = &s->sides[i];
        for (Py_ssize_t k = 0; k < n; k++) {
            ColumnMark *c = &m->columns[i * n + k];
            c->valid = side->cols[k].valid.len;
            c->data = side->cols[k].data.len;
            c->lengths = side->cols[k].lengths.len;
            c->items = side->lists[k] ? PyList_GET_SIZE(side->lists[k]) : 0;
        }
    }
    m->rows = s->rows;
    m->events = s->events;
    m->gtid_bytes = s->gtids.len;
}

static int
segment_back(Segment *s, const SegmentMark *m)
{
    Py_ssize_t n = segment_columns(s);
    for (int i = 0; i < s->nsides; i++) {
        Side *side = &s->sides[i];
        for (Py_ssize_t k = 0; k < n; k++) {
            const ColumnMark *c = &m->columns[i * n + k];
            side->cols[k].valid.len = c->valid;
            side->cols[k].data.len = c->data;
            side->cols[k].lengths.len = c->lengths;
            PyObject *list = side->lists[k];
            if (list != NULL && PyList_GET_SIZE(list) > c->items &&
                PyList_SetSlice(list, c->items, PyList_GET_SIZE(list), NULL) < 0) {
                return -1;
            }
        }
    }
    s->rows = m->rows;
    s->events = m->events;
    s->meta.len = m->events * (Py_ssize_t)sizeof(EventMeta);
    s->gtids.len = m->gtid_bytes;
    return 0;
}

/* ------------------------------------------------------------------------ runs */

/* What a run took so far: its segments, and what the pipeline needs to end a batch inside it
 * (runs.py, TakenRun.split): every rows event's row images, back to back, and a record of
 * each transaction. */
typedef struct {
    Segment *segments;
    Py_ssize_t n, cap;
    Py_ssize_t rows, events; /* of the segments, in stream order */
    Growable images;         /* the row images of every rows event taken */
    Growable image_ends;     /* int64 per rows event: where its images end in `images` */
    Growable txns;           /* TxnRecord per transaction taken */
} Segments;

/* A transaction taken (runs.py, _TXN): where its rows and rows events end among the run's
 * (counted in stream order), where it starts and ends, its commit time (microseconds) and its
 * XID's header time, and its GTID: MariaDB (domain, server id, seq_no), MySQL (uuid, gno), or
 * none (ANONYMOUS_GTID). */
typedef struct {
    long long rows_end, events_end, start, end, ts, xid_timestamp;
    int gtid_type;
    unsigned int domain, server_id, pad;
    unsigned long long number; /* seq_no, or gno */
    unsigned char sid[16];
} TxnRecord;

static Segment *
new_segment(Segments *all, PyObject *entry, int type, const Segment *like)
{
    if (all->n == all->cap) {
        Py_ssize_t cap = all->cap ? 2 * all->cap : 16;
        Segment *grown = PyMem_Realloc(all->segments, (size_t)cap * sizeof(Segment));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        all->segments = grown;
        all->cap = cap;
        if (like != NULL) { /* it moved with the array */
            like = &grown[all->n - 1];
        }
    }
    Segment *s = &all->segments[all->n++];
    if (segment_init(s, entry, type, like) < 0) {
        segment_free(s);
        all->n--;
        return NULL;
    }
    return s;
}

/* What the rows of a transaction get from it. */
typedef struct {
    char gtid[96]; /* its GTID as text ("domain-server-seq", "uuid:gno"); empty: none */
    int gtid_len, gtid_null;
    long long ts; /* its commit time, microseconds since the epoch */
} TxnMeta;

static void
txn_meta(const Walked *t, TxnMeta *m)
{
    m->ts = (long long)t->xid_timestamp * 1000000;
    m->gtid_null = 0;
    if (t->gtid_type == MARIADB_GTID_EVENT) {
        m->gtid_len = snprintf(m->gtid, sizeof(m->gtid), "%lu-%lu-%llu", t->mariadb.domain,
                               t->mariadb.server_id, t->mariadb.seq_no);
        return;
    }
    /* MySQL (mysql_bodies.decode_gtid): flags, uuid, gno, then with logical timestamps
     * (type code 2) the immediate commit time in 7 bytes, bit 55 announcing another */
    const unsigned char *b = t->gtid_body;
    if (t->gtid_body_len >= 25 + 17 + 7 && b[25] == 2) {
        unsigned long long immediate = le_uint(b + 42, 7) & ((1ULL << 55) - 1);
        if (immediate) {
            m->ts = (long long)immediate;
        }
    }
    if (t->gtid_type == MYSQL_ANONYMOUS_GTID_EVENT) {
        m->gtid_len = 0;
        m->gtid_null = 1;
        return;
    }
    static const char hex[] = "0123456789abcdef";
    char *o = m->gtid;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            *o++ = '-';
        }
        *o++ = hex[b[1 + i] >> 4];
        *o++ = hex[b[1 + i] & 15];
    }
    m->gtid_len = (int)(o - m->gtid);
    m->gtid_len += snprintf(o, sizeof(m->gtid) - (size_t)m->gtid_len, ":%lld",
                            (long long)le_uint(b + 17, 8));
}

static int
segment_has_objects(const Segment *s)
{
    for (int i = 0; i < s->nsides; i++) {
        if (rc_side_has_objects(&s->sides[i])) {
            return 1;
        }
    }
    return 0;
}

/* One rows event's images into the run: appended to the last segment when it is of the same
 * table map entry and event type, else to a new one. A value a column's buffers cannot hold
 * starts a segment taking that column as objects (from its first row, as BlockSpec.decode does
 * for an event). Columns taken as objects may call their Python decoder (OP_CALL) with the
 * images and a position: they get the images as bytes, as the parser hands them. 0 decoded;
 * 1 not decodable here (the segment is as it was); -1 error. */
static int
take_rows(Segments *all, PyObject *bufobj, const unsigned char *base, PyObject *entry,
          const unsigned char *event, const RowsHead *h, unsigned long long position,
          const TxnMeta *txn)
{
    int type = event[4];
    Segment *s = all->n ? &all->segments[all->n - 1] : NULL;
    if (s == NULL || s->entry != entry || s->type != type) {
        s = new_segment(all, entry, type, NULL);
        if (s == NULL) {
            return -1;
        }
    }
    PyObject *images = NULL; /* the images as bytes, for Python decoders */
    int outcome = 0;
    for (;;) {
        PyObject *source = bufobj;
        const unsigned char *buf = base;
        Py_ssize_t pos = (event - base) + h->data, end = (event - base) + h->end;
        if (segment_has_objects(s)) {
            if (images == NULL) {
                images = PyBytes_FromStringAndSize((const char *)event + h->data, end - pos);
                if (images == NULL) {
                    return -1;
                }
            }
            source = images;
            buf = (const unsigned char *)PyBytes_AS_STRING(images);
            end -= pos;
            pos = 0;
        }
        segment_mark(s, &s->event_mark);
        Py_ssize_t bad = -1, rows = 0;
        int side = 0;
        outcome = 0;
        while (outcome == 0 && pos < end) {
            for (side = 0; side < s->nsides && outcome == 0; side++) {
                outcome = rc_side_image(&s->sides[side], source, buf, &pos, end, &bad);
            }
            side--;
            rows++;
        }
        if (outcome == 0) {
            EventMeta meta = {s->rows + rows, (long long)position,
                              (long long)le_uint(event + 5, 4), txn->ts, 0, txn->gtid_null};
            if (grow(&s->gtids, txn->gtid_len) < 0 || grow(&s->meta, sizeof(EventMeta)) < 0) {
                outcome = -1;
                break;
            }
            memcpy(s->gtids.data + s->gtids.len, txn->gtid, (size_t)txn->gtid_len);
            s->gtids.len += txn->gtid_len;
            meta.gtid_end = (int)s->gtids.len;
            memcpy(s->meta.data + s->meta.len, &meta, sizeof(EventMeta));
            s->meta.len += sizeof(EventMeta);
            s->rows += rows;
            s->events++;
            all->rows += rows;
            all->events++;
            Py_ssize_t size = h->end - h->data;
            long long images_end = (long long)(all->images.len + size);
            if (grow(&all->images, size) < 0 || grow(&all->image_ends, 8) < 0) {
                outcome = -1;
                break;
            }
            memcpy(all->images.data + all->images.len, event + h->data, (size_t)size);
            all->images.len += size;
            memcpy(all->image_ends.data + all->image_ends.len, &images_end, 8);
            all->image_ends.len += 8;
            break;
        }
        if (segment_back(s, &s->event_mark) < 0 || outcome == 2) {
            outcome = -1;
            break;
        }
        if (bad < 0 || s->sides[side].as_objects[bad]) {
            outcome = 1; /* the parser's reference decoders take it (and raise the exact error) */
            break;
        }
        if (s->rows) { /* the column as objects from this event on: a segment of its own */
            s = new_segment(all, entry, type, s);
            if (s == NULL) {
                outcome = -1;
                break;
            }
        }
        s->sides[side].as_objects[bad] = 1;
        if (segment_lists(s) < 0) {
            outcome = -1;
            break;
        }
    }
    Py_XDECREF(images);
    return outcome;
}

/* Where the run stood before a transaction, to drop what it decoded of it. */
typedef struct {
    Py_ssize_t segments, rows, events, images, image_ends;
} RunMark;

static void
run_mark(Segments *all, RunMark *m)
{
    m->segments = all->n;
    m->rows = all->rows;
    m->events = all->events;
    m->images = all->images.len;
    m->image_ends = all->image_ends.len;
    if (all->n) {
        Segment *s = &all->segments[all->n - 1];
        segment_mark(s, &s->txn_mark);
    }
}

static int
run_back(Segments *all, const RunMark *m)
{
    while (all->n > m->segments) {
        segment_free(&all->segments[--all->n]);
    }
    all->rows = m->rows;
    all->events = m->events;
    all->images.len = m->images;
    all->image_ends.len = m->image_ends;
    if (all->n) {
        Segment *s = &all->segments[all->n - 1];
        return segment_back(s, &s->txn_mark);
    }
    return 0;
}

/* One whole transaction (found by the first pass) decoded into the run: 0, 1 when it does
 * not decode here (nothing of it is left in the run), -1 on an error. */
static int
take_transaction(Segments *all, Maps *maps, Latest *latest, PyObject *bufobj,
                 const unsigned char *buf, const Walked *t, long long *counts)
{
    TxnMeta txn;
    Mapped mapped = {.n = 0};
    RunMark mark;
    txn_meta(t, &txn);
    run_mark(all, &mark);
    Cursor at = t->start;
    for (Py_ssize_t k = 0; k < t->events; k++) {
        const unsigned char *event = buf + at.offset + 5; /* a whole packet: header, 0x00 */
        Py_ssize_t size = (Py_ssize_t)le_uint(event + 9, 4);
        unsigned long long log_pos = le_uint(event + 13, 4);
        int type = event[4], outcome = 0;
        if (type == TABLE_MAP_EVENT) {
            unsigned long long id;
            PyObject *entry = known_map(maps, event, size, &id);
            if (entry == NULL) {
                outcome = PyErr_Occurred() ? -1 : 1;
            }
            else if (!map_table(&mapped, id, entry)) {
                outcome = 1;
            }
        }
        else if (rows_kind(type) >= 0) {
            RowsHead h;
            PyObject *entry = NULL;
            if (rows_head(maps->posts, event, size, &h)) {
                entry = mapped_entry(&mapped, h.table_id);
            }
            outcome = entry == NULL ? 1
                                    : take_rows(all, bufobj, buf, entry, event, &h,
                                                at.position, &txn);
        }
        if (outcome != 0) {
            return run_back(all, &mark) < 0 ? -1 : outcome;
        }
        at.position = event_end(at.position, size, log_pos);
        at.offset += 5 + size;
    }
    /* Its table maps become the latest of their ids, which the parser takes over when the
     * run ends: a run that has mapped MAX_LATEST ids ends before a transaction that maps
     * another (the parser reads it), so that none is left out of what the parser takes. */
    int slot[MAX_MAPPED], fresh = 0; /* where each of its ids goes in latest */
    for (int i = 0; i < mapped.n; i++) {
        int j = 0;
        while (j < latest->n && latest->id[j] != mapped.id[i]) {
            j++;
        }
        slot[i] = j < latest->n ? j : latest->n + fresh++;
    }
    if (latest->n + fresh > MAX_LATEST) {
        return run_back(all, &mark) < 0 ? -1 : 1;
    }
    /* taken: its record, its events counted, and its table maps the latest of their ids */
    TxnRecord record = {all->rows, all->events, (long long)t->start.position,
                        (long long)t->end.position, txn.ts, (long long)t->xid_timestamp,
                        t->gtid_type, 0, 0, 0, 0, {0}};
    if (t->gtid_type == MARIADB_GTID_EVENT) {
        record.domain = (unsigned int)t->mariadb.domain;
        record.server_id = (unsigned int)t->mariadb.server_id;
        record.number = t->mariadb.seq_no;
    }
    else {
        memcpy(record.sid, t->gtid_body + 1, 16);
        record.number = le_uint(t->gtid_body + 17, 8);
    }
    if (grow(&all->txns, sizeof(TxnRecord)) < 0) {
        return -1;
    }
    memcpy(all->txns.data + all->txns.len, &record, sizeof(TxnRecord));
    all->txns.len += sizeof(TxnRecord);
    at = t->start;
    for (Py_ssize_t k = 0; k < t->events; k++) {
        const unsigned char *event = buf + at.offset + 5;
        counts[event[4]]++;
        at.offset += 5 + (Py_ssize_t)le_uint(event + 9, 4);
    }
    for (int i = 0; i < mapped.n; i++) {
        latest->id[slot[i]] = mapped.id[i];
        latest->entry[slot[i]] = mapped.entry[i];
    }
    latest->n += fresh; /* room checked above */
    return 0;
}

/* --------------------------------------------------------------------- results */

static PyObject *
bytes_of(const char *data, Py_ssize_t len)
{
    return PyBytes_FromStringAndSize(len ? data : "", len);
}

/* Where each rows event of a segment came from, as Arrow buffers: (ends, positions, server
 * ids, commit times, GTID validity or None, GTID nulls, GTID offsets, GTID text). */
static PyObject *
segment_origins(const Segment *s)
{
    Py_ssize_t n = s->events;
    const EventMeta *meta = (const EventMeta *)s->meta.data;
    PyObject *ends = PyBytes_FromStringAndSize(NULL, 4 * n);
    PyObject *positions = PyBytes_FromStringAndSize(NULL, 8 * n);
    PyObject *servers = PyBytes_FromStringAndSize(NULL, 8 * n);
    PyObject *times = PyBytes_FromStringAndSize(NULL, 8 * n);
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, 4 * (n + 1));
    PyObject *valid = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    PyObject *text = bytes_of(s->gtids.data, s->gtids.len);
    PyObject *result = NULL;
    if (ends == NULL || positions == NULL || servers == NULL || times == NULL ||
        offsets == NULL || valid == NULL || text == NULL) {
        goto done;
    }
    int *e = (int *)PyBytes_AS_STRING(ends), *o = (int *)PyBytes_AS_STRING(offsets);
    long long *p = (long long *)PyBytes_AS_STRING(positions);
    long long *sv = (long long *)PyBytes_AS_STRING(servers);
    long long *ts = (long long *)PyBytes_AS_STRING(times);
    unsigned char *bits = (unsigned char *)PyBytes_AS_STRING(valid);
    memset(bits, 0, (size_t)((n + 7) / 8));
    Py_ssize_t nulls = 0;
    o[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        e[i] = (int)meta[i].row_end;
        p[i] = meta[i].position;
        sv[i] = meta[i].server_id;
        ts[i] = meta[i].ts;
        o[i + 1] = meta[i].gtid_end;
        if (meta[i].gtid_null) {
            nulls++;
        }
        else {
            bits[i >> 3] |= (unsigned char)(1 << (i & 7));
        }
    }
    result = Py_BuildValue("(OOOOOnOO)", ends, positions, servers, times, nulls ? valid : Py_None,
                           nulls, offsets, text);
done:
    Py_XDECREF(ends);
    Py_XDECREF(positions);
    Py_XDECREF(servers);
    Py_XDECREF(times);
    Py_XDECREF(offsets);
    Py_XDECREF(valid);
    Py_XDECREF(text);
    return result;
}

/* A segment as (token, event type, rows, columns, after columns or None, events, the first
 * event's GTID text or None, commit time, server id and position, origins or None): origins
 * (segment_origins) where it holds more than one event. */
static PyObject *
segment_result(Segment *s)
{
    const EventMeta *first = (const EventMeta *)s->meta.data;
    PyObject *columns = rc_side_result(&s->sides[0]);
    PyObject *after = s->nsides == 2 && columns != NULL ? rc_side_result(&s->sides[1]) : NULL;
    PyObject *gtid = first->gtid_null ? Py_NewRef(Py_None)
                                      : PyUnicode_DecodeASCII(s->gtids.data, first->gtid_end, NULL);
    PyObject *origins = s->events > 1 ? segment_origins(s) : Py_NewRef(Py_None);
    PyObject *result = NULL;
    if (columns != NULL && (s->nsides == 1 || after != NULL) && gtid != NULL && origins != NULL) {
        result = Py_BuildValue("(OinOOnOLLLO)", PyTuple_GET_ITEM(s->entry, 2), s->type, s->rows,
                               columns, after ? after : Py_None, s->events, gtid, first->ts,
                               first->server_id, first->position, origins);
    }
    Py_XDECREF(columns);
    Py_XDECREF(after);
    Py_XDECREF(gtid);
    Py_XDECREF(origins);
    return result;
}

/* take_transactions(buf, start, seq, position, limit, watch, budget, posts, spells_begin, crc,
 *                   tables, max_images, max_bytes)
 *     -> (offset, seq, position, transactions, bytes, mariadb, mysql, segments, mapped, counts,
 *         (records, images, image_ends))
 *
 * Between transactions of a live stream: the whole transactions of rows buffered here (see
 * rc_walk_transaction; `crc` is required), as one run. Each is GTID (BEGIN on MySQL), TABLE_MAP
 * events whose bodies `tables` knows (see Maps), annotations, and WRITE/UPDATE/DELETE_ROWS of
 * the tables mapped before them in the transaction with every column in their images, then
 * XID, with fewer than `max_images` bytes of row images. The bounds (`limit`, `watch`,
 * `budget`, `query_post` and `spells_begin`) are skip_transactions'; `posts` holds the
 * post-header length of each event type (256 bytes, 0 where the parser's default applies).
 * Transactions are taken until their events pass `max_bytes`.
 *
 * The last whole transaction found is not taken (nor any at all when only one is there), nor
 * is one whose images do not decode here: the parser reads it next. `transactions`: how many
 * were taken; `bytes`: the binlog bytes they span; `mariadb`, `mysql`: their GTIDs as
 * skip_transactions gives them; `segments`: their rows (segment_result), in stream order;
 * `mapped`: (table id, token) of the latest TABLE_MAP of each table id among them; `counts`:
 * (event type, events) of every type taken; `records`: a TxnRecord per transaction taken,
 * `images` the row images of every rows event taken, back to back, and `image_ends` where
 * each one's end there (int64), for the pipeline to end a batch inside the run. */
PyObject *
rc_take_transactions(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bufobj, *watch, *spells, *crc, *tables, *result = NULL;
    Py_ssize_t start, budget, max_images, max_bytes;
    Cursor at;
    unsigned long long limit;
    Py_buffer view, posts;
    if (!PyArg_ParseTuple(args, "OniKKOny*OOO!nn", &bufobj, &start, &at.seq, &at.position, &limit,
                          &watch, &budget, &posts, &spells, &crc, &PyDict_Type, &tables,
                          &max_images, &max_bytes)) {
        return NULL;
    }
    if (posts.len != 256) {
        PyBuffer_Release(&posts);
        PyErr_SetString(PyExc_ValueError, "posts must be 256 bytes");
        return NULL;
    }
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&posts);
        return NULL;
    }
    const unsigned char *post = posts.buf;
    Maps maps = {.tables = tables, .posts = post};
    Segments all;
    memset(&all, 0, sizeof(all));
    Latest latest = {.n = 0};
    Growable found = {NULL, 0, 0}; /* Walked, per transaction of the first pass */
    long long counts[256] = {0};
    Walk w;
    at.offset = start < 0 ? 0 : start;
    Py_ssize_t query_post = post[QUERY_EVENT] ? post[QUERY_EVENT] : 13, taken = 0;
    unsigned long long first_position = at.position;
    if (rc_walk_init(&w, &view, watch, budget, limit, query_post, spells, crc) < 0) {
        goto done;
    }
    /* first pass: the whole transactions of the forms taken, every event checked */
    Scan scan = {.maps = &maps, .max_images = max_images};
    Py_ssize_t n = 0, bytes = 0;
    while (bytes < max_bytes) {
        Walked t;
        scan.mapped.n = 0;
        scan.images = 0;
        int got = rc_walk_transaction(&w, n ? ((Walked *)found.data)[n - 1].end : at, scan_inside,
                                      &scan, &t);
        if (got < 0) {
            goto done;
        }
        if (got == 0 || rc_walk_take(&w, &t)) { /* counted: the bounds see it */
            break;
        }
        if (grow(&found, sizeof(Walked)) < 0) {
            goto done;
        }
        memcpy(found.data + found.len, &t, sizeof(Walked));
        found.len += sizeof(Walked);
        n++;
        bytes += t.end.offset - t.start.offset;
    }
    /* second pass: all but the last decoded into the run, until one does not decode here;
     * the GTIDs are those of the transactions taken */
    const Walked *walked = (const Walked *)found.data;
    w.n_last = w.n_runs = 0;
    w.gtids = 0;
    for (; taken + 1 < n; taken++) {
        const Walked *t = &walked[taken];
        int got = take_transaction(&all, &maps, &latest, bufobj, view.buf, t, counts);
        if (got < 0) {
            goto done;
        }
        if (got > 0) {
            break;
        }
        rc_walk_take(&w, t); /* held in the first pass, with more */
        at = t->end;
    }
    PyObject *gtids = rc_walk_gtids(&w);
    PyObject *segments = PyList_New(all.n), *mapped = PyList_New(latest.n);
    PyObject *counted = PyList_New(0);
    if (gtids == NULL || segments == NULL || mapped == NULL || counted == NULL) {
        goto results_done;
    }
    for (Py_ssize_t i = 0; i < all.n; i++) {
        PyObject *item = segment_result(&all.segments[i]);
        if (item == NULL) {
            goto results_done;
        }
        PyList_SET_ITEM(segments, i, item);
    }
    for (int i = 0; i < latest.n; i++) {
        PyObject *item = Py_BuildValue("(KO)", latest.id[i], PyTuple_GET_ITEM(latest.entry[i], 2));
        if (item == NULL) {
            goto results_done;
        }
        PyList_SET_ITEM(mapped, i, item);
    }
    for (int type = 0; type < 256; type++) {
        if (counts[type]) {
            PyObject *item = Py_BuildValue("(iL)", type, counts[type]);
            if (item == NULL || PyList_Append(counted, item) < 0) {
                Py_XDECREF(item);
                goto results_done;
            }
            Py_DECREF(item);
        }
    }
    result = Py_BuildValue("niKnKOOOOO(NNN)", at.offset, at.seq, at.position, taken,
                           at.position - first_position, PyTuple_GET_ITEM(gtids, 0),
                           PyTuple_GET_ITEM(gtids, 1), segments, mapped, counted,
                           bytes_of(all.txns.data, all.txns.len),
                           bytes_of(all.images.data, all.images.len),
                           bytes_of(all.image_ends.data, all.image_ends.len));
results_done:
    Py_XDECREF(gtids);
    Py_XDECREF(segments);
    Py_XDECREF(mapped);
    Py_XDECREF(counted);
done:
    for (Py_ssize_t i = 0; i < all.n; i++) {
        segment_free(&all.segments[i]);
    }
    PyMem_Free(all.segments);
    PyMem_RawFree(all.images.data);
    PyMem_RawFree(all.image_ends.data);
    PyMem_RawFree(all.txns.data);
    PyMem_RawFree(found.data);
    PyBuffer_Release(&view);
    PyBuffer_Release(&posts);
    return result;
}
