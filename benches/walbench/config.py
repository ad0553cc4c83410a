"""walrelay's native configuration, written by the drivers as a dict and
dumped as TOML, so that a variant can override any dotted key and an
option's TOML lines merge into it.

The drivers' virtualenv has a TOML reader (the standard library's
tomllib) and no writer, so this module is the one writer, for what the
drivers put in a configuration: tables (dicts), arrays of tables (lists of
dicts: `[[pipelines]]`), strings, integers, floats, booleans and arrays of
those. Every text it writes is read back with tomllib and must give the
dict it was made from. It never decides a setting: the drivers do.
"""

import json
import re
import tomllib

from . import BenchError

# Tables whose keys are free-form dotted names (librdkafka's), string-valued.
FREE_FORM_TABLES = ("kafka.producer",)


def scalar(text):
    """`0` -> 0, `true` -> True, `"x"` -> "x", anything else -> the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def value(v):
    """A value as TOML writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    # A JSON string without \u escapes of non-ASCII text is a TOML basic string.
    return json.dumps(str(v), ensure_ascii=False)


def key(k):
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def set_dotted(cfg, dotted, v):
    """cfg[a][b][c] = v for the key a.b.c; under a free-form table the rest
    of the path is one key (kafka.producer.linger.ms -> "linger.ms"), and
    its value a string."""
    parts, path, t = dotted.split("."), [], cfg
    while len(parts) > 1 and ".".join(path) not in FREE_FORM_TABLES:
        path.append(parts.pop(0))
        t = t.setdefault(path[-1], {})
        if not isinstance(t, dict):
            raise BenchError(f"{dotted}: {'.'.join(path)} is a value, not a table")
    free = ".".join(path) in FREE_FORM_TABLES
    t[".".join(parts)] = str(v) if free and not isinstance(v, str) else v


def merge(cfg, text, table=None):
    """Merges TOML `text` (an option's lines, `\\n` for a new line) into
    `cfg`, or into its table `table` (a top-level name): its keys win."""
    text = text.replace("\\n", "\n")
    try:
        extra = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"not TOML: {text!r}: {e}") from e
    merge_tables(cfg.setdefault(table, {}) if table else cfg, extra)


def merge_tables(into, extra):
    """`extra`'s keys into `into`, table by table: its values win."""
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge_tables(into[k], v)
        else:
            into[k] = v


def _is_table(v):
    return isinstance(v, dict)


def _is_table_array(v):
    return isinstance(v, list) and v and all(isinstance(x, dict) for x in v)


def dump(cfg):
    """The TOML text of `cfg`, checked by reading it back."""
    out = []

    def table(path, t, header):
        if header:
            out.append(header)
        out.extend(f"{key(k)} = {value(v)}" for k, v in t.items() if not _is_table(v) and not _is_table_array(v))
        for k, v in t.items():
            name = f"{path}.{key(k)}" if path else key(k)
            if _is_table(v):
                table(name, v, f"[{name}]")
            elif _is_table_array(v):
                for element in v:
                    table(name, element, f"[[{name}]]")
    table("", cfg, None)
    text = "\n".join(out) + "\n"
    if tomllib.loads(text) != cfg:
        raise BenchError(f"the TOML writer lost something:\n{text}")
    return text
