"""Read YAML and JSON input files, keeping the line of every field so errors can point at it."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from cascade_plan.errors import InputError, format_path
from cascade_plan.inputs.limits import MAX_YAML_BYTES


class SourceDoc:
    """Parsed data plus a map from field path to 1-based line number."""

    def __init__(self, data: Any, lines: dict[tuple, int], file: str) -> None:
        self.data = data
        self.lines = lines
        self.file = file

    def line_of(self, path: tuple) -> int | None:
        # Walk up to the nearest ancestor with a known line (a missing field points at its parent).
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, path: tuple, message: str) -> InputError:
        return InputError(message, file=self.file, field=format_path(path) or None, line=self.line_of(path))


def _line_map(root: Any, file: str) -> dict[tuple, int]:
    """Field path -> line, walking the composed node graph without recursion (a tree's depth is the
    user's to choose). Refuses YAML aliases before anything expands them (a composed alias is the
    same node object reached twice: "billion laughs" would expand it exponentially) and duplicate
    keys (YAML keeps the last silently), naming both lines."""
    import yaml

    out: dict[tuple, int] = {}
    seen: set[int] = set()
    stack: list[tuple[Any, tuple, int]] = [(root, (), root.start_mark.line + 1)]
    while stack:
        node, path, line = stack.pop()
        if id(node) in seen:
            raise InputError("YAML aliases (*name) are not supported: write the value out", file=file,
                             field=format_path(path) or None, line=line)
        seen.add(id(node))
        out.setdefault(path, node.start_mark.line + 1)
        below: list[tuple[Any, tuple, int]] = []
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise InputError("YAML merge keys (<<) are not supported: write the fields out", file=file,
                                     field=format_path(path) or None, line=key_line)
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else f"<{key_node.id} key>"
                if key in first:
                    raise InputError(f"duplicate key {key!r} (first on line {first[key]}, again on line {key_line})",
                                     file=file, field=format_path(path + (key,)), line=key_line)
                first[key] = key_line
                out[path + (key,)] = key_line
                below.append((value_node, path + (key,), key_line))
        elif isinstance(node, yaml.SequenceNode):
            # an aliased item's own mark is its anchor's; report an alias at the list that uses it
            below = [(item, path + (i,), node.start_mark.line + 1 if id(item) in seen else item.start_mark.line + 1)
                     for i, item in enumerate(node.value)]
        stack.extend(reversed(below))      # document order, so an alias is reported where it is used
    return out


def check_reference(ref: str, what: str) -> None:
    """A built-in id or a file path, as written in a workload or on the command line."""
    if not ref.strip():
        raise InputError(f"{what} is empty: give a built-in {what} id or a path to a file")
    if "\0" in ref or len(ref) > 4096:
        raise InputError(f"{what} {ref[:60]!r} is not a valid id or file path")
    if max(map(len, ref.replace("\\", "/").split("/"))) > 63:   # 255 bytes of UTF-8 are 64 characters or more
        _check_name_lengths(ref, what)


def _check_name_lengths(ref: str, what: str) -> None:
    """stat() of a component longer than a file name can be fails with ENAMETOOLONG, which Path.exists() does
    not turn into False: refuse it as a reference instead of letting the OSError through."""
    from cascade_plan.outputs import NAME_MAX_BYTES  # file writing's module, imported only for such a name

    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in ref.replace("\\", "/").split("/"))
    if longest > NAME_MAX_BYTES:
        raise InputError(f"{what} {ref[:60]!r}... is not a valid id or file path: one of its names is {longest:,} "
                         f"bytes, longer than a file name can be ({NAME_MAX_BYTES})")


def _size(n: int) -> str:
    return f"{n:,} bytes ({n / 2**20:.1f} MiB)" if n >= 2**20 else f"{n:,} bytes"


def read_bytes_bounded(path: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`. Anything else (a folder, a FIFO, a device such as
    /dev/zero, a socket) is refused before it is opened (opening a FIFO blocks; a device never ends), and no
    more than max_bytes + 1 bytes are ever read, so a huge or growing file costs nothing to refuse."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what} file not found", file=str(path)) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {what} file: {getattr(exc, 'strerror', None) or exc}", file=str(path)) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} path is a directory, not a file", file=str(path))
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise InputError(f"{what} path is {kind}, not a regular file: give a file", file=str(path))
    if st.st_size > max_bytes:
        raise InputError(f"{what} file is {_size(st.st_size)}; cascade-plan reads {what} files up to "
                         f"{_size(max_bytes)}", file=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):        # swapped for something else since the stat
                raise InputError(f"{what} path is not a regular file: give a file", file=str(path))
            chunks, left = [], max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot read {what} file: {exc.strerror or exc}", file=str(path)) from None
    data = b"".join(chunks)
    if len(data) > max_bytes:                                   # grew since the stat
        raise InputError(f"{what} file is larger than {_size(max_bytes)}, the most cascade-plan reads",
                         file=str(path))
    return data


def read_text(path: Path, what: str, max_bytes: int = MAX_YAML_BYTES) -> str:
    data = read_bytes_bounded(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"cannot read {what} file: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start:,})", file=str(path), line=line) from None


def _count_mappings(text: str, loader_cls, path: Path, limit: int, what: str) -> None:
    """Refuse a file with more than `limit` mappings from the parser's event stream, before composing
    or constructing anything (the slow steps for a huge tree)."""
    import yaml

    n = 0
    for event in yaml.parse(text, Loader=loader_cls):
        if isinstance(event, yaml.MappingStartEvent):
            n += 1
            if n > limit:
                raise InputError(f"{what} has more than {limit:,} mappings (tree nodes); cascade-plan plans trees up "
                                 "to that size (merge sibling nodes of the same shape with `copies:`)", file=str(path),
                                 line=event.start_mark.line + 1)


def _loader_class():
    """PyYAML's safe loader (the C one where built) without YAML 1.1's base-60 numbers: `tokens: 1:30` would
    be 90 there, and 5400 for `1:30:00`; here it stays the text "1:30" (which a number field refuses), as
    YAML 1.2 reads it. Built once, on first use."""
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        # PyYAML's own int and float patterns (resolver.py) without their sexagesimal alternative
        no_base60 = {
            "tag:yaml.org,2002:int": re.compile(r"""^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+)$""", re.X),
            "tag:yaml.org,2002:float": re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X)}
        resolvers = {first: [(tag, no_base60.get(tag, regexp)) for tag, regexp in entries]
                     for first, entries in base.yaml_implicit_resolvers.items()}
        _LOADER = type("NoBase60Loader", (base,), {"yaml_implicit_resolvers": resolvers})
    return _LOADER


_LOADER = None


def load_yaml(path: Path, what: str = "YAML", max_mappings: int | None = None,
              max_bytes: int = MAX_YAML_BYTES) -> SourceDoc:
    import yaml

    text = read_text(path, what, max_bytes)
    loader_cls = _loader_class()
    try:
        if max_mappings is not None:
            _count_mappings(text, loader_cls, path, max_mappings, what)
        loader = loader_cls(text)
        try:
            root = loader.get_single_node()
            lines = _line_map(root, str(path)) if root is not None else {}   # before construction expands anything
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:
        line: int | None = text.count("\n", 0, max(exc.position, 0)) + 1
        char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        raise InputError(f"YAML syntax error: control character U+{char:04X} is not allowed in YAML text",
                         file=str(path), line=line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise InputError(f"YAML syntax error: {problem}", file=str(path), line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML syntax error: {exc}", file=str(path)) from None
    except RecursionError:
        raise InputError("YAML nesting is too deep to read", file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"{what} file must contain a mapping at the top level", file=str(path), line=1)
    return SourceDoc(data, lines, str(path))


def load_json(path: Path, what: str = "JSON", max_bytes: int = MAX_YAML_BYTES) -> SourceDoc:
    """A JSON object, as strict as the YAML reader: a key written twice in one object is refused naming
    the key (a parser keeps the last silently), NaN and Infinity are refused, and the file is capped."""
    text = read_text(path, what, max_bytes)
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise InputError(f"JSON syntax error: {exc.msg}", file=str(path), line=exc.lineno) from None
    except RecursionError:
        raise InputError("JSON nesting is too deep to read", file=str(path)) from None
    except _DuplicateKey as exc:
        raise InputError(f"duplicate key {exc.key!r} in one JSON object (JSON keeps the last silently; write each "
                         "field once)", file=str(path), field=exc.key, line=_second_line_of(text, exc.key)) from None
    except ValueError as exc:
        raise InputError(str(exc), file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"{what} file must contain a JSON object", file=str(path), line=1)
    return SourceDoc(data, {}, str(path))


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _second_line_of(text: str, key: str) -> int | None:
    """The line of the key's second occurrence, where the text makes it plain."""
    found = [m.start() for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
    return text.count("\n", 0, found[1]) + 1 if len(found) >= 2 else None


def _no_constant(name: str):
    raise ValueError(f"JSON syntax error: {name} is not a number (JSON has no NaN or Infinity)")


def parse_at(text: str) -> tuple:
    """'$.tree.children[0].tokens' -> ('tree', 'children', 0, 'tokens')."""
    path: list = []
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", text[1:]):
        path.append(int(index) if index else name)
    return tuple(path)


def _value_at(data: Any, path: tuple) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def validation_error(doc: SourceDoc, exc: Exception, prefix: tuple = ()) -> InputError:
    """Turn a msgspec ValidationError ('Expected `int` >= 1, got `0` - at `$.tree.copies`') into one
    InputError line with the field path and its line in the file."""
    msg = str(exc)
    path: tuple = ()
    key = re.search(r" - at `key` in `(\$[^`]*)`$", msg)
    match = re.search(r" - at `(\$[^`]*)`$", msg)
    if key:
        path = parse_at(key.group(1))
        container = _value_at(doc.data, path)
        bad = next((k for k in container if not isinstance(k, str)), None) if isinstance(container, dict) else None
        if bad is not None:
            path += (str(bad),)
        return doc.error(prefix + path, f"field names must be text, got the key {bad!r}")
    if match:
        msg, path = msg[: match.start()], parse_at(match.group(1))
    unknown = re.match(r"Object contains unknown field `([^`]*)`", msg)
    if unknown:
        path += (unknown.group(1),)
        msg = "unknown field (check the spelling; see the workload format in README.md)"
    missing = re.match(r"Object missing required field `([^`]*)`", msg)
    if missing:
        path += (missing.group(1),)
        msg = "required field is missing"
    return doc.error(prefix + path, msg)
