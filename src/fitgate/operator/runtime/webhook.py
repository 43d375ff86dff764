"""The admission webhook server: kopf's, with malformed AdmissionReview bodies answered 400 in one log line.

kopf's server decodes the body and hands it to its admission engine, which indexes ``request.resource``
and friends: a body of ``null``, ``[]``, ``1``, invalid UTF-8, a ``request`` that is missing or not an
object, a null ``resource`` or JSON nested too deeply ends in HTTP 500 and a traceback in the log.
:class:`GuardedWebhookServer` checks the shape kopf relies on first and answers anything else with 400
and a single warning line; a well-formed review goes to kopf unchanged (aiohttp keeps the body it read).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp.web
import kopf

from fitgate.workloads.bounds import budgets

logger = logging.getLogger("fitgate.webhook")

#: Nesting deeper than this is refused (a ModelDeployment is ~6 levels deep; the review adds 2).
MAX_DEPTH = 64
_JSON_TYPES = {
    type(None): "null",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _kind(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _too_deep(data: object, limit: int = MAX_DEPTH) -> bool:
    """Whether some value sits more than ``limit`` levels deep (the top level is 1).

    Level by level over the objects and lists only (a review's leaves are most of its values, and this runs on
    every review: issue 23): a value deeper than ``limit`` exists exactly when an object or list at level
    ``limit`` has anything in it.
    """
    level: list[dict[Any, Any] | list[Any]] = [data] if isinstance(data, dict | list) else []
    for _depth in range(1, limit):
        below: list[dict[Any, Any] | list[Any]] = []
        for value in level:
            for v in value.values() if isinstance(value, dict) else value:
                if isinstance(v, dict | list):
                    below.append(v)
        if not below:
            return False
        level = below
    return any(level)


def review_problem(data: Any) -> str:
    """What is wrong with a decoded AdmissionReview for kopf ("" when nothing is)."""
    if not isinstance(data, dict):
        return f"expected an AdmissionReview object, got {_kind(data)}"
    if _too_deep(data):
        return f"nested more than {MAX_DEPTH} levels deep"
    request = data.get("request")
    if not isinstance(request, dict):
        return f"request: expected an object, got {'nothing' if 'request' not in data else _kind(request)}"
    resource = request.get("resource")
    if not isinstance(resource, dict) or not all(isinstance(resource.get(k), str) for k in ("group", "version")):
        return f"request.resource: expected an object with group, version and resource, got {_kind(resource)}"
    if not isinstance(resource.get("resource"), str):
        return "request.resource.resource: expected a string"
    for key in ("uid", "operation"):
        if not isinstance(request.get(key), str):
            return f"request.{key}: expected a string, got {_kind(request.get(key))}"
    if not isinstance(request.get("userInfo"), dict):
        return f"request.userInfo: expected an object, got {_kind(request.get('userInfo'))}"
    new, old = request.get("object"), request.get("oldObject")
    if not isinstance(new, dict | None) or not isinstance(old, dict | None) or (new is None and old is None):
        return "request.object / request.oldObject: expected an object (at least one of them)"
    return ""


#: fitgate's own answer to a decoded, well-formed review on one webhook path; None: kopf's engine answers it.
DirectFn = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any] | None]]


class GuardedWebhookServer(kopf.WebhookServer):
    """kopf's webhook server, answering malformed AdmissionReview bodies with 400 and one log line.

    Reviews on a path of :attr:`direct` (by kopf's handler id, ``/fit``) are answered by that function when it
    recognises them, without kopf's admission engine; the rest, and any it fails on, go to kopf's engine.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.direct: dict[str, DirectFn] = {}

    async def _serve(self, fn: Any, request: aiohttp.web.Request) -> aiohttp.web.Response:  # type: ignore[override]
        # aiohttp reads at most 1 MiB by default and answers 413, which the chart's failurePolicy Ignore
        # turned into an unchecked admission: a review carries up to two objects of the API server's
        # 1.5 MiB each, so read up to FITGATE_MAX_REVIEW_BYTES (issue 22, docs/hardening.md).
        limit = budgets().max_review_bytes
        request = request.clone(client_max_size=limit)
        try:
            raw = await request.read()  # aiohttp keeps it: kopf's own request.text() reads the same bytes
        except aiohttp.web.HTTPRequestEntityTooLarge:
            logger.warning("refused an AdmissionReview of more than %d bytes (FITGATE_MAX_REVIEW_BYTES)", limit)
            raise
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problem = f"the body is not UTF-8 (at byte {exc.start})"
        except json.JSONDecodeError as exc:
            problem = f"the body is not JSON ({exc.msg} at character {exc.pos})"
        except RecursionError:
            problem = "the body is JSON nested too deeply"
        except ValueError:  # int(): a number past Python's digit limit (hunt83 F3: was HTTP 500 and a traceback)
            problem = f"the body holds a number of more than {sys.get_int_max_str_digits()} digits"
        else:
            problem = review_problem(data)
        if problem:
            logger.warning("refused a malformed AdmissionReview from %s with HTTP 400: %s", request.remote, problem)
            return aiohttp.web.json_response({"error": f"malformed AdmissionReview: {problem}"}, status=400)
        direct = self.direct.get(request.match_info.get("id") or "")
        if direct is not None:
            try:
                answer = await direct(data)
            except Exception:  # kopf's engine runs the same handler and reports what it raises, as before
                logger.debug("the direct admission path failed; kopf's engine answers", exc_info=True)
            else:
                if answer is not None:
                    return aiohttp.web.json_response(answer)
        response: aiohttp.web.Response = await kopf.WebhookServer._serve(fn, request)
        return response
