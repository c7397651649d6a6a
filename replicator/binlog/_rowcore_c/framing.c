/*
 * Whole events of the dump stream (replicator/binlog/framing.py, stream.py): the packets of
 * COM_BINLOG_DUMP split into events, with the sequence ids, the 0x00 marker, the lengths and
 * the events' CRC32 checked, a buffer at a time instead of per event in Python (split_events),
 * or passed over (step_events) by a read of statements only.
 */
#include "rowcore.h"

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
