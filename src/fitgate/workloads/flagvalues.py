"""The values of vLLM's flags as its parser reads them: human-readable integers, dotted JSON keys, config files.

Pure functions over strings (no I/O), used by :mod:`fitgate.workloads.argv` and the readers of other kinds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fitgate.sizing.jsonflags import HUMAN_SUFFIXES, expand_human_numbers
from fitgate.sizing.versions import parse_version
from fitgate.workloads.vllm_flags import ALIASES, SPLIT_SPECULATIVE, canonical, vllm_flags


def long_flag(key: str) -> str:
    """``--key`` with underscores read as dashes before any dot, as vLLM's parser reads a flag's name."""
    head, dot, tail = key.partition(".")
    return "--" + head.replace("_", "-") + dot + tail


#: The most keys a dotted flag nests (``--a.b.c``: 2); deeper ones are left out (no vLLM config is that deep).
MAX_DOTTED_DEPTH = 8


def merge_dotted(dotted: dict[str, dict[str, Any]], name: str, text: str) -> None:
    """``--json-flag.key.sub value`` merged into that flag's JSON object, as vLLM's ``FlexibleArgumentParser``.

    The value is JSON if it parses, else a human-readable integer (``80g``), else the string; ``--flag.key+ a,b``
    is the list ``["a", "b"]``, appended to one already there (vllm/utils/argparse_utils.py 0.34.0 L410-499).
    """
    value: Any
    if name.endswith("+"):
        name, value = name[:-1], text.split(",")
    else:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            number = human_int(text)
            value = text if number is None else number
    head, *keys = name.split(".")
    if not keys or len(keys) > MAX_DOTTED_DEPTH or not all(keys):
        return
    node = dotted.setdefault(head, {})
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    last = keys[-1]
    if isinstance(value, list) and isinstance(node.get(last), list):
        node[last] = [*node[last], *value]
    else:
        node[last] = value


def with_keys(text: str | None, keys: dict[str, Any]) -> str:
    """``keys`` set in the JSON object ``text`` (a flag's whole JSON; not one: an empty one), as JSON.

    vLLM sets the split speculative flags' keys in the ``--speculative-config`` JSON beside them (engine/arg_utils.py
    0.34.0 L2140-2154).
    """
    try:
        data = json.loads(expand_human_numbers(text)) if text and len(text) <= 65536 else None
    except (ValueError, RecursionError):
        data = None
    return json.dumps({**(data if isinstance(data, dict) else {}), **keys})


#: The first release whose ``--config`` file turns a switch off with ``key: false`` (vLLM PR 51573), where the parser
#: reading the file is the one holding the switch: ``python -m vllm.entrypoints.openai.api_server``'s, not ``vllm
#: serve``'s top-level parser (hunt101 F1).
FALSE_SWITCHES_FROM = (0, 28, 0)


def reads_false_switches(how: str, release: str | None) -> bool:
    """Whether a ``--config`` file's ``key: false`` turns the switch off for this invocation and release.

    ``vllm serve`` expands ``--config`` in its top-level parser (entrypoints/cli/main.py 0.34.0 L88-110,
    utils/argparse_utils.py L372 -> L561 -> L657), whose option table holds none of ``serve``'s ``--no-*``
    switches: the key is dropped in every release. The API server's own parser holds them from 0.28.0.
    """
    return "api_server" in how and (release is None or parse_version(release) >= FALSE_SWITCHES_FROM)


def config_file_flags(data: object, *, falses: bool = False, resolve: Callable[[str], str] = str) -> dict[str, str]:
    """The flags of a ``--config`` YAML mapping, read as vLLM 0.34 does.

    Each key is a flag (``key: value`` -> ``--key value``; ``key: true`` -> ``--key``, so ``no-key: true`` is
    ``--no-key``, the switch off, read by the subcommand's parser; a mapping is its JSON), vllm/utils/argparse_utils.py
    0.34.0 ``load_config_file`` L653-673. ``key: false`` is dropped unless ``falses`` (:func:`reads_false_switches`;
    Ray Serve's ``engine_kwargs``, keyword arguments of the engine, always): then a switch written with dashes is off
    (``--no-key`` registered, L657-658). A false value of a flag that takes a value is left out, as vLLM does.
    ``resolve``: a key's flag as the parser reads it (the argv's unique prefixes: hunt100 F2, `max-model: 8192`).
    """
    flags: dict[str, str] = {}
    if not isinstance(data, dict):
        return flags
    dotted: dict[str, dict[str, Any]] = {}
    split: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        name = resolve(long_flag(str(key)))
        if "." in name or name in SPLIT_SPECULATIVE:  # `speculative-config.method: mtp`, `spec-tokens: 3`: as on the
            # command line, vLLM folds a dotted key (hunt94 F2) and sets a split one in the JSON beside it (hunt95 F2)
            text = value if isinstance(value, str) else json.dumps(value)
            merge_dotted(split if name in SPLIT_SPECULATIVE else dotted, ALIASES.get(name, name), text)
            continue
        if isinstance(value, bool):
            if value and (switch := canonical(name)).startswith("--no-"):  # hunt99 F1: `no-enable-prefix-caching:
                flags["--" + switch[5:]] = (
                    "false"  # true`, as the recipes write; 0.34's `disable-chunked-prefill: true`
                )
            elif value:
                flags[name] = "true"
            elif (
                falses
                and vllm_flags().get(written := long_flag(str(key))) is False
                and "_" not in str(key)
                and not (written.startswith("--no-"))
            ):
                # the key as written, not its unique prefix resolved: vLLM looks up `--no-KEY` exactly (hunt102 F6)
                flags[name] = "false"
            continue
        if isinstance(value, dict):  # nested dicts become JSON (``--speculative-config`` ...), as in vLLM
            flags[name] = json.dumps(value)
            continue
        flags[name] = " ".join(str(v) for v in value) if isinstance(value, list) else str(value)
    for head, tree in dotted.items():  # after the file's other keys, as vLLM appends them: they replace a whole JSON
        flags[head] = json.dumps(tree)
    for head, tree in split.items():
        flags[head] = with_keys(flags.get(head), tree)
    return flags


def human_int(text: str) -> int | None:
    """Like vLLM's ``human_readable_int``: ``32768``, ``32k`` (x1000), ``32K`` (x1024); None when not one.

    vllm/utils/argparse_utils.py 0.33.0 L30-74.
    """
    text = text.strip()
    m = re.fullmatch(r"(\d{1,18}(?:\.\d{1,18})?)([kKmMgGtT])", text)  # bounded: no int of 5,000 digits
    if m:
        number, suffix = m.groups()
        return int(float(number) * HUMAN_SUFFIXES[suffix])
    n = python_int(text)
    return n if n is not None and abs(n) < INT_LIMIT else None


#: Most characters of a whole number read as Python's ``int()`` reads it: int() of 5,000 digits is refused, and
#: slow well before that (issue 22); 32 holds 18 digits with a sign, underscores and blanks.
MAX_INT_CHARS = 32
#: Whole numbers fitgate reads are below 10**18 (18 digits); a larger one is Unknown, never Invalid.
INT_LIMIT = 10**18


def python_int(text: str) -> int | None:
    """``int(text)``, as vLLM's argparse reads a whole number, or None where int() refuses it.

    vLLM parses ``--tensor-parallel-size`` with ``type=int`` and ``human_readable_int`` ends in ``int(value)``
    (vllm/utils/argparse_utils.py 0.34 L30-74): ``+4096``, ``4_096`` and surrounding blanks are accepted (hunt83
    F9: fitgate said Invalid). Only a text of at most :data:`MAX_INT_CHARS` characters is converted.
    """
    if len(text) > MAX_INT_CHARS:
        return None
    try:
        return int(text)
    except ValueError:
        return None
