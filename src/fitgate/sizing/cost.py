"""What a replica costs and when it beats an API: the seeds' break-even arithmetic, with its inputs named.

::

    usd_per_hour                 = price per GPU-hour x GPUs per replica (TP x PP)
    usd_per_million_output_tokens = usd_per_hour / (decode_tokens_per_s x 3600 x utilization) x 1e6
    breakeven_tokens_per_day     = usd_per_hour x 24 / api_usd_per_million x 1e6
    cheaper_than_api_at          = breakeven_tokens_per_day, if one replica can produce that many
                                   tokens a day (decode_tokens_per_s x 86400), else None

An API bills input tokens too (``api_input_usd_per_million``). With the request shape (ISL input and OSL
output tokens a request) the API's price of a request is ``(ISL x input price + OSL x output price) / 1e6``,
so per output token it charges ``api_usd_per_million + api_input_usd_per_million x ISL / OSL`` per 1M, the
price the break-even divides by; ``breakeven_requests_per_day`` is the same volume in requests
(``breakeven_tokens_per_day / OSL``).

``utilization`` is the share of the day the replica runs at the estimated load. It enters only the
cost per token: the GPUs are paid for 24 hours whether busy or idle (idle time stays in the
numerator), so at 40 % a token costs 2.5 x what it costs at full load. The break-even volume does
not depend on it: it is the daily output at which the API bill equals the GPU bill.
"""

from __future__ import annotations

from dataclasses import dataclass

from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel, lookup_gpu

#: The seeds' share of the day at the estimated load ("real traffic is not 24/7 at peak").
DEFAULT_UTILIZATION = 0.4
MAX_GPU_HOUR_USD = 1000.0
#: The least price and share of the day taken (hunt91 O5: 1e-300 printed a 200-digit dollar figure, 1e-320 "$inf"):
#: a tenth of a cent an hour or a million tokens, 0.1 % of a day (86 s).
MIN_PRICE_USD = 0.001
MIN_UTILIZATION = 0.001


@dataclass(frozen=True)
class Cost:
    """The price of one replica and what its output costs."""

    gpus: int
    usd_per_hour: float
    usd_per_million_output_tokens: float | None  # None when the estimate has no throughput
    breakeven_tokens_per_day: float | None  # None without an API price
    cheaper_than_api_at: float | None  # tokens/day; None without an API price or when out of reach
    utilization: float
    # speed estimate (issue 24): per request and per 1M input + output tokens at the estimated load,
    # and where the price came from (a flag, or the dated list-price table)
    usd_per_request: float | None = None
    usd_per_million_tokens: float | None = None  # input + output tokens
    price_basis: str = ""
    breakeven_requests_per_day: float | None = None  # with an API price and the request shape


def check_utilization(utilization: float) -> float:
    """``utilization`` if it is a fraction in (0, 1], else a :class:`SizingError` naming the flag."""
    if (
        isinstance(utilization, bool)
        or not isinstance(utilization, int | float)
        or not MIN_UTILIZATION <= utilization <= 1
    ):
        raise SizingError("--utilization", utilization, f"a share of the day from {MIN_UTILIZATION:g} to 1")
    return float(utilization)


def _price(value: float, field: str, limit: float = MAX_GPU_HOUR_USD) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not MIN_PRICE_USD <= value <= limit:
        raise SizingError(field, value, f"a price in USD from {MIN_PRICE_USD:g} to {limit:g}")
    return float(value)


def replica_cost(
    gpu_hour_usd: float,
    gpus: int,
    decode_tokens_per_s: float,
    utilization: float = DEFAULT_UTILIZATION,
    api_usd_per_million: float | None = None,
    *,
    requests_per_s: float = 0.0,
    tokens_per_s: float = 0.0,
    price_basis: str = "",
    api_input_usd_per_million: float | None = None,
    request_shape: tuple[int, int] | None = None,
) -> Cost:
    """The module docstring's formulas for one replica of ``gpus`` GPUs at ``gpu_hour_usd`` each.

    With the load's ``requests_per_s`` and ``tokens_per_s`` (input + output tokens a second), also
    ``usd_per_request = usd_per_hour / (requests_per_s x 3600 x utilization)`` and the same per 1M
    input + output tokens. ``api_input_usd_per_million`` (the API's input price) needs ``request_shape``
    (input, output tokens a request) and ``api_usd_per_million`` (its output price).
    """
    _price(gpu_hour_usd, "--gpu-hour-price")
    utilization = check_utilization(utilization)
    per_hour = gpu_hour_usd * gpus
    per_million = None
    if decode_tokens_per_s > 0:
        per_million = per_hour / (decode_tokens_per_s * 3600 * utilization) * 1e6
    breakeven = cheaper = breakeven_requests = None
    if api_input_usd_per_million is not None and (api_usd_per_million is None or request_shape is None):
        needs = "--api-price-per-million (the output price)" if api_usd_per_million is None else (
            "--input-tokens and --output-tokens (the request shape)"
        )  # fmt: skip
        raise SizingError("--api-input-price-per-million", api_input_usd_per_million, f"{needs} as well")
    if api_usd_per_million is not None:
        api = _price(api_usd_per_million, "--api-price-per-million")
        if api_input_usd_per_million is not None and request_shape is not None:
            isl, osl = request_shape
            api += _price(api_input_usd_per_million, "--api-input-price-per-million") * isl / max(1, osl)
        breakeven = per_hour * 24 / api * 1e6
        cheaper = breakeven if breakeven <= decode_tokens_per_s * 86400 else None
        if request_shape is not None:
            breakeven_requests = breakeven / max(1, request_shape[1])
    per_request = per_hour / (requests_per_s * 3600 * utilization) if requests_per_s > 0 else None
    per_million_in_out = per_hour / (tokens_per_s * 3600 * utilization) * 1e6 if tokens_per_s > 0 else None
    return Cost(
        gpus, per_hour, per_million, breakeven, cheaper, utilization, per_request, per_million_in_out, price_basis,
        breakeven_requests,
    )  # fmt: skip


@dataclass(frozen=True)
class GpuPrices:
    """``--gpu-hour-price``: one price for every GPU, or a price per catalog product."""

    default: float | None
    per_gpu: tuple[tuple[str, float], ...] = ()

    def of(self, gpu: GpuModel) -> float | None:
        """The price of one hour of ``gpu`` (None: not priced)."""
        return dict(self.per_gpu).get(gpu.name, self.default)

    def over(self, lower: GpuPrices | None) -> GpuPrices:
        """These prices over ``lower`` (a table, or a source of lower precedence).

        One price for every GPU (``default``) replaces ``lower`` whole; per-product prices replace only their
        products' rows, every other product of ``lower`` keeps its price (hunt91 G4, G6).
        """
        if lower is None or self.default is not None:
            return self
        return GpuPrices(lower.default, tuple(sorted({**dict(lower.per_gpu), **dict(self.per_gpu)}.items())))


def parse_gpu_prices(text: str) -> GpuPrices:
    """``2.5`` or ``H100=2.5,L4=0.7`` (catalog names or aliases); errors name the flag and the item."""
    text = text.strip()
    if "=" not in text:
        return GpuPrices(_price(_number(text), "--gpu-hour-price"))
    prices: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SizingError("--gpu-hour-price", item, "GPU=USD items separated by commas, e.g. H100=2.5,L4=0.7")
        gpu = lookup_gpu(name.strip(), "--gpu-hour-price")
        prices[gpu.name] = _price(_number(value), f"--gpu-hour-price {name.strip()}")
    return GpuPrices(None, tuple(prices.items()))


def _number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise SizingError("--gpu-hour-price", text, "a price in USD per GPU-hour, e.g. 2.5") from None
