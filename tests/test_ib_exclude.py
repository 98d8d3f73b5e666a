"""Leaving a storage fabric out of placement (`--ib-exclude`, `--ib-exclude-guids`), on the fabric model itself
and through the infiniband source (the ufm source takes the same options: tests/test_ufm_source.py compares the
two on a simulated fabric with storage leaves)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hack.ibfabric import STORAGE_DEVICE, Spec, build
from labeler.errors import SourceError
from labeler.topology.model import Discovery
from providers.base import SourceContext
from providers.infiniband.parse import parse_ibnetdiscover
from providers.infiniband.select import Exclusion, exclude
from providers.registry import get_source
from tests.test_infiniband_sim import truth_partition

STORAGE = Spec(sus=3, rails=2, hosts=3, spines=2, storage_leaves=2, seed=3)


def discover(tmp_path: Path, text: str, **options: Any) -> Discovery:
    path = tmp_path / "fabric.ibnetdiscover"
    path.write_text(text)
    return get_source("infiniband").discover(SourceContext(options={"ibnetdiscover": str(path), **options}))


def leaf_groups(found: Discovery) -> set[frozenset[str]]:
    return truth_partition({host: path[-1] for host, path in found.paths.items()}, set(found.paths))


def truth_groups(fabric: Any) -> set[frozenset[str]]:
    return truth_partition(fabric.truth.leafgroup, set(fabric.truth.leafgroup))


def test_storage_leaves_join_every_leaf_group_until_they_are_left_out(tmp_path: Path) -> None:
    fabric = build(STORAGE)
    text = fabric.capture_text()
    mixed = discover(tmp_path, text)
    assert leaf_groups(mixed) != truth_groups(fabric)
    found = discover(tmp_path, text, ib_exclude="IBSTOR")
    assert leaf_groups(found) == truth_groups(fabric)
    hosts = len(fabric.truth.guids)
    uplinks = STORAGE.storage_leaves * STORAGE.spines
    assert (f"left out of placement (--ib-exclude/--ib-exclude-guids): 2 switch(es) and 0 HCA(s) selected, "
            f"{hosts} HCA(s) cabled only to them, {hosts + uplinks} cable(s)") in [p.message for p in found.problems]
    assert not any("joins" in p.message or "span leafgroups" in p.message for p in found.problems)


def test_guids_select_as_the_pattern_does(tmp_path: Path) -> None:
    fabric = build(STORAGE)
    text = fabric.capture_text()
    storage = [n.guid for n in fabric.nodes.values() if n.kind == "Switch" and n.id.startswith("sw-storage")]
    by_guid = discover(tmp_path, text, ib_exclude_guids=", ".join(f"0x{g:x}" for g in storage))
    assert by_guid.paths == discover(tmp_path, text, ib_exclude="IBSTOR").paths
    # one host's storage HCA, named by its port GUID (node GUID + 1 in ibsim): that HCA and its cable go
    host = sorted(fabric.truth.guids)[0]
    hca = dict(fabric.truth.guids[host])[STORAGE_DEVICE]
    one = discover(tmp_path, text, ib_exclude_guids=f"{hca + 1:#x}")
    assert ("left out of placement (--ib-exclude/--ib-exclude-guids): 0 switch(es) and 1 HCA(s) selected, "
            "0 HCA(s) cabled only to them, 1 cable(s)") in [p.message for p in one.problems]


def test_hca_descriptions_select_hcas(tmp_path: Path) -> None:
    fabric = build(STORAGE)
    found = discover(tmp_path, fabric.capture_text(), ib_exclude=f" {STORAGE_DEVICE}$")
    assert leaf_groups(found) == truth_groups(fabric)  # the storage leaves stay, without hosts


def test_a_selection_that_matches_nothing_says_so(tmp_path: Path) -> None:
    fabric = build(Spec(sus=2, hosts=2))
    found = discover(tmp_path, fabric.capture_text(), ib_exclude="no-such-switch")
    assert leaf_groups(found) == truth_groups(fabric)
    assert "--ib-exclude/--ib-exclude-guids select nothing in the fabric: check the pattern and GUIDs" in \
        [p.message for p in found.problems]


def test_the_fabric_model_is_left_as_it_was_and_order_is_kept() -> None:
    fabric = parse_ibnetdiscover(build(STORAGE).capture_text(), "capture")
    before = (list(fabric.guids), list(fabric.descs), list(fabric.cables), dict(fabric.port_guids))
    kept, notice = exclude(fabric, Exclusion(re.compile("IBSTOR")))
    assert (fabric.guids, fabric.descs, fabric.cables, fabric.port_guids) == before
    left = set(kept.guids)
    assert kept.guids == [g for g in fabric.guids if g in left] and len(left) < len(fabric.guids)
    by_guid = [(kept.guids[a], pa, kept.guids[b], pb, kept.rates[r]) for a, pa, b, pb, r in kept.cables]
    assert by_guid == [(fabric.guids[a], pa, fabric.guids[b], pb, fabric.rates[r]) for a, pa, b, pb, r in fabric.cables
                       if fabric.guids[a] in left and fabric.guids[b] in left]
    assert {(kept.guids[n], p): g for (n, p), g in kept.port_guids.items()} == \
        {(fabric.guids[n], p): g for (n, p), g in fabric.port_guids.items() if fabric.guids[n] in left}
    assert not any("IBSTOR" in d or d.endswith(STORAGE_DEVICE) for d in kept.descs)
    assert notice is not None and notice.startswith("left out of placement")
    assert exclude(fabric, Exclusion()) == (fabric, None)


@pytest.mark.parametrize("options, error", [
    ({"ib_exclude": "IBSTOR["}, "source: ib_exclude: not a regular expression"),
    ({"ib_exclude_guids": "0x12,storage"}, "source: ib_exclude_guids: 'storage' is not a GUID"),
])
def test_bad_selections_are_refused(options: dict[str, str], error: str, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=re.escape(error)):
        discover(tmp_path, build(Spec(sus=2, hosts=2)).capture_text(), **options)
