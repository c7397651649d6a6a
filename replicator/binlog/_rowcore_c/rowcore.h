/*
 * What the files of the native core (the extension replicator.binlog._rowcore, module.c) share:
 * the instruction codes the module exports to Python, the growable buffers the decoders append
 * to, and the functions one file defines for another. Private to these files.
 */
#ifndef ROWCORE_H
#define ROWCORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------- instruction codes (module constants) */

/* a value as an object (rows.c, decode_value) */
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
    /* as OP_DECIMAL, OP_DATE, OP_DATETIME2 and OP_TIMESTAMP2, but a valid value comes as the
     * str `replicator dump` writes of it (replicator/dump.py), not as an object */
    OP_DECIMAL_TEXT = 16,
    OP_DATE_TEXT = 17,
    OP_DATETIME2_TEXT = 18,
    OP_TIMESTAMP2_TEXT = 19,
};

/* Arrow columns from Python values (buffers.c, arrow_columns) */
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

/* a value into column buffers (rows.c, lane_value) */
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

/* a text result set's column into buffers (text.c, text_block) */
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
    TB_BYTES = 9,     /* bytes as sent; arg0 > 0: BINARY(arg0), zero-padded to arg0 bytes */
    TB_TIME = 10,     /* microseconds (int64) of TIME's [-]H:MM:SS[.ffffff] */
    TB_BIT = 11       /* BIT's big-endian bytes (at most 8) as an int64 (arg1 1) or uint64 */
};

#define MAX_PAYLOAD 0xFFFFFF /* a packet this long continues in the next one */
/* Work on fewer bytes than this keeps the GIL. Releasing it hands it to a waiting thread (the
 * event loop, the Parquet writer), and taking it back can wait for that thread's switch
 * interval: more than decoding or copying a few KiB takes. One-row transactions released it
 * once per rows event and per column joined. */
#define GIL_RELEASE_BYTES 2048

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

/* Where an event of `size` bytes at `start` ends, by its header's 4-byte log_pos (parser.py
 * `event_end`): the server writes the end offset modulo 2**32, and a file grows past 4 GiB
 * when one transaction takes it there. An event that follows the one before it ends at
 * start + size, whatever the file's size; log_pos 0 (inside a MariaDB 11.4 transaction) says
 * nothing else. Any other log_pos (events left out between) keeps start's high bits. */
static inline unsigned long long
event_end(unsigned long long start, Py_ssize_t size, unsigned long long log_pos)
{
    unsigned long long end = start + (unsigned long long)size;
    if (log_pos == 0 || (end & 0xFFFFFFFFULL) == log_pos) {
        return end;
    }
    return (start & ~0xFFFFFFFFULL) | log_pos;
}

/* ------------------------------------------------------------------- growable buffers */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Growable;

static inline int
grow(Growable *g, Py_ssize_t extra)
{
    /* allocated at the first call even for no bytes: the callers then copy zero bytes to a
     * real pointer, never to NULL (undefined behaviour, which UBSan reports) */
    if (g->data != NULL && g->len + extra <= g->cap) {
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

typedef struct {
    Growable valid, data, lengths;
} LaneColumn;

/* A NULL's slot: a zero length for variable-length kinds, else width zero bytes. */
static inline int
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

/* ---------------------------------------------------------------- row blocks (rows.c) */

/* a column's value as an object: an instruction of BlockSpec (rows.c, decode_value) */
typedef struct {
    int op;
    int width;
    long long arg0;
    long long arg1;
    PyObject *obj; /* borrowed from BlockSpec.objects */
} Instr;

/* a column's value into buffers: a lane instruction of BlockSpec (rows.c, lane_value) */
typedef struct {
    int op, in_width, out_width;
    long long arg0, arg1;
    PyObject *obj;
} LaneInstr;

/* the decoder of one row layout's images into a block (rows.c) */
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

/* --------------------------------------------------- whole transactions (framing.c) */

/* MariaDB's GTID event flags (log_event.h, Gtid_log_event) and the event types a transaction
 * taken whole is made of (log_event.h / binlog_event.h Log_event_type) */
#define GTID_STANDALONE 0x01
#define GTID_GROUP_COMMIT_ID 0x02
#define GTID_DDL 0x20
#define GTID_XA 0xC0 /* PREPARED_XA | COMPLETED_XA */
#define EVENT_ARTIFICIAL 0x20
#define QUERY_EVENT 2
#define XID_EVENT 16
#define TABLE_MAP_EVENT 19
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

/* Where the walk over the dump stream's buffered packets stands: the offset in the buffer,
 * the next packet's sequence id, and the binlog position as the parser moves it. */
typedef struct {
    Py_ssize_t offset;
    int seq;
    unsigned long long position;
} Cursor;

/* One whole transaction found by rc_walk_transaction: where it starts and ends, its GTID, its
 * events and the header time of its XID. */
typedef struct {
    Cursor start, end;
    int gtid_type; /* MARIADB_GTID_EVENT, MYSQL_GTID_EVENT or MYSQL_ANONYMOUS_GTID_EVENT */
    domain_gtid mariadb;
    const unsigned char *gtid_body; /* the GTID event's body (MySQL: flags, uuid, gno, ...) */
    Py_ssize_t gtid_body_len;
    Py_ssize_t events;
    unsigned long xid_timestamp;
} Walked;

/* Whether an event between a transaction's start and its XID may be part of a transaction
 * taken whole: 1 yes, 0 no (the walk stops before the transaction), -1 on a Python error. */
typedef int (*InsideCheck)(void *ctx, const unsigned char *event, Py_ssize_t size);

/* What a walk over whole transactions is bound by, and the GTIDs of those it took. */
typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    PyObject *crc, *spells_begin;
    Py_ssize_t query_post;
    unsigned long long limit; /* none may end at or past this position (0: no limit) */
    domain_gtid watched[MAX_WATCHED];
    Py_ssize_t n_watched;
    Py_ssize_t budget; /* MySQL GTIDs that may be taken (-1: any) */
    const unsigned char *spelled; /* the status variables last found to spell BEGIN */
    Py_ssize_t spelled_len;
    domain_gtid last[MAX_DOMAINS]; /* of those taken: the last GTID of each domain */
    int n_last;
    gno_run runs[MAX_RUNS]; /* of those taken: the MySQL GTIDs as runs */
    int n_runs;
    Py_ssize_t gtids; /* MySQL GTIDs taken */
} Walk;

int rc_walk_init(Walk *w, const Py_buffer *view, PyObject *watch, Py_ssize_t budget,
                 unsigned long long limit, Py_ssize_t query_post, PyObject *spells_begin,
                 PyObject *crc);
int rc_walk_transaction(Walk *w, Cursor at, InsideCheck inside, void *ctx, Walked *out);
int rc_walk_take(Walk *w, const Walked *t);
PyObject *rc_walk_gtids(const Walk *w);

/* --------------------------------------------------------------- across the files */

/* buffers.c */
PyObject *rc_lane_buffers(const LaneColumn *c, int with_lengths);
PyObject *rc_arrow_columns(PyObject *module, PyObject *args);
PyObject *rc_concat_columns(PyObject *module, PyObject *args);
/* rows.c: the BlockSpec type, and the sides of a block being decoded (runs.c appends the
 * images of many rows events to one block): rc_side_image decodes one image, 0 when it did, 1
 * when it does not decode (*bad: the present column whose buffers cannot hold its value, else
 * -1), 2 with an exception set */
extern PyTypeObject rc_BlockSpecType;
int rc_side_alloc(Side *s, BlockSpec *spec, int objects);
int rc_side_start(Side *s);
int rc_side_has_objects(const Side *s);
int rc_side_image(Side *s, PyObject *bufobj, const unsigned char *buf, Py_ssize_t *pos,
                  Py_ssize_t end, Py_ssize_t *bad);
PyObject *rc_side_result(Side *s);
void rc_side_clear(Side *s);
void rc_side_free(Side *s);
/* text.c */
PyObject *rc_text_rows(PyObject *self, PyObject *args);
PyObject *rc_text_row_payload(PyObject *self, PyObject *args);
PyObject *rc_text_block(PyObject *self, PyObject *args);
/* framing.c: the whole events of the dump stream, and what a transaction's start is */
int rc_whole_event(const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos, int seq,
                   PyObject *crc, const unsigned char **event, Py_ssize_t *size,
                   Py_ssize_t *packet);
int rc_mysql_gtid_ok(const unsigned char *b, Py_ssize_t len, int type);
int rc_is_begin(const unsigned char *event, Py_ssize_t size, Py_ssize_t post,
                const unsigned char **status, Py_ssize_t *status_len);
PyObject *rc_step_events(PyObject *module, PyObject *args);
PyObject *rc_split_events(PyObject *module, PyObject *args);
PyObject *rc_skip_transactions(PyObject *module, PyObject *args);
PyObject *rc_split_file_events(PyObject *module, PyObject *args);
/* runs.c */
PyObject *rc_take_transactions(PyObject *module, PyObject *args);

/* <datetime.h> keeps its C API in a static pointer, one per file that includes it: each of
 * those files fills its own when the module is imported (PyInit__rowcore). 0, or -1 with an
 * exception set. */
int rc_rows_init(void);
int rc_buffers_init(void);
int rc_text_init(void);

#endif /* ROWCORE_H */
