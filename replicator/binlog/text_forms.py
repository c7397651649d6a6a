"""MariaDB's UUID, INET4 and INET6 columns: logged as their binary form, landed as text.

The binlog logs these types as fixed-size binary strings (``MYSQL_TYPE_STRING`` with the
binary charset; MariaDB ``plugin/type_uuid``, ``plugin/type_inet``): 16 bytes of a UUID in its
RFC 4122 byte order, 4 bytes of an IPv4 address, 16 bytes of an IPv6 address, all in network
order. The column type itself is not in the binlog (not even with binlog_row_metadata=FULL),
so the decoder formats them when the schema history says what the column is.

The text is what ``SELECT`` prints. UUID: lower-case ``8-4-4-4-12`` hex. INET4: dotted
decimal. INET6 follows ``Inet6::to_string`` in MariaDB ``plugin/type_inet/sql_type_inet.cc``,
which differs from RFC 5952 (and glibc's ``inet_ntop``) in one point, checked against a
live 10.11 server: the longest run of zero groups is shortened to ``::`` even when it is a
single group (``::2:3:4:5:6:7:8``). As in BIND's ``inet_ntop6``, an address whose first six
groups are zero (IPv4-compatible, but not ``::`` or ``::0.0.0.n``) or that is ``::ffff:`` +
IPv4 (IPv4-mapped) ends in dotted decimal.
"""

from __future__ import annotations

from collections.abc import Callable

SIZES = {"uuid": 16, "inet4": 4, "inet6": 16}


def format_uuid(data: bytes) -> str:
    h = data.hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def format_inet4(data: bytes) -> str:
    return ".".join(str(b) for b in data)


def format_inet6(data: bytes) -> str:
    words = [int.from_bytes(data[i : i + 2], "big") for i in range(0, 16, 2)]
    best_start, best_len = -1, 0
    run_start, run_len = -1, 0
    for i, word in enumerate(words):
        if word == 0:
            if run_start < 0:
                run_start, run_len = i, 0
            run_len += 1
            if run_len > best_len:
                best_start, best_len = run_start, run_len
        else:
            run_start = -1
    parts: list[str] = []
    i = 0
    while i < 8:
        if i == best_start:
            parts.append("")  # the run: "::" once joined
            if i == 0:
                parts.append("")
            i += best_len
            if i == 8:
                parts.append("")
            continue
        if i == 6 and best_start == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xFFFF)):
            parts.append(format_inet4(data[12:16]))
            break
        parts.append(f"{words[i]:x}")
        i += 1
    return ":".join(parts)


FORMATTERS: dict[str, Callable[[bytes], str]] = {
    "uuid": format_uuid,
    "inet4": format_inet4,
    "inet6": format_inet6,
}
