"""What the replication account may do, read from ``SHOW GRANTS`` (for the current user).

``SHOW GRANTS`` without ``FOR`` lists the grants of ``CURRENT_USER()`` and, on MariaDB, of the
role enabled in the session (https://mariadb.com/kb/en/show-grants/; MySQL:
https://dev.mysql.com/doc/refman/8.4/en/show-grants.html). Each line is
``GRANT <privileges> ON <object> TO <grantee> [IDENTIFIED BY PASSWORD '<hash>'] [WITH ...]``
or, for a granted role, ``GRANT <role> TO <grantee>``. Privilege lists are comma separated, may
carry column lists (``SELECT (`a`, `b`)``), and MySQL 8 prints dynamic privileges
(``BINLOG_ADMIN,REPLICATION_SLAVE_ADMIN``) in lines of their own.

The lines can hold the account's password hash, so they are parsed here and never kept or
shown: only privilege names, object names and role names leave this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import pymysql

from .errors import translate_error
from .server_info import connection_account, connection_where

__all__ = ["Grants", "parse_grants", "quote_account", "read_grants"]

_GRANT_ON: Final = re.compile(r"^\s*GRANT\s+(?P<privs>.+?)\s+ON\s+(?P<obj>.+?)\s+TO\s", re.I | re.S)
_GRANT_ROLE: Final = re.compile(r"^\s*GRANT\s+(?P<roles>.+?)\s+TO\s", re.I | re.S)
_ALL: Final = frozenset({"ALL", "ALL PRIVILEGES"})


@dataclass(frozen=True, slots=True)
class Grants:
    """The account's privileges: global ones, and where it may SELECT below the global level."""

    account: str  # CURRENT_USER(), e.g. "repl@%"
    global_privileges: frozenset[str]
    select_scopes: tuple[str, ...]  # "db.*" or "db.table" with SELECT, below *.*
    roles: tuple[str, ...]

    @property
    def has_all(self) -> bool:
        return bool(self.global_privileges & _ALL)

    def has_any(self, names: Iterable[str]) -> bool:
        """True when any of ``names`` is held on ``*.*`` (ALL PRIVILEGES holds every one)."""
        return self.has_all or bool(self.global_privileges & {n.upper() for n in names})

    @property
    def grantee(self) -> str:
        """The account quoted for a GRANT statement: ``'repl'@'%'``."""
        return quote_account(self.account)


def quote_account(account: str) -> str:
    """``user@host`` (as CURRENT_USER() returns it) as ``'user'@'host'``."""
    user, _, host = account.rpartition("@")
    if not user and not host:
        user, host = account, "%"

    def quote(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"

    return f"{quote(user)}@{quote(host)}"


def _split_privileges(text: str) -> list[str]:
    """Split on commas outside parentheses; drop column lists; upper-case."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        if depth == 0 and char != ")":
            current.append(char)
    parts.append("".join(current))
    return [" ".join(part.split()).upper() for part in parts if part.strip()]


def _unquote_object(obj: str) -> str:
    return obj.replace("`", "").replace('"', "").strip()


def parse_grants(lines: Iterable[str], account: str) -> Grants:
    """The privileges in SHOW GRANTS ``lines`` (the lines themselves are not kept)."""
    global_privileges: set[str] = set()
    select_scopes: list[str] = []
    roles: list[str] = []
    for line in lines:
        match = _GRANT_ON.match(line)
        if match is None:
            role = _GRANT_ROLE.match(line)
            if role is not None:
                roles.extend(r.strip() for r in role.group("roles").split(","))
            continue
        obj = match.group("obj").strip()
        privileges = _split_privileges(match.group("privs"))
        if obj.upper().startswith(("PROCEDURE ", "FUNCTION ", "PACKAGE ")) or "@" in obj:
            continue  # routine grants and PROXY grants
        if obj == "*.*":
            global_privileges.update(privileges)
        elif _ALL & set(privileges) or "SELECT" in privileges:
            select_scopes.append(_unquote_object(obj))
    return Grants(
        account=account,
        global_privileges=frozenset(global_privileges),
        select_scopes=tuple(select_scopes),
        roles=tuple(roles),
    )


def read_grants(conn: pymysql.connections.Connection) -> Grants:
    """SHOW GRANTS and CURRENT_USER() of this connection, parsed."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            row = cur.fetchone()
            account = str(row[0]) if row else connection_account(conn)
            cur.execute("SHOW GRANTS")
            lines = [_text(r[0]) for r in cur.fetchall()]
    except pymysql.err.MySQLError as exc:
        raise translate_error(
            exc, where=connection_where(conn), account=connection_account(conn)
        ) from None
    return parse_grants(lines, account)


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
