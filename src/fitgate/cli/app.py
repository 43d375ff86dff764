"""The entry point: parse, run the subcommand, and turn every error into one line and an exit code."""

from __future__ import annotations

import json
import os
import re
import string
import sys
from collections.abc import Sequence
from typing import Any

from fitgate.checkpoints import CheckpointError
from fitgate.cli.catalog import cmd_catalog, cmd_gpus
from fitgate.cli.cluster import cmd_check, cmd_operator
from fitgate.cli.compare import cmd_compare
from fitgate.cli.exits import EXIT_CLOSED_PIPE, EXIT_INTERNAL, EXIT_UNKNOWN, EXIT_USAGE
from fitgate.cli.parser import build_parser
from fitgate.cli.passthrough import note as passthrough_note
from fitgate.cli.passthrough import passthrough
from fitgate.cli.plan import cmd_plan
from fitgate.cli.plan_pd import cmd_plan_pd
from fitgate.cli.recommend import cmd_recommend
from fitgate.settings import SettingsError, load
from fitgate.sizing import SizingError, UnknownArchitectureError
from fitgate.sizing.errors import NotModelledError, ReleaseUnknownError
from fitgate.sizing.reasons import ReasonCode
from fitgate.sizing.versions import release_modelled
from fitgate.workloads.argv import long_name
from fitgate.workloads.bounds import configure as configure_budgets
from fitgate.workloads.flagvalues import merge_dotted, with_keys
from fitgate.workloads.vllm_flags import ALIASES, SPLIT_SPECULATIVE, canonical, vllm_flags


def _debug() -> bool:
    try:
        return load().debug
    except SettingsError:
        return False


def _closed_pipe() -> int:
    """The reader of stdout went away: stop quietly, as Unix tools do (no message: nobody reads it).

    stdout is pointed at /dev/null so that the interpreter's last flush at exit does not fail again
    (the Python documentation's recipe, "Note on SIGPIPE" in the signal module).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout with no file behind it (io.UnsupportedOperation is both)
        pass
    return EXIT_CLOSED_PIPE


def fold_dotted(argv: Sequence[str]) -> list[str]:
    """The dotted JSON flags of vLLM (``--limit-mm-per-prompt.video 0``) folded into their flag's JSON.

    As vLLM's ``FlexibleArgumentParser`` reads them (utils/argparse_utils.py 0.34.0 L410-499, the merge in
    :func:`fitgate.workloads.flagvalues.merge_dotted`): the keys of one flag make one JSON object, appended after
    every other word, so it replaces a whole JSON value given for the same flag (hunt94 F6); a short head is its long
    flag (``-cc.cudagraph_mode``, ``-sc.method``: hunt94 F3, F4).
    """
    out: list[str] = []
    dotted: dict[str, dict[str, Any]] = {}
    split: dict[str, dict[str, Any]] = {}  # --spec-method / --spec-model / --spec-tokens (hunt95 F1)
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        name, eq, value = word.partition("=")
        is_split = name in SPLIT_SPECULATIVE
        if not is_split and (
            not (name.startswith("-") and name[1:2] in ("-", *string.ascii_letters) and "." in name) or word == "--"
        ):
            out.append(word)
            continue
        if not eq:
            value = words[i] if i < len(words) else ""
            i += 1
        merge_dotted(split if is_split else dotted, long_name(name), value)
    for head, tree in dotted.items():
        out += [head, json.dumps(tree)]
    for (
        head,
        tree,
    ) in split.items():  # set in the JSON beside them, as vLLM does (engine/arg_utils.py 0.34.0 L2140-2154)
        at = len(out) - 1 - out[::-1].index(head) if head in out else -1
        out += [head, with_keys(out[at + 1] if 0 <= at < len(out) - 1 else None, tree)]
    return out


#: The commands whose answer is a verdict: for them a setting or an architecture fitgate does not size is Unknown.
VERDICT_COMMANDS = frozenset({"plan", "recommend", "plan-pd", "compare"})


def _unknown(args: Any, exc: SizingError | CheckpointError) -> int:
    """A setting vLLM takes, or an architecture, that fitgate does not size: the verdict is Unknown, not an error.

    The first rule (hunt26 F2): ``check`` and the webhook answer Unknown for these; the CLI said "error" and exit 2,
    which reads as a denial of a flag vLLM accepts. So is a checkpoint the Hub cannot be reached for (hunt105: exit 2
    where ``check`` says Unknown): nothing about the deployment is wrong. ``plan --output json`` gets a
    ``fitgate.io/plan/v1`` document with only the fields known without a plan (docs/plan-json.md).
    """
    code = (
        ReasonCode.RELEASE_UNKNOWN
        if isinstance(exc, ReleaseUnknownError)
        else ReasonCode.SETTINGS_NOT_MODELLED
        if isinstance(exc, NotModelledError)
        else ReasonCode.ARCHITECTURE_NOT_SIZED
        if isinstance(exc, UnknownArchitectureError)
        else ReasonCode.CHECKPOINT_UNAVAILABLE
        if isinstance(exc, CheckpointError)
        else ReasonCode.CHECKPOINT_INVALID
    )
    message = str(exc)
    if getattr(args, "output", "text") == "json":
        doc = {
            "schema": "fitgate.io/plan/v1",
            "model": {"name": getattr(args, "model", None)},
            "gpu": {"name": getattr(args, "gpu", None)},
            "vllm_version": getattr(args, "vllm_version", None),
            "verdict": "Unknown",
            "reasons": [{"code": str(code), "message": message}],
            "notes": [
                "not sized: the checkpoint could not be read"
                if isinstance(exc, CheckpointError)
                else "not sized: fitgate does not model this; vLLM may well run it"
            ],
        }
        print(json.dumps(doc, indent=2))
    else:
        why = "could not read this checkpoint" if isinstance(exc, CheckpointError) else "does not size this"
        print(f"verdict: Unknown ({code})\n  {message}\n  fitgate {why}, so it neither admits nor denies it")
    sys.stdout.flush()
    return EXIT_UNKNOWN


_FLAG_NAME = re.compile(r"(?<=--)[^.=]*")
_BOOLEAN_VALUE = re.compile(r"--(enable-[a-z0-9-]+)=(true|false)", re.IGNORECASE)


def vllm_spelling(words: Sequence[str]) -> list[str]:
    """Flags as vLLM's own parser reads them (hunt32 F1).

    ``_`` is ``-`` in a flag's name up to its first ``.`` (``--max_num_seqs``, ``--speculative_config.method``:
    ``FlexibleArgumentParser.parse_args``, vllm 0.34.0 ``utils/argparse_utils.py`` L374-393), and 0.5-0.6's
    ``--enable-X=False`` / ``--enable-X False`` is ``--no-enable-X``; 0.34's ``--disable-X`` of an ``--enable-X``
    switch is ``--no-enable-X``, and its split speculative flags (``--spec-method mtp --spec-tokens 3``) are the
    speculative config's keys (hunt40 F1/F2).
    """
    out: list[str] = []
    for word in words:
        if word in ("None", "") and out and _unset_by(out[-1]):
            out.pop()  # hunt107 F5: vLLM reads None or '' as the flag unset (engine/arg_utils.py 0.34.0 L173-178)
            continue
        if word.startswith("--") and word.partition("=")[2] in ("None", "") and word.endswith(("=None", "=")):
            continue  # --quantization=None, --kv-offloading-size=: as unset, as a Helm template's empty value
        if out and word.lower() in ("true", "false") and _BOOLEAN_VALUE.fullmatch(f"{out[-1]}={word}"):
            # 0.5-0.6's StoreBoolean took the value as the next word too: --enable-chunked-prefill False (hunt36 F2)
            flag = out.pop().removeprefix("--")
            out.append(f"--{flag}" if word.lower() == "true" else f"--no-{flag}")
            continue
        spelled = word
        if word.startswith("--"):
            key, eq, value = word.partition("=")
            spelled = _FLAG_NAME.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + eq + value
            if spelled.partition("=")[0] == "--cuda-graph-sizes":  # vLLM's older name (hunt35 F2)
                spelled = "--cudagraph-capture-sizes" + spelled[len("--cuda-graph-sizes") :]
            name, eq, value = spelled.partition("=")
            if name not in SPLIT_SPECULATIVE:  # --spec-tokens stays: fold_dotted merges it into the JSON beside it
                spelled = canonical(name) + eq + value
            m = _BOOLEAN_VALUE.fullmatch(spelled)
            if m:
                spelled = f"--{m.group(1)}" if m.group(2).lower() == "true" else f"--no-{m.group(1)}"
        elif word in ALIASES:  # -sc
            spelled = ALIASES[word]
        out.append(spelled)
    return out


def _unset_by(flag: str) -> bool:
    """Whether ``flag`` (already spelled as vLLM reads it) is a vLLM flag taking a value that None or '' unsets."""
    return flag.startswith("--") and "=" not in flag and vllm_flags().get(flag, False)


def _flag_words(words: Sequence[str]) -> list[str]:
    """``--flag value`` words joined as one (a flag's value is the words up to the next flag)."""
    out: list[str] = []
    for word in words:
        if word.startswith("--") or not out:
            out.append(word[:80])
        else:
            out[-1] = f"{out[-1]} {word[:60]}"
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fitgate`` console script."""
    parser = build_parser()
    args, extra = parser.parse_known_args(fold_dotted(vllm_spelling(sys.argv[1:] if argv is None else argv)))
    if extra and args.command not in VERDICT_COMMANDS - {"compare"}:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    handlers = {
        "plan": cmd_plan,
        "plan-pd": cmd_plan_pd,
        "recommend": cmd_recommend,
        "compare": cmd_compare,
        "catalog": cmd_catalog,
        "gpus": cmd_gpus,
        "check": cmd_check,
        "operator": cmd_operator,
    }
    try:
        configure_budgets(load().budgets)  # a bad FITGATE_*/HF_* value stops any command at once, in one line
        # a pasted `vllm serve` command's flags that do not change the plan are taken and said (hunt28 F3)
        taken, left = passthrough(extra)
        given = getattr(args, "vllm_version", None)
        if left and given and not release_modelled(given) and left[0].startswith("--"):
            # hunt110 F2: on a release newer than fitgate models, a flag it does not know may be that release's:
            # taken, said, and a misfit with it is Unknown (cli/plan.py), never a usage error
            taken, left = [*taken, *(f"{w} (not modelled)" for w in _flag_words(left))], []
        if left:
            parser.error(f"unrecognized arguments: {' '.join(left)}")
        args.ignored_vllm_flags = taken
        if taken and args.command != "plan":  # plan puts it in its notes
            print(f"fitgate: note: {passthrough_note(taken)}", file=sys.stderr)
        code = handlers[args.command](args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is seen below
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except (NotModelledError, UnknownArchitectureError) as exc:
        if args.command in VERDICT_COMMANDS:
            return _unknown(args, exc)
        print(f"fitgate: error: {exc}", file=sys.stderr)  # catalog add: nothing to add that fitgate cannot size
        return EXIT_USAGE
    except CheckpointError as exc:
        if exc.transient and args.command in VERDICT_COMMANDS:  # the Hub unreachable, offline: nothing to size
            return _unknown(args, exc)
        print(f"fitgate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SizingError, SettingsError) as exc:
        print(f"fitgate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a bug: say so in one line unless debugging
        if _debug():
            raise
        print(
            f"fitgate: internal error: {type(exc).__name__}: {exc} (set FITGATE_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
