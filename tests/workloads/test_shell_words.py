"""hunt74 F1 / F2: a container script's unquoted ``$VAR`` is split into fields, and an ``if`` branch not taken sets
nothing, as the shell runs them (bash(1), "Word Splitting" and "Compound Commands")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from fitgate.workloads import bounds, read_workload
from fitgate.workloads.argv import find_engine_command
from fitgate.workloads.bounds import MAX_SCRIPT_BYTES
from fitgate.workloads.shellwords import OPEN, evaluate_test, mark_unquoted, split_fields

FIXTURE = Path(__file__).parents[1] / "fixtures" / "workloads" / "llmisvc-dp-ep-qwen3-multi-node.yaml"


def flags_of(script: str, env: dict[str, str] | None = None) -> dict[str, str]:
    engine = find_engine_command(["/bin/sh", "-c"], [script], env or {}, image_entrypoint=False)
    assert engine is not None
    return dict(engine.flags)


def undecided_of(script: str, env: dict[str, str] | None = None) -> tuple[str, ...]:
    engine = find_engine_command(["/bin/sh", "-c"], [script], env or {}, image_entrypoint=False)
    assert engine is not None
    return engine.undecided


def test_an_unquoted_variable_holding_flags_is_several_words_and_a_quoted_one_is_one() -> None:
    # llm-d's GLM-5.2 wide-EP guide builds its args in variables and runs `vllm serve ... $ARGS` (hunt74 F1: Invalid,
    # "one word holding a space"): the shell gives vLLM two words per "--flag value"
    script = 'X="--max-model-len 4096 --gpu-memory-utilization 0.9"; exec vllm serve Qwen/Qwen3-8B $X'
    flags = flags_of(script)
    assert flags["--max-model-len"] == "4096" and flags["--gpu-memory-utilization"] == "0.9"
    assert flags_of('X="-tp 2"; exec vllm serve Qwen/Qwen3-8B ${X}')["--tensor-parallel-size"] == "2"
    # quoted, the shell passes one word, which vLLM's parser refuses: still refused
    from fitgate.workloads.shellscript import CommandError  # noqa: PLC0415

    with pytest.raises(CommandError, match="one word holding a space"):
        flags_of('X="--max-model-len 4096"; exec vllm serve Qwen/Qwen3-8B "$X"')
    # an assignment's value is not split; an empty unquoted expansion is no word at all
    assert flags_of('A="4096 x"; B=$A; exec vllm serve M --served-model-name "$B" $EMPTY', {"EMPTY": ""}) == {
        "--served-model-name": "4096 x"
    }


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("vllm serve $M", f"vllm serve {OPEN}$M\x02"),
        ('vllm serve "$M" ${N:-x}', f'vllm serve "$M" {OPEN}${{N:-x}}\x02'),
        ("echo '$M' \\$N $1 $@", "echo '$M' \\$N $1 $@"),  # single-quoted, escaped, positional: left alone
    ],
)
def test_which_references_are_unquoted(text: str, marked: str) -> None:
    assert mark_unquoted(text) == marked


def test_fields_join_literal_text_and_drop_empty_expansions() -> None:
    assert split_fields(f"--a={OPEN}1 2\x02") == ["--a=1", "2"]
    assert split_fields(f"{OPEN}\x02") == []
    assert split_fields(f"--x={OPEN}\x02") == ["--x="]
    assert split_fields("plain word") == ["plain word"]


@pytest.mark.parametrize(
    ("env", "utilization"),
    [
        ({"ENABLE_PROFILER": "true"}, "0.3"),  # the branch is taken
        ({"ENABLE_PROFILER": "false", "NEVER": ""}, "0.95"),  # the else branch
        # a test on a variable not known here (the image or a ConfigMap may set it) is undecided: a variable its
        # branches set is undecided, and a command that uses it Unknown (hunt75 D1-D4: dropping it, or taking one
        # branch's value, sized `vllm serve M $ARGS` on a guess; both were false denials)
        ({"ENABLE_PROFILER": "false"}, "undecided"),
        ({}, "undecided"),
    ],
)
def test_an_assignment_in_an_if_branch_counts_only_when_the_branch_runs(
    env: dict[str, str], utilization: str | None
) -> None:
    # hunt74 F2: the guide's PROFILER_ARGS / SPEC_ARGS were applied whatever their condition
    script = (
        'ARGS=""\n'
        'if [ "$ENABLE_PROFILER" = "true" ]; then\n  ARGS="--gpu-memory-utilization 0.3"\n'
        'elif [ -n "$NEVER" ]; then\n  ARGS="--gpu-memory-utilization 0.5"\n'
        'else\n  ARGS="--gpu-memory-utilization 0.95"\nfi\n'
        "exec vllm serve Qwen/Qwen3-8B --max-model-len 4096 $ARGS"
    )
    if utilization == "undecided":
        assert undecided_of(script, env) == ("ARGS",)
    else:
        assert flags_of(script, env).get("--gpu-memory-utilization") == utilization and not undecided_of(script, env)


def test_a_command_inside_an_undecided_branch_is_still_read_and_one_not_taken_is_not() -> None:
    assert flags_of("if [ -f /models/ready ]; then exec vllm serve M --max-model-len 1024; fi") == {
        "--max-model-len": "1024"
    }
    script = 'if [ "$ROLE" = "decode" ]; then vllm serve A --max-model-len 1; else vllm serve B --max-model-len 2; fi'
    assert flags_of(script, {"ROLE": "prefill"})["--max-model-len"] == "2"
    assert flags_of(script, {"ROLE": "decode"})["--max-model-len"] == "1"


@pytest.mark.parametrize(
    ("size", "utilization"),
    [("1", "0.95"), ("2", "0.80")],
)
def test_an_if_on_tests_joined_by_and_is_decided_by_both(size: str, utilization: str) -> None:
    # llm-d's GLM-5.2 decode script: `if [ "${ENABLE_DSPARK:-0}" = "1" ] && [ "${LWS_GROUP_SIZE:-1}" -gt 1 ]`; with
    # DSPARK on and a group of one the branch does not run (hunt74: its GPU_MEM_UTIL was taken as set)
    script = (
        'if [ "${LWS_GROUP_SIZE:-1}" -gt 1 ]; then U=0.80; else U=0.95; fi\n'
        'if [ "${ENABLE_DSPARK:-0}" = "1" ] && [ "${LWS_GROUP_SIZE:-1}" -gt 1 ]; then EXTRA="--max-num-seqs 8"; fi\n'
        "exec vllm serve M --gpu-memory-utilization $U $EXTRA"
    )
    flags = flags_of(script, {"ENABLE_DSPARK": "1", "LWS_GROUP_SIZE": size})
    assert flags["--gpu-memory-utilization"] == utilization
    assert flags.get("--max-num-seqs") == (None if size == "1" else "8")
    # || : either test
    either = 'if [ "$A" = "1" ] || [ "$B" = "1" ]; then X="-tp 2"; fi; exec vllm serve M $X'
    assert flags_of(either, {"A": "0", "B": "1"})["--tensor-parallel-size"] == "2"
    assert "--tensor-parallel-size" not in flags_of(either, {"A": "0", "B": "0"})


@pytest.mark.parametrize(
    ("words", "value"),
    [
        (["[", "a", "=", "a", "]"], True),
        (["[[", "a", "!=", "a", "]]"], None),  # [[ ]]: a pattern in bash, missing in dash (hunt75 D2 / D4)
        (["[", "a", "==", "a", "]"], None),  # dash refuses ==
        (["[", "-n", f"{OPEN}\x02", "]"], True),  # `[ -n $EMPTY ]` is `[ -n ]`, true (hunt75 D5)
        (["test", "-z", ""], True),
        (["!", "[", "-n", "x", "]"], False),
        (["true"], True),
        (["[", "-f", "/x", "]"], None),  # a file test: not decided here
        (["[", "$UNSET", "=", "1", "]"], None),  # a variable not known
        (["grep", "-q", "x", "f"], None),
    ],
)
def test_plain_tests_are_evaluated_and_others_left_undecided(words: list[str], value: bool | None) -> None:
    assert evaluate_test(words) is value


def test_an_undecided_branch_keeps_its_flags_and_a_brace_group_if_is_a_block() -> None:
    # hunt75 D1: `if command -v nvidia-smi` is not decided here; ARGS keeps the branch's flags, never drops the
    # --max-model-len set before it (sized at the model's 131072 tokens: DoesNotFit on an L4)
    script = (
        'ARGS=--max-model-len=8192; if command -v nvidia-smi >/dev/null; then ARGS="$ARGS --enable-prefix-caching"; fi;'
        " exec vllm serve M $ARGS"
    )
    assert undecided_of(script) == ("ARGS",)
    doc = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
        "spec": {"template": {"spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.34.0", "command": ["/bin/sh", "-c"],
                            "args": [script.replace(" M ", " meta-llama/Llama-3.1-8B-Instruct ")],
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        }}},
    }  # fmt: skip
    reading = read_workload(doc)
    assert reading is not None and reading.unknown is not None and "$ARGS" in reading.unknown, reading
    # hunt75 D3: an if inside `{ ...; }` or a one-line function body is a block (both branches applied before)
    group = '{ if [ "$R" = "a" ]; then L=1024; else L=2048; fi; }; exec vllm serve M --max-model-len $L'
    assert flags_of(group, {"R": "a"})["--max-model-len"] == "1024"


def test_here_documents_are_not_the_shell_s_blocks_and_a_serve_written_there_is_still_read() -> None:
    # hunt75 G1: a Python `if` in `python3 - <<EOF` swallowed the rest of the script (Skipped: "runs no vLLM server")
    script = "python3 - <<'EOF'\nif True:\n    print(1)\nEOF\nexec vllm serve M --max-model-len 4096"
    assert flags_of(script)["--max-model-len"] == "4096"
    written = "cat > /tmp/run.sh <<EOF\nvllm serve M --max-model-len 2048\nEOF\nbash /tmp/run.sh"
    assert flags_of(written)["--max-model-len"] == "2048"


def test_deep_nesting_costs_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # hunt75 O1: every command rescanned the open blocks (20,000 nested ifs: 19 s); now counted as they change.
    # The script (460 KB) is past MAX_SCRIPT_BYTES (hunt83 F1): raised here, to keep measuring the blocks' cost
    monkeypatch.setattr(bounds, "MAX_SCRIPT_BYTES", 1 << 20)
    depth = 20_000
    script = "if [ 1 = 1 ]; then " * depth + "exec vllm serve M --max-model-len 512; " + "fi; " * depth
    start = time.perf_counter()
    assert flags_of(script)["--max-model-len"] == "512"
    assert time.perf_counter() - start < 5.0


def test_an_unquoted_default_with_a_blank_leaves_no_mark() -> None:
    # hunt75 O2: `${X:-a b}` unquoted: the lexer splits it at the blank; no internal mark may reach an argument
    flags = flags_of("exec vllm serve M --served-model-name ${X:-a b} --max-model-len 512")
    assert all(OPEN not in v and "\x02" not in v for v in flags.values()) and flags["--max-model-len"] == "512"


def test_an_alternative_value_holds_flags_where_its_variable_is_set() -> None:
    # `${LEN:+--max-model-len $LEN}` (bash(1), "Parameter Expansion": the word where LEN is set and not empty, else
    # nothing), nested `${TP:+-tp=${TP}}`; unquoted, the word's fields are split as the shell splits them. They were a
    # word fitgate could not read (Unknown): the lexer parted `${LEN:+--max-model-len` from `$LEN}` at the blank
    script = "exec vllm serve M ${LEN:+--max-model-len $LEN} ${TP:+--tensor-parallel-size=${TP}} ${GMU:+-x $GMU}"
    flags = flags_of(script, {"LEN": "8192", "TP": "2", "GMU": ""})
    assert flags == {"--max-model-len": "8192", "--tensor-parallel-size": "2"}
    assert flags_of(script, {}) == {}  # none set: no flag at all
    # `+` without `:` takes an empty value as set; a default's own reference is read too
    assert flags_of("exec vllm serve M ${E+--enforce-eager} --max-model-len ${N:-${M}}", {"E": "", "M": "64"}) == {
        "--enforce-eager": "true",
        "--max-model-len": "64",
    }
    # the word of a set variable holds an unknown one: left for the reader to name, never sized on a guess
    engine = find_engine_command(
        ["/bin/sh", "-c"],
        ["exec vllm serve M ${LEN:+--max-model-len $SECRET_LEN}"],
        {"LEN": "1"},
        image_entrypoint=False,
    )
    assert engine is not None and engine.flags["--max-model-len"] == "$SECRET_LEN"  # as `--max-model-len $SECRET_LEN`


@pytest.mark.parametrize(
    "command",
    [["/usr/bin/env", "bash", "-c"], ["tini", "--", "sh", "-c"], ["dumb-init", "--", "bash", "-c"],
     ["env", "X=1", "sh", "-c"], ["/sbin/tini", "-g", "--", "/bin/sh", "-c"]],
)  # fmt: skip
def test_a_shell_behind_an_init_or_env_program_is_read(command: list[str]) -> None:
    # hunt100 F3: the init / env program in front of the shell made it "runs no vLLM server" (Skipped), a DoesNotFit
    # admitted unread; `tini -- vllm serve ...` was read already
    engine = find_engine_command(command, ["exec vllm serve M -tp 2"], {}, image_entrypoint=False)
    assert engine is not None and engine.flags == {"--tensor-parallel-size": "2"}


def test_a_double_quoted_part_of_an_alternative_value_is_one_field() -> None:
    # hunt101 F6: `${TP:+--tensor-parallel-size "$TP"}`, a common idiom, was Unknown (a quote inside the braces left it
    # to the lexer); bash drops the quotes and keeps the quoted part one field
    script = 'vllm serve M ${TP:+--tensor-parallel-size "$TP"} ${N:+--served-model-name "a b"}'
    assert flags_of(script, {"TP": "4", "N": "1"}) == {"--tensor-parallel-size": "4", "--served-model-name": "a b"}
    # hunt102 F1: a quoted reference's value keeps its blanks (a JSON of --hf-overrides), as bash keeps it one word
    json_value = '{"max_position_embeddings": 16384}'
    assert flags_of('vllm serve M ${HF:+--hf-overrides "$HF"}', {"HF": json_value}) == {"--hf-overrides": json_value}


def test_a_bash_array_of_flags_is_its_elements() -> None:
    # hunt99 G2 / the DeepSeek-V4-Pro recipe's `COMMON_ARGS=( ... )`: bash(1) "Arrays": `"${A[@]}"` is one word an
    # element (a JSON one keeps its blanks), `+=(...)` appends, `$A` / `${A[0]}` is the first element, `${A[*]}` joins
    # them with blanks; a script's newlines inside `( )` are none of its commands. They were Unknown (`${A[@]}` unread)
    script = """ARGS=(
      --max-model-len 8192
      --speculative-config '{"method": "mtp", "num_speculative_tokens": 1}'
    )
    ARGS+=(--tensor-parallel-size "$TP")
    exec vllm serve Qwen/Qwen3-8B "${ARGS[@]}" """
    flags = flags_of(script, {"TP": "2"})
    assert flags == {
        "--max-model-len": "8192",
        "--speculative-config": '{"method": "mtp", "num_speculative_tokens": 1}',
        "--tensor-parallel-size": "2",
    }
    assert flags_of("A=(--max-model-len 512 -tp 4); vllm serve M ${A[*]}") == {
        "--max-model-len": "512",
        "--tensor-parallel-size": "4",
    }
    assert flags_of('A=(--enforce-eager --max-model-len 9); vllm serve M $A "${A[0]}"') == {"--enforce-eager": "true"}
    # set in a branch fitgate cannot decide: undecided, never sized on one branch's guess
    undecided = 'if [ "$X" = 1 ]; then A=(--max-model-len 1024); fi; vllm serve M "${A[@]}"'
    assert undecided_of(undecided) == ("A",)
    decided = 'if [ "$X" = 1 ]; then A=(--max-model-len 1024); else A=(--max-model-len 64); fi; vllm serve M "${A[@]}"'
    assert flags_of(decided, {"X": "1"}) == {"--max-model-len": "1024"}


def test_an_and_or_list_runs_its_assignments_only_where_the_test_lets_it() -> None:
    # hunt101 F2: `[ "$DEBUG" = 1 ] && ARGS=(-tp 1)` was applied whatever the test (a TP 1 plan of a TP 8 run); bash
    # runs a command after && only where the list so far succeeded, after || only where it failed; a test fitgate
    # cannot decide leaves what follows undecided; any command but a test succeeds (`cd /x && vllm serve ...`)
    script = '[ "$DEBUG" = "1" ] && ARGS=(-tp 1) || ARGS=(-tp 8); vllm serve M "${ARGS[@]}"'
    assert flags_of(script, {"DEBUG": "1"}) == {"--tensor-parallel-size": "1"}
    assert flags_of(script, {"DEBUG": "0"}) == {"--tensor-parallel-size": "8"}
    assert undecided_of(script) == ("ARGS",)
    assert flags_of('[ "$X" = 1 ] && TP=1; vllm serve M -tp ${TP:-8}', {"X": "2"}) == {"--tensor-parallel-size": "8"}
    assert flags_of("cd /models && vllm serve M -tp 2") == {"--tensor-parallel-size": "2"}
    assert flags_of('[ -n "$T" ] || exit 1; vllm serve M -tp 2') == {"--tensor-parallel-size": "2"}


def test_and_or_lists_as_bash_reads_them() -> None:
    # hunt102 F3: a quoted empty word ("" of `[ "$X" != "" ]`) was taken for a separator, so the test lost its right side
    # and the override ran with X empty (Invalid: `-tp ''`); F4: a probe's status is the pod's (undecided); F5: `&&` at
    # a line's end joins the next line
    override = 'TP=8; [ "$TP_OVERRIDE" != "" ] && TP=$TP_OVERRIDE; vllm serve M -tp $TP'
    assert flags_of(override, {"TP_OVERRIDE": ""}) == {"--tensor-parallel-size": "8"}
    assert flags_of(override, {"TP_OVERRIDE": "4"}) == {"--tensor-parallel-size": "4"}
    assert undecided_of("LEN=8192\nnvidia-smi -L | grep -q H200 && LEN=131072\nvllm serve M --max-model-len $LEN") == (
        "LEN",
    )
    assert flags_of('TP=1\n[ "$A" = 1 ] &&\n  TP=8\nvllm serve M -tp $TP', {"A": "2"}) == {
        "--tensor-parallel-size": "1"
    }
    assert flags_of('TP=1\n[ "$A" = 1 ] ||\n  TP=8\nvllm serve M -tp $TP', {"A": "1"}) == {
        "--tensor-parallel-size": "1"
    }


def test_env_in_front_of_the_shell_sets_what_the_script_sees() -> None:
    # hunt102 F2: `env MAX_LEN=16384 sh -c` runs the script with env's value; `env -i` (a cleared env) is not followed
    env = {"MAX_LEN": "131072"}
    engine = find_engine_command(["env", "MAX_LEN=16384", "sh", "-c"], ["vllm serve M --max-model-len $MAX_LEN"], env,
                                 image_entrypoint=False)  # fmt: skip
    assert engine is not None and engine.flags == {"--max-model-len": "16384"}
    cleared = find_engine_command(["env", "-i", "sh", "-c"], ["vllm serve M --max-model-len $MAX_LEN"], env,
                                  image_entrypoint=False)  # fmt: skip
    assert cleared is None


def test_what_bash_does_to_an_array_fitgate_does_not_follow_leaves_it_undecided() -> None:
    # hunt101 F3: `A[1]=1` sets an element fitgate does not track: undecided, never sized on the stale array; `unset A`
    # leaves it unset (kept as written: Unknown); `local` / `declare -x` assign as `export` does
    assert undecided_of('A=(-tp 8); A[1]=1; vllm serve M "${A[@]}"') == ("A",)
    flags = flags_of("export A=1 B=2; local C=3; declare -x D=4 E; vllm serve M --max-model-len $A$B$C$D")
    assert flags == {"--max-model-len": "1234"}


def test_array_appends_are_charged_to_the_expansion_budget() -> None:
    # hunt101 F4: each `A+=(x)` copies the whole array again; 13 doublings then ~2,700 appends in a 16 KiB script took
    # 17 s uncharged. Charged, the script stops at FITGATE_MAX_EXPANSION_BYTES (1 MiB) in well under a second
    script = "A=(x)\n" + 'A+=("${A[@]}")\n' * 13 + "A+=(x)\n" * 2700 + "exec vllm serve M --max-model-len 4096"
    start = time.perf_counter()
    with pytest.raises(bounds.BudgetError):
        flags_of(script)
    assert time.perf_counter() - start < 1.0


def _deployment(script: str) -> dict[str, object]:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.0", "command": ["sh", "-c"], "args": [script]}
    container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"},
            "spec": {"template": {"spec": {"containers": [container]}}}}  # fmt: skip


def test_a_script_past_the_shell_text_limit_is_unknown_before_shlex_runs() -> None:
    # hunt83 F1: shlex builds a word one character at a time (quadratic): a 1.4 MB word took 15 s of a parse thread.
    # Past MAX_SCRIPT_BYTES the reading is Unknown at once, naming the container, the size and the limit.
    serve = "vllm serve Qwen/Qwen3-8B --served-model-name "
    at_limit = serve + "A" * (MAX_SCRIPT_BYTES - len(serve))
    start = time.perf_counter()
    read = read_workload(_deployment(at_limit))
    assert read is not None and read.unknown is None and read.model == "Qwen/Qwen3-8B"
    assert time.perf_counter() - start < 1.0  # 8 ms on the development machine; a 1.4 MB word took 15 s
    over = read_workload(_deployment(at_limit + "A" * 1_000_000))
    assert over is not None and over.unknown == (
        f"container vllm: the sh -c script of {MAX_SCRIPT_BYTES + 1_000_000} bytes: "
        f"fitgate reads shell text of at most {MAX_SCRIPT_BYTES} bytes"
    )


def test_vllm_additional_args_past_the_shell_text_limit_is_unknown() -> None:
    doc = next(d for d in yaml.safe_load_all(FIXTURE.read_text()) if d)
    for container in doc["spec"]["template"]["containers"]:
        for item in container.get("env", []):
            if item["name"] == "VLLM_ADDITIONAL_ARGS":
                item["value"] = "--served-model-name " + "A" * 1_000_000
    read = read_workload(doc)
    assert read is not None and read.unknown is not None
    assert "env VLLM_ADDITIONAL_ARGS of 1000020 bytes: fitgate reads shell text of at most 16384 bytes" in read.unknown


def test_a_here_document_body_that_is_no_shell_is_passed_over() -> None:
    # hunt88 F2: an apostrophe in a system prompt written by a here-document ("You're ...") made shlex fail on the body
    # and the workload Invalid (exit 2, denied in enforce mode); bash never reads that text as shell
    script = "cat > /tmp/sp.txt <<'EOF'\nYou're a helpful assistant.\nEOF\nexec vllm serve M --max-model-len 4096"
    assert flags_of(script)["--max-model-len"] == "4096"


def test_here_document_bodies_do_not_count_against_the_shell_text_limit() -> None:
    # hunt88 F3: a 17 KB chat template written by a here-document before `vllm serve` was Unknown past MAX_SCRIPT_BYTES;
    # bodies are not split as shell (only their lines of at most 4 KiB, within 16 KiB, are looked at for a serve)
    template = "{{ message['content'] }}\n" * (MAX_SCRIPT_BYTES // 20)
    script = f"cat > /tmp/t.jinja <<'EOF'\n{template}EOF\nexec vllm serve M --max-model-len 4096"
    assert len(script) > MAX_SCRIPT_BYTES
    assert flags_of(script)["--max-model-len"] == "4096"


def test_a_hash_inside_a_word_is_no_comment() -> None:
    # hunt89 F3: shlex took every `#` for a comment; bash only one that starts a word. With `\` continuations the rest
    # of the command went with it (the TP after it was lost: DoesNotFit "needs 1 GPU" read as TP 1)
    script = "M=/models/org#x; vllm serve $M --served-model-name m#1 \\\n  --tensor-parallel-size 4 # four GPUs"
    flags = flags_of(script)
    assert flags["--tensor-parallel-size"] == "4" and flags["--served-model-name"] == "m#1"
    hashes = 'if [ $# -gt 0 ]; then echo "$#"; fi\nexec vllm serve ${MODEL##*/} --max-model-len 2048'
    assert flags_of(hashes, {"MODEL": "/m/Qwen3-8B"})["--max-model-len"] == "2048"


def test_a_command_substitution_is_one_word_unknown_only_where_it_sizes() -> None:
    # hunt89 F1 / F2: `$(hostname -i)` (or a Kubernetes $(POD_IP) of a fieldRef variable, which the shell then runs as a
    # command) was split at its parentheses and every flag after it lost; a backtick was Invalid
    host = "exec vllm serve M --host $(hostname -i) --api-key `cat /k` --tensor-parallel-size 4"
    engine = find_engine_command(["/bin/sh", "-c"], [host], {}, image_entrypoint=False)
    assert engine is not None and engine.flags["--tensor-parallel-size"] == "4" and not engine.undecided
    tp = "exec vllm serve M --tensor-parallel-size $(nvidia-smi -L | wc -l) --max-model-len 4096"
    engine = find_engine_command(["/bin/sh", "-c"], [tp], {}, image_entrypoint=False)
    assert engine is not None and engine.flags["--max-model-len"] == "4096" and engine.undecided


def test_python_options_before_m_and_the_cli_module_are_vllm_servers() -> None:
    # hunt89 F6: vLLM's own SkyPilot doc runs `python -u -m vllm.entrypoints.openai.api_server`, and
    # `python3 -m vllm.entrypoints.cli.main serve` is what the `vllm` console script runs: both were Skipped
    unbuffered = find_engine_command(["python", "-u", "-m", "vllm.entrypoints.openai.api_server"], ["--model", "M"], {},
                                     image_entrypoint=False)  # fmt: skip
    assert unbuffered is not None and unbuffered.flags["--model"] == "M"
    cli = find_engine_command(["python3", "-m", "vllm.entrypoints.cli.main", "serve", "M", "-tp", "2"], [], {},
                              image_entrypoint=False)  # fmt: skip
    assert cli is not None and (cli.how, cli.model) == ("vllm serve", "M")
