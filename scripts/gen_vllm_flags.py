"""Every command-line flag vLLM's ``vllm serve`` parser accepts, read from released wheels' source (hunt40 F1).

Usage:
    python scripts/gen_vllm_flags.py WHEEL [WHEEL ...]   # writes src/fitgate/workloads/data/vllm_flags.json

``fitgate plan`` takes a pasted ``vllm serve`` command. A flag fitgate does not read must not be a usage error when
vLLM itself accepts it (the first rule: say what was not read, never refuse for it), and a typo of a flag must not
be dropped silently: so the list of what vLLM accepts comes from vLLM's source, not from a hand-kept list. Read
statically with ``ast`` (no torch, no import of vLLM):

* the ``EngineArgs`` and ``AsyncEngineArgs`` dataclass fields (``engine/arg_utils.py``): each is ``--field-name``
  (``EngineArgs.add_cli_args`` builds one flag per field from the config classes' ``get_kwargs``); a ``bool`` field
  is a switch with its ``--no-`` twin, and from 0.34 an ``--enable-X`` switch also has ``--disable-X`` and a
  ``--disable-X`` switch ``--enable-X`` (``utils/argparse_utils.py`` 0.34.0 L120-140, ``EnableDisableAction``; the
  same for an explicit ``action=argparse.BooleanOptionalAction``, hunt70 F1);
* the frontend dataclasses' fields (``entrypoints/openai/cli_args.py`` up to 0.33, ``entrypoints/common/cli_args.py``
  in 0.34: ``FrontendArgs``, ``BaseFrontendArgs``), the same way;
* every string literal given to ``add_argument`` as a flag name (aliases such as ``-tp``, ``-sc``, ``--spec-method``),
  taken as valued unless the call says ``action="store_true"`` / ``"store_false"``.

The output is the union over the wheels given (older releases' flags stay accepted: a command written for 0.6 still
runs there), each flag with whether it takes a value.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "fitgate" / "workloads" / "data" / "vllm_flags.json"
SOURCES = (
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/cli/serve.py",
    "vllm/utils/argparse_utils.py",
)
ARG_CLASSES = frozenset({"EngineArgs", "AsyncEngineArgs", "FrontendArgs", "BaseFrontendArgs"})


def _is_bool(annotation: ast.expr | None) -> bool:
    text = ast.unparse(annotation) if annotation is not None else ""
    return text in ("bool", "bool | None", "Optional[bool]")


def flags_of(source: str, enable_disable: bool) -> dict[str, bool]:
    """{flag: takes a value} of one source file."""
    tree = ast.parse(source)
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in ARG_CLASSES:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    if name.startswith("_"):
                        continue
                    flag = "--" + name.replace("_", "-")
                    if _is_bool(item.annotation):
                        out.update(dict.fromkeys(_switch_spellings(flag, enable_disable), False))
                    else:
                        out.setdefault(flag, True)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            action = next((k.value for k in node.keywords if k.arg == "action"), None)
            switch = isinstance(action, ast.Constant) and action.value in ("store_true", "store_false")
            optional = action is not None and ast.unparse(action).endswith("BooleanOptionalAction")
            # an alias registered with the field's own kwargs (`"--data-parallel-hybrid-lb", "-dph",
            # **parallel_kwargs[...]`, arg_utils.py 0.34.0 L1299-1308) is what its field is: a bool field's alias is a
            # switch too (hunt93 F3: -dph / -dpe were recorded as taking a value and swallowed the model)
            known = [out[n] for n in names if n in out]
            same = known[0] if known and action is None else not switch
            for name in names:
                if name.startswith("-") and len(name) > 1:
                    if optional:  # every spelling BooleanOptionalAction (from 0.34 EnableDisableAction) accepts
                        out.update(dict.fromkeys(_switch_spellings(name, enable_disable), False))
                    else:
                        out.setdefault(name, same)
    return out


def _switch_spellings(flag: str, enable_disable: bool) -> list[str]:
    """A boolean flag's spellings: itself and ``--no-`` (``BooleanOptionalAction``), and from 0.34 its inverse.

    ``--enable-X`` for ``--disable-X`` and back (``utils/argparse_utils.py`` 0.34.0 L120-140 ``EnableDisableAction``,
    registered for every ``BooleanOptionalAction`` at L179).
    """
    out = [flag, "--no-" + flag[2:]] if flag.startswith("--") else [flag]
    if enable_disable:
        for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
            if flag.startswith(prefix):
                out.append(inverse + flag[len(prefix) :])
    return out


def main(wheels: list[str]) -> int:
    """Write the union of the wheels' flags to :data:`OUT`."""
    if not wheels:
        print(__doc__, file=sys.stderr)
        return 2
    flags: dict[str, bool] = {}
    releases: list[str] = []
    for wheel in wheels:
        version = Path(wheel).name.split("-")[1]
        releases.append(version)
        enable_disable = tuple(int(p) for p in version.split(".")[:2]) >= (0, 34)
        with zipfile.ZipFile(wheel) as z:
            for name in SOURCES:
                if name in z.namelist():
                    for flag, valued in flags_of(z.read(name).decode(), enable_disable).items():
                        flags[flag] = flags.get(flag, valued) or valued
    doc = {
        "_comment": "vLLM's `vllm serve` flags (true: takes a value), the union over the releases listed; generated "
        "by scripts/gen_vllm_flags.py from the wheels' source. fitgate takes a flag of this list that it does not "
        "read with a note, and refuses any other unknown flag (a typo).",
        "releases": sorted(set(releases), key=lambda v: tuple(int(p) for p in v.split(".")[:3] if p.isdigit())),
        "flags": dict(sorted(flags.items())),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(flags)} flags from {len(releases)} wheels -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
