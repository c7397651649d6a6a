"""Server version strings as they appear in FORMAT_DESCRIPTION and ``SELECT @@version``."""

from __future__ import annotations


def version_tuple(version: str) -> tuple[int, int, int]:
    """``"10.11.19-MariaDB-log"`` -> (10, 11, 19); ``"5.1.34sp1-enterprise"`` -> (5, 1, 34)."""
    parts: list[int] = []
    for piece in version.split("-", 1)[0].split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def is_mariadb(version: str) -> bool:
    return "mariadb" in version.lower()
