"""The gcp source's pure parts: providerIDs, name filters, the call plan, topology to path."""

from __future__ import annotations

import random
import string
from urllib.parse import quote_plus

import pytest
import re2

from labeler.io.nodes import Node
from labeler.topology.model import Discovery
from providers.gcp import (FILTER_BUDGET, PAGE_SIZE, InstanceInfo, InstanceRef, ListCall, name_filters, node_refs,
                           parse_provider_id, place, plan_calls, topology_path, with_project)

TOPO = {"cluster": "c1", "block": "b1", "subblock": "s1", "host": "h1"}


def gke_names(count: int, stem: str = "gke-train-a3-pool-9f1c2e7a") -> list[str]:
    return [f"{stem}-{i:04x}" for i in range(count)]


def random_names(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_lowercase + string.digits + "-"
    names = set()
    while len(names) < count:
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 61)))
        name = rng.choice(string.ascii_lowercase) + body.rstrip("-")
        if not name.endswith("-"):
            names.add(name)
    return sorted(names)


def matching(filters: list[str], candidates: list[str]) -> set[str]:
    """Which candidates the filters select, evaluated with RE2 as the Compute API does."""
    regexes = [re2.compile(f[len('name eq "'):-1]) for f in filters]
    return {n for n in candidates if any(r.fullmatch(n) for r in regexes)}


# --- providerIDs ---


@pytest.mark.parametrize("pid, ref", [
    ("gce://proj-one/us-central1-b/gke-a3-0001", InstanceRef("proj-one", "us-central1-b", "gke-a3-0001")),
    ("gce:///europe-west4-a/node-7", InstanceRef("", "europe-west4-a", "node-7")),
    ("gce://example.com:proj-x/asia-east1-c/n1", InstanceRef("example.com:proj-x", "asia-east1-c", "n1")),
])
def test_provider_ids_that_name_an_instance(pid: str, ref: InstanceRef) -> None:
    assert parse_provider_id(pid) == ref


@pytest.mark.parametrize("pid, says", [
    ("", "no spec.providerID"),
    ("aws:///us-east-1a/i-0123456789abcdef0", "not a GCE instance"),
    ("kind://docker/kind/kind-worker", "not a GCE instance"),
    ("gce://proj/zone-a", "not a GCE instance"),
    ("gce://proj/zone-a/n1/extra", "not a GCE instance"),
    ("gce://proj/zone-a/Upper", "not a valid instance name"),
    ("gce://proj/zone_a/n1", "not a valid zone"),
    ("gce://Bad_Project/zone-a/n1", "not a project ID"),
])
def test_provider_ids_that_do_not(pid: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_provider_id(pid)


def test_default_project_fills_gaps_and_duplicates_are_problems() -> None:
    found = Discovery("gcp", ("cluster",))
    nodes = [Node("a", provider_id="gce:///z-a/n1"), Node("b", provider_id="gce://proj-one/z-a/n1"),
             Node("c", provider_id="aws:///us-east-1a/i-1"), Node("d", provider_id="gce://proj-two/z-a/n2")]
    refs = with_project(node_refs(nodes, found), "proj-one", found)
    assert refs == {"a": InstanceRef("proj-one", "z-a", "n1"), "d": InstanceRef("proj-two", "z-a", "n2")}
    assert {p.node: p.message for p in found.problems} == {
        "c": "providerID 'aws:///us-east-1a/i-1': not a GCE instance (gce://PROJECT/ZONE/NAME)",
        "b": "instance proj-one/z-a/n1 is also node a's; left as it is"}


def test_no_default_project_is_a_problem_per_node() -> None:
    found = Discovery("gcp", ("cluster",))
    refs = with_project(node_refs([Node("a", provider_id="gce:///z-a/n1")], found), None, found)
    assert refs == {}
    assert "give --project" in found.problems[0].message and found.problems[0].node == "a"


# --- filters ---


@pytest.mark.parametrize("names", [gke_names(1200), random_names(2000), gke_names(700) + random_names(300),
                                   ["solo"], gke_names(1) + ["plain", "other-x"]])
def test_filters_select_exactly_the_names_and_fit_a_url(names: list[str]) -> None:
    filters = name_filters(names)
    assert all(len(quote_plus(f)) <= FILTER_BUDGET for f in filters)
    assert all(len(matching([f], names)) <= PAGE_SIZE for f in filters)
    assert matching(filters, names) == set(names)
    near_misses = [n + "0" for n in names] + [n[:-1] for n in names if len(n) > 1] + ["gke-other-pool-1-0001"]
    assert not matching(filters, [n for n in near_misses if n not in set(names)])


def test_filters_are_full_before_a_new_one_starts() -> None:
    names = random_names(3000, seed=11)
    filters = name_filters(names)
    longest = max(len(n) for n in names)
    for f in filters[:-1]:  # each closed filter had no room for one more name (plus its separator)
        assert len(matching([f], names)) == PAGE_SIZE or len(quote_plus(f)) > FILTER_BUDGET - longest - 3


def test_a_node_pool_costs_one_filter_per_page() -> None:
    """A GKE pool's names share a stem, so 500 of them fit one filter: calls track pages, not name length."""
    assert len(name_filters(gke_names(1200))) == 3
    assert len(name_filters(gke_names(500))) == 1


def test_long_unrelated_names_need_more_filters() -> None:
    names = [f"n{i:03d}-" + "x" * 56 for i in range(500)]  # 61 characters, no shared stem
    frame = len(quote_plus('name eq "()"'))
    per_filter = (FILTER_BUDGET - frame + 3) // (61 + 3)  # each name and its encoded '|'
    assert per_filter == 62
    assert len(name_filters(names)) == -(-500 // per_filter) == 9


# --- call plan ---


def refs(project: str, zone: str, count: int, stem: str = "gke-c-pool-1111aaaa") -> list[InstanceRef]:
    return [InstanceRef(project, zone, n) for n in gke_names(count, f"{stem}-{zone}")]


def test_one_zone_uses_the_zonal_list() -> None:
    calls = plan_calls(refs("p1", "z-a", 40))
    assert [(c.project, c.zone) for c in calls] == [("p1", "z-a")]


def test_small_zones_share_one_aggregated_list() -> None:
    calls = plan_calls(refs("p1", "z-a", 40) + refs("p1", "z-b", 40) + refs("p1", "z-c", 40))
    assert [(c.project, c.zone) for c in calls] == [("p1", None)]


def test_full_zones_keep_their_zonal_lists_on_a_tie() -> None:
    calls = plan_calls(refs("p1", "z-a", 500) + refs("p1", "z-b", 1000))
    assert [(c.project, c.zone) for c in calls] == [("p1", "z-a"), ("p1", "z-b"), ("p1", "z-b")]


def test_aggregated_wins_when_pages_straddle_zones() -> None:
    calls = plan_calls(refs("p1", "z-a", 600) + refs("p1", "z-b", 300))
    assert [(c.project, c.zone) for c in calls] == [("p1", None), ("p1", None)]


def test_projects_are_planned_apart() -> None:
    calls = plan_calls(refs("p2", "z-a", 5) + refs("p1", "z-a", 5) + refs("p1", "z-b", 5))
    assert [(c.project, c.zone) for c in calls] == [("p1", None), ("p2", "z-a")]
    assert ListCall("p2", "z-a", "").scope == "projects/p2/zones/z-a"


# --- topology to path ---


def info(**topology: str) -> InstanceInfo:
    return InstanceInfo("a3-ultragpu-8g", "RUNNING", topology)


def test_topology_path_is_coarsest_first() -> None:
    assert topology_path(info(**TOPO), ("cluster", "block", "subblock")) == ("c1", "b1", "s1")
    assert topology_path(info(**TOPO), ("cluster", "block", "subblock", "host")) == ("c1", "b1", "s1", "h1")


def test_missing_topology_says_which_part() -> None:
    with pytest.raises(ValueError, match="no resourceStatus.physicalHostTopology"):
        topology_path(info(), ("cluster", "block", "subblock"))
    with pytest.raises(ValueError, match="without subblock$"):
        topology_path(info(cluster="c1", block="b1"), ("cluster", "block", "subblock"))
    with pytest.raises(ValueError, match="without host; run without --host-level"):
        topology_path(info(cluster="c1", block="b1", subblock="s1"), ("cluster", "block", "subblock", "host"))


def test_place_reports_why_a_node_has_no_path() -> None:
    found = Discovery("gcp", ("cluster", "block", "subblock"))
    node_refs_ = {"ok": InstanceRef("p1", "z-a", "ok"), "gone": InstanceRef("p1", "z-a", "gone"),
                  "cpu": InstanceRef("p1", "z-a", "cpu"), "lost": InstanceRef("p9", "z-x", "lost")}
    instances = {node_refs_["ok"]: info(**TOPO), node_refs_["cpu"]: InstanceInfo("n2-standard-8", "RUNNING", {})}
    place(node_refs_, instances, {"projects/p9": "projects/p9 not found (The resource was not found)"},
          ("cluster", "block", "subblock"), found)
    assert found.paths == {"ok": ("c1", "b1", "s1")}
    messages = {p.node: p.message for p in found.problems}
    assert messages["gone"] == "instance p1/z-a/gone not found (deleted, or a stale providerID)"
    assert messages["cpu"].startswith("instance p1/z-a/cpu (n2-standard-8, RUNNING) has no resourceStatus")
    assert messages["lost"] == "instance p9/z-x/lost: projects/p9 not found (The resource was not found)"
