"""The operator's GPU-hour prices (hunt91 G6): spec, chart, ConfigMap, then the dated list table, each over the next."""

from __future__ import annotations

import logging

import pytest

from fitgate.operator.decision.evaluate import evaluate
from fitgate.operator.decision.pricing import (
    CHART_BASIS,
    CONFIGMAP_BASIS,
    MAX_PRICES_CHARS,
    SPEC_BASIS,
    check_prices,
    operator_prices,
    price_of,
    prices_for,
)
from fitgate.operator.runtime import handlers
from fitgate.operator.schema.api import parse_spec
from fitgate.operator.schema.config import OperatorConfig
from fitgate.settings import SettingsError
from fitgate.sizing import Verdict, lookup_gpu
from tests.conftest import model
from tests.fitgate_operator.test_operator import SPEC, gpus, node

H100, A100, H200, A30 = (lookup_gpu(n) for n in ("H100-SXM", "A100-80GB", "H200", "A30"))
# The table's medians (data/gpu_prices.json, as of 2026-11-09): A100-80GB of AWS 3.4309, Azure 3.673, Lambda 2.79,
# RunPod 1.59 -> (2.79 + 3.4309) / 2 = 3.11045 -> 3.1105; H200 of Nebius 4.5, RunPod 4.59, AWS 7.912 -> 4.59; A30: no row.
A100_LIST, H200_LIST = 3.1105, 4.59

H200_NODE = node(
    "h200-0",
    {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.memory": "143771", "nvidia.com/gpu.count": "8"},
    {"nvidia.com/gpu": "8"},
)
A100_NODE = node(
    "a100-0",
    {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.count": "8"},
    {"nvidia.com/gpu": "8"},
)


def config(chart: str = "", configmap: str = "", listed: bool = True) -> OperatorConfig:
    return OperatorConfig(gpu_hour_prices=chart, gpu_hour_prices_configmap=configmap, list_prices=listed)


def test_the_list_table_is_the_default_and_says_so() -> None:
    prices = operator_prices(None)  # no setting at all: the chart's default (operator.listPrices: true)
    usd, basis = prices.price(A100) or (None, "")
    assert usd == A100_LIST
    # the rows' own dates (hunt95 F7: every basis said the table's 2026-11-09)
    assert basis.startswith("median on-demand list price of 4 clouds dated 2026-09-25 to 2026-11-09 (AWS 3.4309")
    assert prices.price(A30) is None  # no cloud row: no price, never a guess
    assert prices.price(None) is None  # a GPU not known: the table has no price for it
    assert operator_prices(config(listed=False)).price(A100) is None  # operator.listPrices: false


def test_each_source_overrides_only_the_products_it_names() -> None:
    prices = operator_prices(config(chart="H100=2.5", configmap="H100=3,A30=0.7,H200=4"))
    assert prices.price(H100) == (2.5, CHART_BASIS)  # the chart's value over the ConfigMap's 3
    assert prices.price(A30) == (0.7, CONFIGMAP_BASIS)  # a product the table does not list
    assert prices.price(H200) == (4.0, CONFIGMAP_BASIS)  # over its list price 4.59
    assert prices.price(A100) == (A100_LIST, prices.listed.basis("A100-80GB") if prices.listed else "")
    merged = prices.merged
    assert merged is not None and merged.default is None
    assert (merged.of(H100), merged.of(A30), merged.of(H200), merged.of(A100)) == (2.5, 0.7, 4.0, A100_LIST)


def test_one_price_for_every_gpu_replaces_what_is_below_it() -> None:
    prices = operator_prices(config(chart="H100=2.5", configmap="2.0"))
    # the ConfigMap's 2.0 prices every GPU but the chart's H100; the table is not read (as --gpu-hour-price 2.0)
    assert prices.price(A100) == (2.0, CONFIGMAP_BASIS) and prices.price(A30) == (2.0, CONFIGMAP_BASIS)
    assert prices.price(H100) == (2.5, CHART_BASIS)
    merged = prices.merged
    assert merged is not None and (merged.default, merged.of(H100), merged.of(A100)) == (2.0, 2.5, 2.0)
    assert prices.summary() == f"GPU-hour prices: {CHART_BASIS}: H100-SXM 2.5; {CONFIGMAP_BASIS}: 2 for every GPU"


def test_the_spec_price_comes_first() -> None:
    raw = {**SPEC, "economics": {"gpuHourPriceUsd": 4.0}}
    spec = parse_spec(raw)
    prices = operator_prices(config(chart="H100=2.5"))
    assert price_of(spec, H100, prices) == (4.0, SPEC_BASIS)
    chosen = prices_for(spec, config(chart="H100=2.5"))
    assert chosen is not None and chosen.of(A100) == 4.0
    plain = parse_spec(SPEC)
    assert price_of(plain, H100, prices) == (2.5, CHART_BASIS)
    by_operator = prices_for(plain, config(chart="H100=2.5"))
    assert by_operator is not None and (by_operator.of(H100), by_operator.of(A100)) == (2.5, A100_LIST)


def test_the_cheapest_pool_is_chosen_by_list_price_and_a_chart_row_overrides_it() -> None:
    spec = parse_spec(SPEC)  # Llama-3.1-8B fits on either pool
    nodes = gpus(H200_NODE, A100_NODE)
    llama = model("meta-llama/Llama-3.1-8B-Instruct")

    def chosen(cfg: OperatorConfig) -> str:
        ev = evaluate(spec, llama, nodes, prices=prices_for(spec, cfg))
        assert ev.verdict is Verdict.FITS and ev.best is not None
        return ev.best.pool.product

    # unpriced: the most headroom (the 141 GB H200); list prices: A100-80GB 3.1105 < H200 4.59 $/GPU-h
    assert chosen(config(listed=False)) == "NVIDIA-H200"
    assert chosen(config()) == "NVIDIA-A100-SXM4-80GB"
    # the chart's A100 at 5 overrides only its row: the H200 keeps its list price 4.59 < 5
    assert chosen(config(chart="A100-80GB=5")) == "NVIDIA-H200"


def test_a_bad_configmap_value_is_a_warning_naming_the_key_and_the_rest_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = config(chart="H100=2.5", configmap="H100=free")
    prices = check_prices(cfg)  # no SettingsError: an edit of the ConfigMap never stops the operator
    assert prices.configmap is None and prices.price(H100) == (2.5, CHART_BASIS)
    (warning,) = prices.warnings
    assert warning.startswith("FITGATE_GPU_HOUR_PRICES_CONFIGMAP: 'H100=free' is not valid; expected one price")
    assert "operator.pricesConfigMap" in warning
    with caplog.at_level(logging.INFO):
        handlers._prices(cfg, logging.getLogger("test"))  # what the operator logs at start
    assert [r.levelname for r in caplog.records] == ["INFO", "WARNING"]
    assert caplog.records[0].getMessage() == (
        f"GPU-hour prices: {CHART_BASIS}: H100-SXM 2.5; list prices as of 2026-11-09 for the other listed products"
    )
    assert "'H100=free' is not valid" in caplog.records[1].getMessage()


def test_the_parse_is_bounded() -> None:
    text = ",".join(["H100=2.5"] * (MAX_PRICES_CHARS // 8 + 1))  # 9 characters an item: past 16384
    (warning,) = operator_prices(config(configmap=text)).warnings
    assert f"at most {MAX_PRICES_CHARS} characters" in warning
    with pytest.raises(SettingsError, match=f"FITGATE_GPU_HOUR_PRICES: .* at most {MAX_PRICES_CHARS} characters"):
        check_prices(config(chart=text))


def test_a_long_bad_value_is_cut_in_the_message() -> None:
    text = "H100=2.5," * 100 + "Z9=1"  # 904 characters, the last item not a catalog GPU
    (warning,) = operator_prices(config(configmap=text)).warnings
    # the value cut at 200 characters and "..."; the item at fault named in full (with the catalog's names)
    assert f"'{text[:200]}...'" in warning and "'Z9'" in warning and text[200:400] not in warning


def test_a_bad_chart_value_stops_the_start() -> None:
    with pytest.raises(SettingsError, match=r"FITGATE_GPU_HOUR_PRICES: 'H100=free' is not valid; expected one price"):
        check_prices(config(chart="H100=free"))
    # in an evaluation it is never an error (the start refused it): the other sources stand
    assert operator_prices(config(chart="H100=free")).price(A100) is not None


def test_settings_read_the_two_new_variables() -> None:
    env = {"FITGATE_GPU_HOUR_PRICES_CONFIGMAP": " H100=3 ", "FITGATE_LIST_PRICES": "false"}
    read = OperatorConfig.from_env(env)
    assert (read.gpu_hour_prices_configmap, read.list_prices) == ("H100=3", False)
    assert OperatorConfig.from_env({}).list_prices is True
