"""The vLLM release of an image: every image family people deploy, never a denial for the release alone.

Image tags and their sources: vllm/vllm-openai releases (docker/Dockerfile of vllm-project/vllm),
``lmcache/vllm-openai:v0.3.7`` as vllm-project/production-stack's chart tests write it
(helm/tests/deployment-vllm-multi_test.yaml @a6c01db0 pins ``v0.3.9post2`` of the same family), llm-d's
``ghcr.io/llm-d/llm-d-cuda:v0.5.0`` (llm-d guides), rocm/vllm tags (hub.docker.com/r/rocm/vllm).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fitgate.cli import main
from fitgate.operator.decision.workloads import decide_workload, evaluate_reading
from fitgate.sizing.versions import DEFAULT_VLLM_VERSION
from fitgate.workloads import read_workload, release_of_image
from fitgate.workloads.images import image_release


@pytest.mark.parametrize(
    ("image", "env", "release", "reason_has"),
    [
        ("vllm/vllm-openai:v0.19.0", {}, "0.19.0", "tag v0.19.0"),
        ("docker.io/vllm/vllm-openai:v0.10.2@sha256:" + "a" * 64, {}, "0.10.2", "tag v0.10.2"),
        ("vllm/vllm-openai@sha256:" + "a" * 64, {}, None, "digest only"),
        ("vllm/vllm-openai@sha256:" + "a" * 64, {"VLLM_VERSION": "0.11.0"}, "0.11.0", "env VLLM_VERSION"),
        ("vllm/vllm-openai:v0.34.0", {}, "0.34.0", "tag v0.34.0"),
        ("vllm/vllm-openai:nightly-2026-01-01", {}, "latest", "newest release"),
        ("lmcache/vllm-openai:v0.3.7", {}, None, "LMCache release"),
        ("lmcache/vllm-openai:2025-05-27-v1", {}, None, "LMCache release"),
        ("ghcr.io/llm-d/llm-d-cuda:v0.5.0", {}, None, "llm-d release"),
        ("ghcr.io/llm-d/llm-d:v0.2.0", {"VLLM_VERSION": "v0.10.0"}, "0.10.0", "env VLLM_VERSION"),
        ("rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", {}, "0.8.5", "tag"),
        ("rocm/vllm-dev:nightly", {}, None, "names no vLLM release"),
        ("ghcr.io/neuralmagic/nm-vllm-openai:v0.6.2", {}, "0.6.2", "tracks"),
        ("registry.example.com/team/inference:1.2.3", {}, None, "not a vLLM image"),
        # hunt52 G1: a mirror keeps vLLM's path; stacks' rebuilds and images that name vLLM's release in the name
        ("harbor.corp/proxy/vllm/vllm-openai:v0.11.0", {}, "0.11.0", "tag v0.11.0"),
        ("aibrix/vllm-openai:v0.6.2-distributed", {}, "0.6.2", "a vLLM build fitgate does not know"),
        ("volcano-sh/vllm-openai:v0.10.0-cu128", {}, "0.10.0", "read as the release"),
        ("substratusai/vllm-gh200:v0.8.3", {}, "0.8.3", "read as the release"),
        ("public.ecr.aws/data-on-eks/ray-2.41.0-py310-cu118-vllm0.7.0:latest", {}, "0.7.0", "names vLLM 0.7.0"),
        # hunt106 N1: a build prefix before the release word (Red Hat's AI quickstart, CoreWeave's ml-containers);
        # only a v0.x word of a repository named for vLLM: a v1.2.0 word there is no vLLM release
        ("quay.io/ecosystem-appeng/vllm:openai-v0.10.1", {}, "0.10.1", "names the release 0.10.1"),
        ("ghcr.io/coreweave/ml-containers/vllm-tensorizer:8552fbc-v0.10.0", {}, "0.10.0", "names the release"),
        ("registry.example.com/vllm-custom:cu124-v1.2.0", {}, None, "not a vLLM image"),
        # hunt114 F1: llm-d's AMD wide-EP recipe image: the recipe's own v0.2.0 on a 2026 vLLM, not vLLM 0.2.0
        ("ghcr.io/vcave/rocm/llm-d/vllm:wide-ep-v0.2.0", {}, None, "not a vLLM image"),
        # Dynamo's runtime tag is a Dynamo release, not vLLM's: read through Dynamo's published table where it has one
        # (docs.nvidia.com/dynamo/v-0-9-1 support matrix: v0.7.x ships vLLM 0.11.0; v1.3.x 0.23.0), else unknown
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.1", {}, None, "table does not list"),
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0.post1", {}, "0.11.0", "ships vLLM 0.11.0"),
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1", {}, "0.23.0", "ships vLLM 0.23.0"),
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0-deepseek-dev.1", {}, None, "table does not list"),  # early access
        # NGC's vLLM container: YY.MM (vllm-release-notes rel-26-05: "vLLM: 0.20.1"); a month not in the table: unknown
        ("nvcr.io/nvidia/vllm:26.05-py3", {}, "0.20.1", "ships vLLM 0.20.1"),
        ("nvcr.io/nvidia/vllm:25.11-py3", {}, None, "table does not list"),
        # an NGC month's .postN tag is a build of its own (26.05.post1 ships 0.21.0, second-hand): unknown, not 0.20.1
        ("nvcr.io/nvidia/vllm:26.05.post1-py3", {}, None, "table does not list"),
        # Dynamo's patch build 0.7.0.post2 pins vLLM 0.11.2, not its line's 0.11.0 (release-artifacts.md @00552b23:
        # "vllm-runtime:0.7.0.post2 | v0.11.2 | Patch"); the 1.x lines the table gained (1.2.x: 0.20.1)
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0.post2", {}, "0.11.2", "ships vLLM 0.11.2"),
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1", {}, "0.20.1", "ships vLLM 0.20.1"),
        ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", {}, "0.26.0", "ships vLLM 0.26.0"),
        ("ghcr.io/llm-d/llm-d-aws:v0.9.0", {}, "0.26.0", "ships vLLM 0.26.0"),  # hunt200 F3: llm-d v0.9.0 lists it
        # hunt82 F3: tags that name the release without the separators read before
        ("rocm/vllm:rocm6.3.1_instinct_vllm0.8.3_20250410", {}, "0.8.3", "tag"),
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.11-gpu-py312-cu129-ubuntu22.04-sagemaker-v1",
            {},
            "0.11",
            "read",
        ),
        ("intel/vllm:0.10.2-xpu", {}, "0.10.2", "read as the release"),
        # hunt176 F3: cu130-nightly stopped at about 0.19 (vllm-project/vllm#42738); F2: a nightly pinned to a commit
        # is a build of main between two releases, not the newest release
        ("vllm/vllm-openai:cu130-nightly", {}, None, "not a release"),
        ("vllm/vllm-openai:nightly-d00df624f313a6a5a7a6245b71448b068b080cd7", {}, None, "not a release"),
        ("vllm/vllm-openai:nightly-d223c90", {}, None, "not a release"),
        ("vllm/vllm-openai:nightly-aarch64", {}, "latest", "newest release"),
        # hunt176 F1: Dynamo's v-prefixed tag of a line the table lacks is Dynamo's version, never vLLM 0.5.1 (a V0)
        ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:v0.5.1", {}, None, "table does not list"),
        # hunt82 F1: llm-d's router, sidecar, simulator and tokenizer images run no vLLM; its vLLM images do
        ("ghcr.io/llm-d/llm-d-routing-sidecar:0.0.7", {}, None, "not a vLLM image"),
        ("ghcr.io/llm-d/llm-d-inference-sim:latest", {}, None, "not a vLLM image"),
        ("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0", {}, None, "not a vLLM image"),
        ("ghcr.io/llm-d/llm-d-rocm:v0.4.0", {}, None, "llm-d release"),
        ("ghcr.io/llm-d/llm-d-cuda-gb200:v0.7.0", {}, None, "llm-d release"),  # hunt86 F2: a vLLM image
        ("ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0", {}, None, "not a vLLM image"),
        # llm-d/llm-d#1819: llm-d-cuda v0.8.0 ships vLLM 0.23.0, v0.7.0 0.19.1
        ("ghcr.io/llm-d/llm-d-cuda:v0.7.0", {}, "0.19.1", "ships vLLM 0.19.1"),
        ("ghcr.io/llm-d/llm-d-cuda:v0.8.0", {}, "0.23.0", "ships vLLM 0.23.0"),
    ],
)
def test_image_release(image: str, env: dict[str, str], release: str | None, reason_has: str) -> None:
    read = image_release(image, env)
    assert (read.release, reason_has in read.reason) == (release, True), read


@pytest.mark.parametrize(
    ("image", "sized", "warned"),
    [
        ("vllm/vllm-openai:v0.19.0", "0.19.0", False),
        ("vllm/vllm-openai:latest", DEFAULT_VLLM_VERSION, False),
        ("vllm/vllm-openai:v0.34.0", "0.34.0", False),  # the newest modelled release
        ("vllm/vllm-openai:v0.99.0", "0.99.0", True),  # newer than the table: sized as the newest, with a warning
        ("vllm/vllm-openai:v0.4.0", "0.4.0", True),  # older than the table: sized as 0.5.0, with a warning
        ("lmcache/vllm-openai:v0.3.7", None, True),  # an LMCache release, not vLLM 0.3.7
        ("ghcr.io/llm-d/llm-d-cuda:v0.5.0", None, True),
    ],
)
def test_release_of_image_never_refuses(image: str, sized: str | None, warned: bool) -> None:
    release, warning = release_of_image(image)
    assert release == sized
    assert (warning is not None) == warned
    if warning and sized is None:
        assert f"sized as the newest modelled release, {DEFAULT_VLLM_VERSION}" in warning
    elif warning:  # named as given, sized with the newest (or, older than 0.5, 0.5.0's) accounting (resolve_release)
        oldest = sized.startswith("0.4")
        assert f"sized with {'0.5.0' if oldest else DEFAULT_VLLM_VERSION}'s accounting" in warning


def _deployment(image: str) -> dict[str, Any]:
    # production-stack's vLLM container as its chart renders it (helm/templates/deployment-vllm-multi.yaml)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm-llama3", "namespace": "prod"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": image,
                            "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
                            "args": ["--max-model-len", "8192"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                }
            }
        },
    }


@pytest.mark.parametrize("image", ["lmcache/vllm-openai:v0.3.7", "vllm/vllm-openai:v0.99.0"])
def test_release_outside_the_table_is_admitted_with_a_warning_naming_the_model(image: str) -> None:
    reading = read_workload(_deployment(image))
    assert reading is not None and reading.invalid is None and reading.model == "meta-llama/Llama-3.1-8B-Instruct"
    # unknown checkpoint (no model facts offline): the verdict is Unknown, admitted; the release warning rides along
    verdict = evaluate_reading(reading, None, [])
    assert "None" not in verdict.message and "meta-llama/Llama-3.1-8B-Instruct" in verdict.message
    outcome = decide_workload(verdict, "enforce", "Warn")
    assert outcome.allowed
    assert any(
        ("newest modelled release" in w or "newest release fitgate models" in w) and "Deployment prod/vllm-llama3" in w
        for w in outcome.warnings
    )


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], image: str, model: str, *args: str) -> dict[str, Any]:
    doc = _deployment(image)
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["vllm", "serve", model]
    container["args"] = list(args)
    tp = args[args.index("--tensor-parallel-size") + 1] if "--tensor-parallel-size" in args else "1"
    container["resources"] = {"limits": {"nvidia.com/gpu": tp}}
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(doc))
    main(["check", str(path), "--gpu", "H100", "--output", "json"])
    [result] = json.loads(capsys.readouterr().out)
    return dict(result)


# hunt82 F2: llm-d-cuda:v0.7.0 runs vLLM 0.19.1 (llm-d/llm-d releases, v0.8.1 notes), whose budget leaves the CUDA-graph
# estimate out. Sized as 0.34.0 (what an image naming no release is sized as), Llama-3.1-70B-FP8 at 32k on one H100 at
# gmu 0.95 leaves 3.12 GiB for a 5.00 GiB request (80 layers x 8 kv heads x 128 x 2 x 1 B = 160 KiB a token x 32768);
# as 0.19.1 the pool is 5.03 GiB (Tight). Not knowing the release, fitgate cannot show the misfit: Unknown, admitted.
# 36k: at 32k 0.34's smaller V2-runner graphs (hunt184 F1) fit it too
_TIGHT_70B = ("--max-model-len", "36864", "--gpu-memory-utilization", "0.95", "--kv-cache-dtype", "fp8")


def test_unknown_release_is_not_denied_for_a_misfit_only_the_newest_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = _check(tmp_path, capsys, "vllm/vllm-openai:v0.34.0", "nvidia/Llama-3.1-70B-Instruct-FP8", *_TIGHT_70B)
    assert named["verdict"] == "DoesNotFit"  # the release is named: its accounting decides
    unknown = _check(
        tmp_path, capsys, "example.com/team/llm-server:7", "nvidia/Llama-3.1-70B-Instruct-FP8", *_TIGHT_70B
    )
    assert unknown["verdict"] == "Unknown", unknown
    assert "the vLLM release is unknown" in unknown["message"] and "it is Tight" in unknown["message"]


@pytest.mark.parametrize(
    ("model", "args"),
    [
        # 405B in 16-bit is ~756 GiB of weights: no release's accounting fits it on one 80 GB H100
        ("meta-llama/Llama-3.1-405B", ("--max-model-len", "8192")),
        # hunt86 F1: DeepSeek-V4-Flash at TP 2 on H100s (73.31 GiB of weights a GPU) misfits on every release from 0.8
        # (vLLM serves it from 0.20); only V0-era 0.6 / 0.7 accounting admitted it, and those are not tried
        ("deepseek-ai/DeepSeek-V4-Flash", ("--tensor-parallel-size", "2", "--max-model-len", "131072")),
    ],
)
def test_unknown_release_still_denies_what_no_release_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, args: tuple[str, ...]
) -> None:
    r = _check(tmp_path, capsys, "example.com/team/llm-server:7", model, *args, "--gpu-memory-utilization", "0.95")
    assert r["verdict"] == "DoesNotFit", r


def test_a_sidecar_before_the_vllm_container_is_not_read_as_the_server() -> None:
    # hunt82 F1: cnuland/hello-chris-llm-d's decode pod lists llm-d's routing sidecar (args --port=8000
    # --vllm-port=8200) before vLLM; the sidecar was taken for the server (llm-d images' entrypoint is vLLM's)
    doc = _deployment("ghcr.io/llm-d/llm-d:v0.2.0")
    containers = doc["spec"]["template"]["spec"]["containers"]
    containers[0]["command"] = ["vllm", "serve", "meta-llama/Llama-3.2-1B-Instruct"]
    sidecar = {"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:0.0.7", "args": ["--port=8000"]}
    containers.insert(0, sidecar)
    reading = read_workload(doc)
    assert reading is not None and reading.container == "vllm" and reading.model == "meta-llama/Llama-3.2-1B-Instruct"


def test_a_cpu_build_named_in_the_tag_is_skipped() -> None:
    # hunt82 F4: KubeAI's CPU image substratusai/vllm:v0.6.4.post1-cpu asks for no GPU: vLLM's CPU backend, not checked
    doc = _deployment("substratusai/vllm:v0.6.4.post1-cpu")
    doc["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "8"}}
    assert read_workload(doc) is None
    doc["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    assert read_workload(doc) is not None  # a GPU asked for: read and sized whatever the tag says


def test_a_device_fitgate_does_not_size_carries_no_release_note() -> None:
    # hunt82 F5: a TPU pod (vllm/vllm-tpu:nightly, google.com/tpu: 4) is Unknown and nothing is sized, so the note
    # "sized as the newest modelled release" was noise
    doc = _deployment("vllm/vllm-tpu:nightly")
    doc["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"google.com/tpu": "4"}}
    reading = read_workload(doc)
    assert reading is not None and reading.unknown is not None and "device resource" in reading.unknown
    assert not any("sized as the newest" in n for n in (*reading.notes, *reading.warnings))


@pytest.mark.parametrize(
    ("image", "env", "named"),
    [
        ("ghcr.io/llm-d/llm-d-hpu:v0.4.0", [], "llm-d/llm-d-hpu is a vLLM build for hpu"),
        ("ghcr.io/rbln-sw/rbln-serve:0.11.3a1", [], "rbln-sw/rbln-serve is a vLLM build for rbln"),
        ("vllm/vllm-openai-xpu:v0.11.0", [], "vllm-openai-xpu is a vLLM build for xpu"),
        ("myorg/serving:prod", [{"name": "HABANA_LOGS", "value": "/tmp/habana_logs"}], "its env sets HABANA_LOGS"),
    ],
)
def test_a_dra_pod_of_another_accelerator_is_unknown_without_its_claim_template(
    image: str, env: list[dict[str, str]], named: str
) -> None:
    # hunt122 F4: llm-d's Gaudi / Rebellions / XPU guides (guides/optimized-baseline/modelserver/{hpu,npu,xpu}) give
    # the pod its device by a DRA claim; without the claim's template among the files, `check --gpu H100` sized them
    # as H100s. The image or env names the accelerator: Unknown. A vLLM image with the same claim is still read.
    doc = _deployment(image)
    pod = doc["spec"]["template"]["spec"]
    pod["containers"][0].update(resources={"claims": [{"name": "acc"}]}, env=env)
    pod["resourceClaims"] = [{"name": "acc", "resourceClaimTemplateName": "acc"}]
    reading = read_workload(doc)
    assert reading is not None and reading.unknown is not None and named in reading.unknown, reading
    doc["spec"]["template"]["spec"]["containers"][0].update(image="vllm/vllm-openai:v0.11.0", env=[])
    plain = read_workload(doc)
    assert plain is not None and (plain.unknown is None or "accelerator fitgate does not size" not in plain.unknown)


@pytest.mark.parametrize(
    "image",
    ["nvcr.io/nvidia/ai-dynamo/vllm-runtime:${VERSION}", "vllm/vllm-openai:$(TAG)", "vllm/vllm-openai:{{.Values.tag}}"],
)
def test_an_unfilled_template_tag_is_said_so(image: str) -> None:
    # hunt199 F4: Dynamo's recipes ship vllm-runtime:${VERSION}; it read as "a release of its vendor's that fitgate's
    # table does not list"
    read = image_release(image)
    assert read.release is None and "unfilled template variable" in read.reason
