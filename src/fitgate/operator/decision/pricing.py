"""The operator's GPU-hour prices, and where each one came from (issue 24, hunt91 G6).

A GPU product's price is, first to last:

1. the ModelDeployment's ``spec.economics.gpuHourPriceUsd`` (one price for its GPUs);
2. ``FITGATE_GPU_HOUR_PRICES`` (chart ``operator.prices``);
3. ``FITGATE_GPU_HOUR_PRICES_CONFIGMAP`` (chart ``operator.pricesConfigMap``: a ConfigMap key the kubelet puts
   into the operator's environment, so no RBAC is needed);
4. the dated list-price table (:func:`fitgate.sizing.prices.price_table`: the median of the major clouds'
   on-demand prices), unless ``FITGATE_LIST_PRICES`` is off (chart ``operator.listPrices: false``).

Sources 2 and 3 have the ``--gpu-hour-price`` syntax (``2.5``, or ``H100=2.5,L4=0.7``) and merge as the flag
merges with the table (:meth:`GpuPrices.over`): a per-product price replaces its product's row below it, one
price for every GPU replaces everything below it. Both are parsed once, bounded (:data:`MAX_PRICES_CHARS`).
A bad ``operator.prices`` stops the operator at start (``fitgate operator``: the chart's own value, caught at
install); a bad ConfigMap value, edited out of band, is logged with the key and ignored, so that an edit never
takes the admission webhook down (webhook.failurePolicy Fail would then deny what would run).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from fitgate.operator.schema.api import ModelDeploymentSpec
from fitgate.operator.schema.config import OperatorConfig
from fitgate.settings import SettingsError
from fitgate.sizing.cost import GpuPrices, parse_gpu_prices
from fitgate.sizing.errors import SizingError
from fitgate.sizing.gpus import GpuModel
from fitgate.sizing.memo import BoundedMemo
from fitgate.sizing.prices import PriceTable, price_table

#: Most characters of one prices value: a price for every catalog GPU fits many times over (~20 a product).
MAX_PRICES_CHARS = 16 * 1024

SPEC_BASIS = "spec.economics.gpuHourPriceUsd"
CHART_BASIS = "operator price (chart operator.prices, FITGATE_GPU_HOUR_PRICES)"
CONFIGMAP_BASIS = "ConfigMap price (chart operator.pricesConfigMap, FITGATE_GPU_HOUR_PRICES_CONFIGMAP)"


def parse_prices(name: str, text: str) -> GpuPrices | None:
    """``text`` of the variable ``name`` (None: empty); :class:`SettingsError` naming it and the bad item."""
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_PRICES_CHARS:
        raise SettingsError(name, text[:40] + "...", f"at most {MAX_PRICES_CHARS} characters of GPU=USD items")
    try:
        return parse_gpu_prices(text)
    except SizingError as exc:
        shown = text if len(text) <= 200 else text[:200] + "..."  # one log line, not the whole ConfigMap key
        raise SettingsError(name, shown, f"one price or GPU=USD items, e.g. H100=2.5,L4=0.7 ({exc})") from None


@dataclass(frozen=True)
class OperatorPrices:
    """The operator's prices by source, and the warnings reading them gave."""

    chart: GpuPrices | None = None
    configmap: GpuPrices | None = None
    listed: PriceTable | None = None
    warnings: tuple[str, ...] = ()

    @cached_property
    def listed_prices(self) -> GpuPrices | None:
        """The table's price per listed product (None: the table is off)."""
        return self.listed.default_prices() if self.listed is not None else None

    @cached_property
    def merged(self) -> GpuPrices | None:
        """Every source over the ones below it (what picks the cheapest pool); None: nothing is priced."""
        out = self.listed_prices
        for layer in (self.configmap, self.chart):
            if layer is not None:
                out = layer.over(out)
        return out

    def price(self, gpu: GpuModel | None) -> tuple[float, str] | None:
        """``gpu``'s price per hour and its basis (which source, or the list table's rows and date).

        A source with one price for every GPU answers for every product (the ones below it are not read).
        """
        for layer, basis in ((self.chart, CHART_BASIS), (self.configmap, CONFIGMAP_BASIS)):
            usd = None if layer is None else layer.of(gpu) if gpu is not None else layer.default
            if usd is not None:
                return usd, basis
        if gpu is None or self.listed is None or self.listed_prices is None:
            return None
        usd = self.listed_prices.of(gpu)
        return None if usd is None else (usd, self.listed.basis(gpu.name))

    def summary(self) -> str:
        """One line for the operator's start-up log: which sources price which products."""
        parts = []
        for layer, basis in ((self.chart, CHART_BASIS), (self.configmap, CONFIGMAP_BASIS)):
            if layer is not None:
                what = f"{layer.default:g} for every GPU" if layer.default is not None else _items(layer)
                parts.append(f"{basis}: {what}")
        if self.listed is not None and not any(
            p is not None and p.default is not None for p in (self.chart, self.configmap)
        ):
            parts.append(f"list prices as of {self.listed.as_of} for the other listed products")
        return "GPU-hour prices: " + ("; ".join(parts) if parts else "none (no cost figures, pools by headroom)")


def _items(prices: GpuPrices) -> str:
    return ", ".join(f"{gpu} {usd:g}" for gpu, usd in prices.per_gpu)


def operator_prices(config: OperatorConfig | None) -> OperatorPrices:
    """The prices ``config`` gives (defaults: the list table only), parsed once per value.

    A bad ``FITGATE_GPU_HOUR_PRICES`` is left out here (``fitgate operator`` refuses it at start, see
    :func:`check_prices`: never fail an evaluation on it); a bad ConfigMap value is left out with a warning.
    """
    config = config if config is not None else OperatorConfig()
    key = (config.gpu_hour_prices, config.gpu_hour_prices_configmap, config.list_prices)
    return _MEMO.get_or_compute(key, lambda: _read(config))


def _read(config: OperatorConfig) -> OperatorPrices:
    warnings = []
    chart = configmap = None
    try:
        chart = parse_prices("FITGATE_GPU_HOUR_PRICES", config.gpu_hour_prices)
    except SettingsError as exc:
        warnings.append(f"{exc}: ignored")
    try:
        configmap = parse_prices("FITGATE_GPU_HOUR_PRICES_CONFIGMAP", config.gpu_hour_prices_configmap)
    except SettingsError as exc:
        warnings.append(f"{exc} (the key of chart operator.pricesConfigMap): ignored, the other prices stand")
    listed = price_table() if config.list_prices else None
    return OperatorPrices(chart, configmap, listed, tuple(warnings))


def check_prices(config: OperatorConfig) -> OperatorPrices:
    """The prices at start-up: :class:`SettingsError` for a bad ``FITGATE_GPU_HOUR_PRICES`` (the chart's value)."""
    parse_prices("FITGATE_GPU_HOUR_PRICES", config.gpu_hour_prices)
    return operator_prices(config)


def prices_for(spec: ModelDeploymentSpec, config: OperatorConfig | None) -> GpuPrices | None:
    """The GPU prices that choose among pools: the spec's own price, else the operator's (module docstring)."""
    if spec.economics is not None and spec.economics.gpu_hour_price_usd is not None:
        return GpuPrices(spec.economics.gpu_hour_price_usd)
    return operator_prices(config).merged


def price_of(spec: ModelDeploymentSpec, gpu: GpuModel | None, prices: OperatorPrices) -> tuple[float, str] | None:
    """The price per hour of the deployment's GPU (``gpu``, None: not known) and its basis."""
    if spec.economics is not None and spec.economics.gpu_hour_price_usd is not None:
        return spec.economics.gpu_hour_price_usd, SPEC_BASIS
    return prices.price(gpu)


#: Parsed prices by their settings' values. Bound 4: one value per process (tests use a few).
_MEMO: BoundedMemo[tuple[str, str, bool], OperatorPrices] = BoundedMemo(4)
