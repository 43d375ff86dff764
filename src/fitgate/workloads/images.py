"""Which vLLM release an image runs, read from the image reference (and the container's env).

:func:`image_release` maps an image to ``(release or None, reason)``; it never checks the release against
fitgate's accounting table (that is :func:`fitgate.workloads.podspec.release_of_image`'s one call into
sizing), so a release fitgate does not model yet is still named. Families and where each one's vLLM
comes from (sources cited per family):

* ``vllm/vllm-openai`` (and ``-rocm``, ``-cpu`` siblings): the tag is the vLLM release (``v0.10.2``,
  ``v0.8.5.post1``, ``v0.19.0-cu128``); ``latest`` / ``nightly`` are moving tags (newest modelled).
* ``rocm/vllm`` (``rocm/vllm-dev``): the release sits inside the tag, ``rocm6.3.1_vllm_0.8.5_20250521``.
* ``lmcache/vllm-openai``: the tag is an **LMCache** release (``v0.3.7``) or a build date
  (``2025-05-27-v1``), never the vLLM inside: LMCache/LMCache docker/README.md
  (@0a353d636bbf6cf8a5a2370a07317fedf9bc9a5c, "Published Images": ``lmcache/vllm-openai:{version}``, built
  on "vLLM nightly or stable"): release unknown.
* ``llm-d/llm-d`` and ``llm-d/llm-d-cuda|rocm|...``: an llm-d release; its Dockerfile builds vLLM from a
  commit of main (llm-d/llm-d Dockerfile L178 ``VLLM_COMMIT_SHA``, @f458af2e7b1f088cbcc399d1c0337b191ff71101):
  release unknown. Its entrypoint is vLLM's API server (same Dockerfile L219).
* ``neuralmagic/nm-vllm-*``: nm-vllm releases "typically track with vllm releases"
  (neuralmagic/nm-vllm-certs README.md): the tag read as the vLLM release, and said so.
* another repository named ``vllm-openai`` (a mirror such as ``harbor.corp/proxy/vllm/vllm-openai``, a stack's
  rebuild such as ``aibrix/vllm-openai:v0.6.2-distributed`` or ``volcano-sh/vllm-openai:v0.10.0-...``), or a tag that
  names vLLM's release (``ray-2.41.0-py310-cu118-vllm0.7.0``, ``substratusai/vllm-gh200:v0.8.3``: a repository
  whose name holds ``vllm``): the release the tag names, said to be read from a build fitgate does not know
  (hunt52 G1); an image that runs vLLM by command line only, so its entrypoint is not taken as vLLM's.
* ``nvcr.io/nvidia/vllm:<YY.MM>-py3`` (NGC) and ``nvcr.io/nvidia/ai-dynamo/vllm-runtime:<release>`` (Dynamo): the
  vendor's release, mapped to the vLLM inside by the vendor's published table (``data/vendor_releases.json``, each
  table cited; hunt82 F2); a tag it does not list stays unknown.
* llm-d's other images (the routing sidecar, the endpoint picker, the simulator, the tokenizer) run no vLLM (hunt82 F1).
* any image: a ``VLLM_VERSION`` variable of the container's env names the release when the tag does not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

#: Repositories (registry stripped) that run vLLM -> the image's entrypoint is the vLLM server.
#: vllm/vllm-openai: ``vllm serve`` (vllm-project/vllm docker/Dockerfile, stage vllm-openai);
#: lmcache/vllm-openai is built on it (LMCache docker/README.md); llm-d: vLLM's API server (Dockerfile
#: L219); nm-vllm-openai images run the OpenAI server as vLLM's do; rocm/vllm images start a shell.
VLLM_IMAGES: tuple[tuple[str, bool], ...] = (
    ("vllm/vllm-openai", True),
    ("lmcache/vllm-openai", True),
    ("llm-d/llm-d", True),
    ("neuralmagic/nm-vllm", True),
    ("rocm/vllm", False),
)

_RELEASE = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?)")
_MOVING = re.compile(r"^(latest|nightly)([-_.].*)?$", re.IGNORECASE)
_ROCM_TAG = re.compile(r"vllm[_-]?v?(\d+\.\d+(?:\.\d+)?)")  # vllm_0.8.5, and rocm6.3.1_instinct_vllm0.8.3 (F3)
#: llm-d's images that run no vLLM: the router / endpoint picker (formerly inference-scheduler), the P/D sidecar,
#: the simulator, the tokenizer sidecar, the KV-cache library, the benchmark (llm-d/llm-d#1819, the v0.8.0 component
#: list); its vLLM images are every other llm-d-* (llm-d-cuda, -aws, -hpu, -rocm, -cuda-gb200 ...). hunt82 F1: a
#: routing sidecar listed before the vLLM container was read as the server; hunt86 F2: an allow-list missed -gb200.
_LLM_D_NOT_VLLM = re.compile(r"(router|sidecar|scheduler|inference-sim|tokenizer|kv-cache|benchmark|predictor|epp)")
#: Nightly tags that do not move to the newest release: pinned to a commit of main (``nightly-d00df624...``, as a
#: GLM-OCR worker and vLLM's Qwen3.5 GB200 blog pin them), and ``cuNNN-nightly``, which stopped at about 0.19 when
#: cu130 became the default nightly (vllm-project/vllm#42738: "should be deprecated").
_PINNED_NIGHTLY = re.compile(r"(^|[-_.])nightly[-_.][0-9a-f]{7,40}($|[-_.])|^cu\d{3}-nightly$", re.IGNORECASE)
_NIGHTLY_WHY = "its vLLM is between two releases: sized with each V1-era release"
#: A moving tag's word inside a longer tag (``cu130-nightly``, ``nightly-x86_64``).
_MOVING_WORD = re.compile(r"(^|[-_.])(latest|nightly)([-_.]|$)", re.IGNORECASE)
#: A vLLM release inside another image's tag: ``...-vllm0.7.0``, ``vllm-0.8.5``, ``vllm_v0.10.1``.
_TAG_NAMES_VLLM = re.compile(r"(?<![a-z])vllm[_-]?v?(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
#: A ``v0.x`` word inside the tag of a repository named for vLLM: ``vllm:openai-v0.10.1`` (Red Hat's AI quickstart),
#: ``vllm-tensorizer:8552fbc-v0.10.0`` (CoreWeave's ml-containers): a build prefix, then the release (hunt106 N1).
_TAG_V0_WORD = re.compile(r"(?:^|[-_])v(0\.\d+(?:\.\d+)?)(?=$|[-_+])")
#: A ``v0.x`` word of a build's tag older than this is the build's own version, not vLLM's (fitgate models 0.5+).
_OLDEST_WORD_RELEASE = (0, 5)
#: An unrendered template in a tag: ``${VERSION}`` (envsubst, Dynamo's recipes), ``$(TAG)``, ``{{ .Values.tag }}``.
_TEMPLATE_TAG = re.compile(r"\$\{|\$\(|\{\{")
#: The longest image reference read (the API server allows long names; nothing real is near this).
MAX_IMAGE_CHARS = 1024


@dataclass(frozen=True)
class ImageRelease:
    """The vLLM release an image runs, as read, and how it was read (or why it could not be)."""

    release: str | None  # "0.19.0", "latest"; None: not known from the image or env
    reason: str


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """(repository without registry, tag, digest) of an image reference."""
    ref, _, digest = image.partition("@")
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    repo, tag = (ref[:colon], ref[colon + 1 :]) if colon > slash else (ref, None)
    parts = repo.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if parts[:1] == ["library"]:
        parts = parts[1:]
    return "/".join(parts), tag, digest or None


def image_family(repo: str) -> tuple[str, bool] | None:
    """(family, its entrypoint is the vLLM server) of a repository, None when it is no known vLLM image."""
    for prefix, entrypoint in VLLM_IMAGES:
        # a mirror keeps the path under its own (harbor.corp/proxy/vllm/vllm-openai, a pull-through cache)
        at = 0 if repo.startswith(prefix) else repo.find("/" + prefix) + 1
        rest = repo[at + len(prefix) :] if at or repo.startswith(prefix) else None
        if rest is not None and (rest == "" or rest[0] in "-/"):
            if prefix == "llm-d/llm-d" and _LLM_D_NOT_VLLM.search(rest.split("/", 1)[0]):
                return None
            return prefix, entrypoint
    return None


@lru_cache(maxsize=1)
def _vendor_tables() -> dict[str, dict[str, object]]:
    raw = json.loads(resources.files("fitgate.workloads").joinpath("data/vendor_releases.json").read_text())
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def _vendor_release(repo: str, tag: str | None) -> ImageRelease | None:
    """The vLLM inside a vendor's image whose tag is the vendor's release (NGC, Dynamo), by its published table."""
    table = _vendor_tables().get(repo)
    if table is None or not tag or "dev" in tag.lower():  # Dynamo's model early-access builds pin their own vLLM
        return None
    exact = table.get("exact")
    bare = tag.lower().removeprefix("v").removesuffix("-py3")
    key = re.match(r"^v?(\d+\.\d+)", tag)
    releases = table["releases"]
    if isinstance(exact, dict) and bare in exact:
        release = str(exact[bare])
    elif table.get("key") == "month" and ".post" in bare:
        return None  # NGC's 25.12.post1 / 26.05.post1 are builds of their own, not their month's release
    elif key is None or not isinstance(releases, dict) or key.group(1) not in releases:
        return None
    else:
        release = str(releases[key.group(1)])
    return ImageRelease(release, f"{repo}:{tag} ships vLLM {release} ({table['source']})"[:300])


def _other_build(repo: str, tag: str | None, env: Mapping[str, str] | None, image: str) -> ImageRelease:
    """The release another build of vLLM names in its tag (hunt52 G1), else the env's, else unknown."""
    vendor = _vendor_release(repo, tag)
    if vendor is not None:
        return vendor
    if repo in _vendor_tables():  # hunt176 F1: Dynamo's vllm-runtime:v0.5.1 is Dynamo 0.5.1, never vLLM 0.5.1 (a V0)
        return _from_env(env, f"{repo}:{tag} is a release of its vendor's that fitgate's table does not list")
    name = repo.rsplit("/", 1)[-1].lower()
    # a vllm-openai rebuild's tag, or a v0.x tag of a repository named for vLLM (not Dynamo's vllm-runtime:0.4.1); a
    # repository named just vllm takes 0.x too (hunt82 F3: AWS's DLC vllm:0.11-gpu-py312-..., intel/vllm:0.10.2-xpu)
    if tag and (
        "vllm-openai" in name
        or ("vllm" in name and re.match(r"v0\.\d", tag))
        or (name == "vllm" and re.match(r"0\.\d", tag))
    ):
        m = _RELEASE.match(tag)
        if m:
            return ImageRelease(
                m.group(1), f"tag {tag} of {repo}, a vLLM build fitgate does not know, read as the release"
            )
    word = _TAG_V0_WORD.search(tag or "") if "vllm" in name else None
    if word and tuple(int(x) for x in word.group(1).split(".")[:2]) < _OLDEST_WORD_RELEASE:
        # hunt114 F1: llm-d's AMD wide-EP recipe runs `.../llm-d/vllm:wide-ep-v0.2.0`, the recipe's own version on a
        # 2026 vLLM: a word's v0.x older than any release fitgate models is not taken for vLLM's (unknown instead)
        word = None
    if word:
        return ImageRelease(
            word.group(1), f"tag {tag} of {repo}, a vLLM build fitgate does not know, names the release {word.group(1)}"
        )
    m = _TAG_NAMES_VLLM.search(f"{name}:{tag or ''}")
    if m:
        return ImageRelease(m.group(1), f"image {repo}:{tag} names vLLM {m.group(1)} in its name")
    return _from_env(env, f"image {image} is not a vLLM image fitgate knows")


def _from_env(env: Mapping[str, str] | None, why: str) -> ImageRelease:
    value = (env or {}).get("VLLM_VERSION", "").strip()
    m = _RELEASE.match(value)
    if m:
        return ImageRelease(m.group(1), f"env VLLM_VERSION={value} ({why})")
    return ImageRelease(None, why)


def image_release(image: str, env: Mapping[str, str] | None = None) -> ImageRelease:
    """The vLLM release ``image`` runs: (release, how it was read) or (None, why it is not known)."""
    image = image.strip()[:MAX_IMAGE_CHARS]
    if not image:
        return _from_env(env, "the container names no image")
    repo, tag, digest = split_image(image)
    if tag is not None and _TEMPLATE_TAG.search(tag):
        # hunt199 F4: Dynamo's recipes ship `vllm-runtime:${VERSION}`, which read as a vendor release fitgate lacks
        return _from_env(env, f"image {image[:200]}: its tag is an unfilled template variable, which names no release")
    family = image_family(repo)
    if family is None:
        return _other_build(repo, tag, env, image)
    name = family[0]
    if tag is None and digest is not None:
        return _from_env(env, f"image {image} is pinned by digest only, which names no release")
    tag = tag or "latest"
    if name == "vllm/vllm-openai":
        if _PINNED_NIGHTLY.search(tag):  # hunt176 F2 / F3: a build of main at a commit, or a nightly that stopped
            return _from_env(env, f"tag {tag}: a nightly build of vLLM's main branch, not a release ({_NIGHTLY_WHY})")
        if _MOVING.match(tag):
            return ImageRelease("latest", f"tag {tag}: vLLM's newest release")
        m = _RELEASE.match(tag)
        if m:
            return ImageRelease(m.group(1), f"tag {tag}")
        if _MOVING_WORD.search(tag):  # hunt82 F3: cu130-nightly, a nightly of a CUDA build
            return ImageRelease("latest", f"tag {tag}: a nightly or latest build, vLLM's newest release")
        return _from_env(env, f"tag {tag!r} names no vLLM release")
    if name == "rocm/vllm":
        m = _ROCM_TAG.search(tag)
        return ImageRelease(m.group(1), f"tag {tag}") if m else _from_env(env, f"tag {tag!r} names no vLLM release")
    if name == "neuralmagic/nm-vllm":
        m = _RELEASE.match(tag)
        if m:
            return ImageRelease(m.group(1), f"nm-vllm tag {tag}, read as the vLLM release it tracks")
        return _from_env(env, f"tag {tag!r} names no nm-vllm release")
    if name == "lmcache/vllm-openai":
        return _from_env(env, f"lmcache/vllm-openai:{tag} names an LMCache release or build, not the vLLM inside")
    vendor = _vendor_release("/".join(repo.split("/")[-2:]), tag)
    if vendor is not None:  # an llm-d release whose vLLM its component list names
        return vendor
    return _from_env(env, f"{repo}:{tag} names an llm-d release, built on a vLLM commit of main")
