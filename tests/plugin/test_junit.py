"""JUnit XML: each parity test's counts as properties, for CI dashboards to chart."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

SUITE = """
import pytest
import torch


def breaking(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


@pytest.mark.compile_parity(backend="aot_eager")
def test_breaks(compile_parity):
    compile_parity(breaking, torch.randn(3))


@pytest.mark.compile_parity(backend="eager", max_graph_breaks=0)
def test_over_budget(compile_parity):
    compile_parity(breaking, torch.randn(3))


def test_plain():
    pass
"""


def properties(pytester: pytest.Pytester, xml: str) -> dict[str, dict[str, str]]:
    """Test name -> its properties, as a dashboard reading the file sees them."""
    root = ET.parse(pytester.path / xml).getroot()
    return {
        case.attrib["name"]: {p.attrib["name"]: p.attrib["value"] for p in case.iter("property")}
        for case in root.iter("testcase")
    }


def test_junit_xml_carries_the_counts_of_passed_and_failed_parity_tests(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("--junitxml=junit.xml")
    result.assert_outcomes(passed=2, failed=1)

    found = properties(pytester, "junit.xml")
    counts = {"torchcompile.graphs": "2", "torchcompile.graph_breaks": "1"}
    counts |= {"torchcompile.recompiles": "0", "torchcompile.fallbacks": "0"}
    for name in ("test_breaks", "test_over_budget"):  # a failing test's counts are the news
        assert {
            k: v for k, v in found[name].items() if k != "torchcompile.compile_time_s"
        } == counts
        assert float(found[name]["torchcompile.compile_time_s"]) >= 0
    assert found["test_plain"] == {}
