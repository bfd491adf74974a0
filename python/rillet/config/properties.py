"""Java properties files, read and written as ``java.util.Properties`` does
(``server.properties``, client property files)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rillet.errors import InvalidConfigurationError

__all__ = ["format_properties", "load_properties", "parse_properties"]


_PROPS_WS = " \t\f"
_PROPS_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java properties text the way ``java.util.Properties.load`` does: ``#`` and ``!``
    comment lines, ``key=value``, ``key: value`` and ``key value``, a line ending in an odd
    number of backslashes continues on the next line (whose leading blanks are dropped), and
    escapes (``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``, ``\\`` before any other char).
    A later duplicate key wins. ``source`` names the text in error messages."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        try:
            key = _unescape(raw_key)
            props[key] = _unescape(raw_value)
        except ValueError as e:
            raise InvalidConfigurationError(f"{source}, line {lineno}: {e}") from None
    return props


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file (UTF-8; Latin-1 if it is not valid UTF-8, as Java reads it)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InvalidConfigurationError(
            f"Cannot read properties file {os.fspath(path)}: {e.strerror or e}"
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, os.fspath(path))


def format_properties(props: Mapping[str, str], comments: Sequence[str] = ()) -> str:
    """Properties text that :func:`parse_properties` (and Java) read back as ``props``,
    escaped the way ``java.util.Properties.store`` escapes, one ``#`` line per comment."""
    lines = [f"#{c}" for c in comments]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "".join(line + "\n" for line in lines)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_PROPS_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # a blank or comment line; a comment is never continued
        parts = []
        while True:
            backslashes = len(line) - len(line.rstrip("\\"))
            if backslashes % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(natural):
                break  # a continuation at the end of the text continues into nothing
            line = natural[i].lstrip(_PROPS_WS)
            i += 1
        yield lineno, "".join(parts)


def _split_key_value(line: str) -> tuple[str, str]:
    key_end = value_start = len(line)
    has_separator = preceding_backslash = False
    for idx, c in enumerate(line):
        if not preceding_backslash and c in "=:":
            key_end, value_start, has_separator = idx, idx + 1, True
            break
        if not preceding_backslash and c in _PROPS_WS:
            key_end, value_start = idx, idx + 1
            break
        preceding_backslash = c == "\\" and not preceding_backslash
    while value_start < len(line):
        c = line[value_start]
        if c not in _PROPS_WS:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= len(s):
            break  # a lone backslash at the very end is dropped, as Java does
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROPS_ESCAPES.get(c, c))
    result = "".join(out)
    try:  # \uD83D\uDE00: Java strings are UTF-16, so a surrogate pair is one character
        return result.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return result


def _escape(s: str, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        if c == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        elif c in "=:#!\\":
            out.append("\\" + c)
        elif " " < c <= "~":
            out.append(c)
        else:
            units = c.encode("utf-16-be", "surrogatepass")
            out += [f"\\u{units[j]:02X}{units[j + 1]:02X}" for j in range(0, len(units), 2)]
    return "".join(out)
