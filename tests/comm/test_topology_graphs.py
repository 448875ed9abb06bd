"""The topology builder builds exactly the recorded graphs (``tests/comm/record_topology.py``): same nodes,
same edges, same attributes, same order, same routing tables."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from tests.comm.record_topology import CASES, GRAPHS, Case, build, snapshot


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    with gzip.open(GRAPHS, "rt", encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_graph_is_as_recorded(case: Case, recorded: dict[str, Any]) -> None:
    want = recorded[case[0]]
    got = snapshot(build(case))
    # the node and edge sets with their attributes, then the insertion order and the routing tables
    for part in ("nodes", "edges"):
        assert sorted(map(json.dumps, got[part])) == sorted(map(json.dumps, want[part])), part
    assert got == want
