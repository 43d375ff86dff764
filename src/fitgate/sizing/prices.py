"""List prices per GPU-hour: the default ``--gpu-hour-price`` (``data/gpu_prices.json``, dated and cited).

Each row is one cloud's on-demand list price for one catalog GPU product, with the date it was read
and where. A product's default price is the median of its rows (half the clouds are dearer, half
cheaper). ``--gpu-hour-price`` (the operator's ``operator.prices`` and ``operator.pricesConfigMap``) replaces
its products' rows, or the whole table when it is one price for every GPU (:meth:`GpuPrices.over`). A product
without a row has no price.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from fitgate.sizing.cost import GpuPrices
from fitgate.sizing.gpus import lookup_gpu


@dataclass(frozen=True)
class ListPrice:
    """One cloud's on-demand price of one GPU product."""

    gpu: str  # catalog name
    cloud: str
    offer: str
    usd_per_gpu_hour: float
    date: str
    source: str


@dataclass(frozen=True)
class PriceTable:
    """The table and the date of its newest row."""

    rows: tuple[ListPrice, ...]
    as_of: str

    def default_prices(self) -> GpuPrices:
        """Per catalog product, the median of its clouds' prices (no default for unlisted products)."""
        by_gpu: dict[str, list[float]] = {}
        for r in self.rows:
            by_gpu.setdefault(r.gpu, []).append(r.usd_per_gpu_hour)
        return GpuPrices(None, tuple((g, round(statistics.median(p), 4)) for g, p in sorted(by_gpu.items())))

    def basis(self, gpu: str) -> str:
        """How ``gpu``'s default price was made, for the output."""
        rows = [r for r in self.rows if r.gpu == gpu]
        if not rows:
            return f"no list price for {gpu} (equal prices assumed in rankings; give --gpu-hour-price)"
        clouds = ", ".join(f"{r.cloud} {r.usd_per_gpu_hour:g}" for r in rows)
        dates = sorted({r.date for r in rows})  # hunt95 F7: the rows' own dates, not the table's
        when = f"as of {dates[0]}" if len(dates) == 1 else f"dated {dates[0]} to {dates[-1]}"
        return f"median on-demand list price of {len(rows)} clouds {when} ({clouds}); data/gpu_prices.json"


@lru_cache(maxsize=1)
def price_table() -> PriceTable:
    """The shipped table; every row's GPU is a catalog name (checked here, so a typo fails loudly)."""
    raw = json.loads(resources.files("fitgate.sizing").joinpath("data/gpu_prices.json").read_text())
    rows = tuple(
        ListPrice(
            lookup_gpu(r["gpu"]).name, r["cloud"], r["offer"], float(r["usd_per_gpu_hour"]), r["date"], r["source"]
        )
        for r in raw["prices"]
    )
    return PriceTable(rows, str(raw["as_of"]))
