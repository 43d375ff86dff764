import pytest

from fitgate.sizing.errors import SizingError
from fitgate.sizing.units import GiB, MiB, cdiv, fmt_gib, parse_size, round_up


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("79.19GiB", int(79.19 * GiB)),
        ("81559MiB", 81559 * MiB),
        ("80GB", 80 * 1000**3),
        ("80Gi", 80 * GiB),
        ("1024", 1024),
        (" 24 GiB ", 24 * GiB),
    ],
)
def test_parse_size_accepts_binary_and_decimal_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "-1GiB", "80XB", "0", "1e9"])
def test_parse_size_rejects_garbage_naming_the_field(text: str) -> None:
    with pytest.raises(SizingError, match=r"^--gpu-memory: "):
        parse_size(text, "--gpu-memory")


def test_cdiv_and_round_up() -> None:
    assert cdiv(8192, 16) == 512
    assert cdiv(8193, 16) == 513
    assert cdiv(0, 16) == 0
    assert round_up(1440, 128) == 1536
    assert fmt_gib(GiB * 3 // 2) == "1.50 GiB"
