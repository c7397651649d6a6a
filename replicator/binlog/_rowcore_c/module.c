/*
 * The native core of replicator.binlog (the extension replicator.binlog._rowcore): rows events
 * decoded into blocks, the dump stream split into checked events, text result sets read for
 * snapshots, and the Arrow buffers the Parquet writer builds from them. One file per job:
 *
 *   rows.c     rows events into blocks (BlockSpec): values as objects or into buffers
 *   framing.c  the dump stream's packets into whole events and transactions, CRC32 checked
 *   runs.c     whole transactions of rows decoded at once into runs of blocks
 *   text.c     text-protocol result sets into rows or block buffers (snapshot reads)
 *   buffers.c  Arrow buffers from Python values and from blocks' buffers
 *   formats.h  the stored formats of the fixed-width values, the calendar, strict UTF-8
 *   rowcore.h  what the files share: instruction codes, growable buffers, declarations
 *
 * This file: the module's functions and constants, and its import. Its Python face is
 * described in replicator/binlog/_rowcore.pyi.
 */
#include "rowcore.h"

static PyMethodDef rowcore_methods[] = {
    {"concat_columns", rc_concat_columns, METH_VARARGS,
     "concat_columns(parts, width, varlen): one column of consecutive blocks' buffers as "
     "Arrow buffers."},
    {"text_rows", rc_text_rows, METH_VARARGS,
     "text_rows(buf, offset, kinds, fallbacks, deprecate_eof, wire=None): rows of a result "
     "set (binary with wire)."},
    {"text_block", rc_text_block, METH_VARARGS,
     "text_block(buf, offset, specs, kinds, fallbacks, deprecate_eof, max_rows, wire=None): "
     "rows of a result set as block columns (binary with wire)."},
    {"text_row", rc_text_row_payload, METH_VARARGS,
     "text_row(payload, kinds, fallbacks, wire=None): one row from a whole row payload."},
    {"split_events", rc_split_events, METH_VARARGS,
     "split_events(buf, start, seq, crc, stop=None, keep_first=False): the whole, checked "
     "events of a dump stream's buffered packets, as bytes, up to the first of a type flagged "
     "in stop (the first event aside with keep_first)."},
    {"step_events", rc_step_events, METH_VARARGS,
     "step_events(buf, start, seq, position, types, crc): pass over whole event packets of "
     "the flagged types (a read of statements only)."},
    {"split_file_events", rc_split_file_events, METH_VARARGS,
     "split_file_events(buf, start, crc): the whole, checked events of a binlog file's bytes, "
     "as bytes, up to the first the Python framer and parser must take."},
    {"skip_transactions", rc_skip_transactions, METH_VARARGS,
     "skip_transactions(buf, start, seq, position, limit, inside, watch, budget, query_post, "
     "spells_begin, crc): pass over whole transactions of rows (a read of statements only)."},
    {"take_transactions", rc_take_transactions, METH_VARARGS,
     "take_transactions(buf, start, seq, position, limit, watch, budget, posts, spells_begin, "
     "crc, tables, max_images, max_bytes): whole transactions of rows decoded into a run."},
    {"arrow_columns", rc_arrow_columns, METH_VARARGS,
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
    PyObject *m = NULL;
    const unsigned short probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "the native core supports little-endian hosts only");
        return NULL;
    }
    if (rc_rows_init() < 0 || rc_buffers_init() < 0 || rc_text_init() < 0) {
        return NULL;
    }
    if (PyType_Ready(&rc_BlockSpecType) < 0) {
        return NULL;
    }
    m = PyModule_Create(&rowcore_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&rc_BlockSpecType);
    if (PyModule_AddObject(m, "BlockSpec", (PyObject *)&rc_BlockSpecType) < 0) {
        Py_DECREF(&rc_BlockSpecType);
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
    OP_CONSTANT(m, OP_DECIMAL_TEXT);
    OP_CONSTANT(m, OP_DATE_TEXT);
    OP_CONSTANT(m, OP_DATETIME2_TEXT);
    OP_CONSTANT(m, OP_TIMESTAMP2_TEXT);
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
    OP_CONSTANT(m, TB_TIME);
    OP_CONSTANT(m, TB_BIT);
    return m;
fail:
    Py_XDECREF(m);
    return NULL;
}
