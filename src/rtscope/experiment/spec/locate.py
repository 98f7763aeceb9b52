"""Source lines of a spec's keys and values: tomllib gives no positions, so `Locator` scans the TOML text."""

from __future__ import annotations

import re
import tomllib
from bisect import bisect_right


class Locator:
    """Line numbers of the keys, tables and array elements of a (valid) TOML text.

    Paths are tuples as in the parsed document: ("workload", 1, "settings", "governor", 0) is the first
    value of the governor list in the second [[workload]] block.
    """

    _BARE = re.compile(r"[A-Za-z0-9_-]+")

    def __init__(self, text: str):
        self.text = text
        self.lines: dict[tuple, int] = {}
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._arrays: dict[tuple, int] = {}
        try:
            self._scan()
        except (IndexError, ValueError, tomllib.TOMLDecodeError):
            pass  # positions are a help for messages; a construct not understood here costs only precision

    def line(self, path: tuple | list) -> int | None:
        """The line of `path`, else of its nearest ancestor that has one."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def _line_at(self, pos: int) -> int:
        return bisect_right(self._starts, pos)

    def _record(self, path: tuple, pos: int) -> None:
        self.lines.setdefault(path, self._line_at(pos))

    def _skip(self, pos: int, newlines: bool) -> int:
        t = self.text
        while pos < len(t):
            c = t[pos]
            if c in " \t\r" or (newlines and c == "\n"):
                pos += 1
            elif c == "#":
                while pos < len(t) and t[pos] != "\n":
                    pos += 1
            else:
                break
        return pos

    def _key(self, pos: int) -> tuple[tuple, int]:
        """A dotted key starting at pos: (parts, position after it)."""
        t, parts = self.text, []
        while True:
            pos = self._skip(pos, False)
            if t[pos] in "\"'":
                end = self._string_end(pos)
                parts.append(tomllib.loads(f"k = {t[pos:end]}")["k"])
                pos = end
            else:
                m = self._BARE.match(t, pos)
                if not m:
                    raise ValueError("no key")
                parts.append(m.group())
                pos = m.end()
            pos = self._skip(pos, False)
            if pos < len(t) and t[pos] == ".":
                pos += 1
                continue
            return tuple(parts), pos

    def _string_end(self, pos: int) -> int:
        t = self.text
        for quote in ('"""', "'''"):
            if t.startswith(quote, pos):
                i = pos + 3
                while True:
                    if quote == '"""' and t[i] == "\\":
                        i += 2
                        continue
                    if t.startswith(quote, i):
                        i += 3
                        while i < len(t) and t[i] == quote[0]:  # up to two quotes may end the content
                            i += 1
                        return i
                    i += 1
        q, i = t[pos], pos + 1
        while t[i] != q:
            i += 2 if (q == '"' and t[i] == "\\") else 1
        return i + 1

    def _value(self, pos: int, path: tuple) -> int:
        t = self.text
        c = t[pos]
        if c in "\"'":
            return self._string_end(pos)
        if c == "[":
            pos, i = pos + 1, 0
            while True:
                pos = self._skip(pos, True)
                if t[pos] == "]":
                    return pos + 1
                self._record(path + (i,), pos)
                pos = self._skip(self._value(pos, path + (i,)), True)
                i += 1
                if t[pos] == ",":
                    pos += 1
        if c == "{":
            pos += 1
            while True:
                pos = self._skip(pos, False)
                if t[pos] == "}":
                    return pos + 1
                keys, pos = self._key(pos)
                self._record(path + keys, pos)
                pos = self._skip(pos, False) + 1  # '='
                pos = self._skip(self._value(self._skip(pos, False), path + keys), False)
                if t[pos] == ",":
                    pos += 1
        m = re.compile(r"[^,\]}\n#]*").match(t, pos)
        return m.end()

    def _resolve(self, keys: tuple) -> tuple:
        out: tuple = ()
        for k in keys:
            out += (k,)
            if out in self._arrays:
                out += (self._arrays[out],)
        return out

    def _scan(self) -> None:
        t, pos, current = self.text, 0, ()
        while True:
            pos = self._skip(pos, True)
            if pos >= len(t):
                return
            start = pos
            if t.startswith("[[", pos):
                keys, pos = self._key(pos + 2)
                table = self._resolve(keys[:-1]) + (keys[-1],)
                self._arrays[table] = self._arrays.get(table, -1) + 1
                current = table + (self._arrays[table],)
                self._record(table, start)
                self._record(current, start)
                pos += 2
            elif t[pos] == "[":
                keys, pos = self._key(pos + 1)
                current = self._resolve(keys)
                self._record(current, start)
                pos += 1
            else:
                keys, pos = self._key(pos)
                path = current + keys
                self._record(path, start)
                pos = self._skip(pos, False) + 1  # '='
                pos = self._value(self._skip(pos, False), path)
