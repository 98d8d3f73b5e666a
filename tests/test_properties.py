"""Property-based tests (hypothesis): every reader answers or refuses in one line, and the plan's safety
invariants hold for any cluster and any snapshot.

- Readers: any text or any JSON-like data either reads or raises `TopolabelError`, never anything else.
- Plans: nothing is ever removed that topolabel does not own; a node the source did not place is never
  touched; a set key either was topolabel's or was absent.
- Values: when nodes join (any names, colliding or not), the domains already labelled keep their values.

The budget is bounded for CI (the `ci` profile, about a minute for the whole module on 2 cores); set
HYPOTHESIS_PROFILE=long for a deeper local run. Examples are drawn deterministically, so a failure in CI
reproduces locally.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from kueue_config.tas.capacity import parse_pods
from kueue_config.tas.setup import TASSetup
from kueue_config.tas.workloads import workloads_in
from labeler.cluster.shards import Manifest
from labeler.errors import TopolabelError
from labeler.io.documents import load
from labeler.io.nodes import MANAGED_ANNOTATION, Node, parse_nodes
from labeler.topology.labelvalues import is_valid_value, level_key_problems
from labeler.topology.model import Discovery, Level, Snapshot
from labeler.topology.placement import snapshot_from_dict, to_snapshot, written_values
from labeler.topology.plan import make_plan, owned_keys, plan_node
from labeler.topology.snapshotfile import parse_snapshot
from providers.gpu_clique import parse_cliques
from providers.infiniband.hosts import guid_map_from
from providers.infiniband.parse import parse_ibnetdiscover, parse_node_name_map
from providers.infiniband.published import decode, pack, unpack
from providers.inventory import _from_csv, _from_yaml
from providers.lldp.facts import read_facts
from providers.lldp.place import fabric_from_map

settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# --- inputs: text and data with the shapes readers meet, and the odd values that broke them before ---

ODD = st.sampled_from(["", " ", "²", "٣", "0x1F", "012", "1:30", "~", "a\nb", "kubernetes.io/hostname", "-", "x" * 70])
SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20) | ODD
KEYS = st.sampled_from(["metadata", "name", "labels", "annotations", "spec", "status", "items", "kind", "levels",
                        "nodes", "hosts", "node", "pattern", "rack", "containers", "resources", "requests",
                        "taints", "key", "value", "neighbors", "version", "interface", "lldp", "switches",
                        "nodeLabels", "resourceGroups", "flavors", "template", "replicas", "apiVersion"]) | st.text(max_size=8)
DATA = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
                    max_leaves=25)
TEXT = st.text(max_size=400) | st.binary(max_size=200).map(lambda b: b.decode("latin-1"))


def answers_or_refuses(read: Any, *args: Any) -> None:
    """`read(*args)` returns, or raises a TopolabelError (which the CLI prints as one line); nothing else."""
    try:
        read(*args)
    except TopolabelError:
        pass


def kubernetes_object(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """Objects that look like `kind` (so readers go past the first check) with anything inside."""
    return st.fixed_dictionaries({"apiVersion": st.sampled_from(["v1", "batch/v1", "kubeflow.org/v1",
                                                                 "jobset.x-k8s.io/v1alpha2", "kueue.x-k8s.io/v1beta2"]),
                                  "kind": st.just(kind)},
                                 optional={"metadata": DATA, "spec": DATA, "status": DATA})


@given(TEXT)
def test_any_text_reads_or_is_refused_by_the_text_readers(text: str) -> None:
    for read in (lambda t: load(t, "f"), lambda t: load(t, "f", strings=True), lambda t: read_facts(t, "f"),
                 lambda t: parse_ibnetdiscover(t, "f"), lambda t: parse_node_name_map(t, "f"),
                 lambda t: _from_csv(t, "f"), lambda t: parse_cliques(t, "f")):
        answers_or_refuses(read, text)


@given(DATA)
def test_any_data_reads_or_is_refused_by_the_document_readers(data: Any) -> None:
    for read in (snapshot_from_dict, lambda d, o: parse_nodes(d, o), _from_yaml, guid_map_from, parse_pods,
                 lambda d, o: workloads_in([d], o), lambda d, o: TASSetup.from_objects([d], o),
                 lambda d, o: fabric_from_map(d, o, {}), decode, lambda d, o: Manifest.from_object({"data": d}),
                 lambda d, o: TASSetup.from_objects([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                                      "metadata": {"name": "q"}, "spec": d}], o)):
        answers_or_refuses(read, data, "f")


@given(st.binary(max_size=300) | TEXT.map(lambda t: pack(t.encode(errors="surrogatepass"))))
def test_any_published_blob_unpacks_or_is_refused(blob: bytes) -> None:
    """The collector's blob (a node could run a hostile collector): anything but a fabric is one error."""
    answers_or_refuses(lambda b: decode(unpack(b, "f"), "f"), blob)


@given(st.lists(st.one_of(kubernetes_object("Node"), kubernetes_object("Pod"), kubernetes_object("Job"),
                          kubernetes_object("PyTorchJob"), kubernetes_object("JobSet"), kubernetes_object("Topology"),
                          kubernetes_object("ResourceFlavor"), kubernetes_object("ClusterQueue")), max_size=3))
def test_objects_of_the_right_kind_with_anything_inside(objects: list[dict[str, Any]]) -> None:
    for read in (lambda d: parse_nodes({"items": d}, "f"), lambda d: parse_pods({"items": d}, "f"),
                 lambda d: workloads_in(d, "f"), lambda d: TASSetup.from_objects(d, "f")):
        answers_or_refuses(read, objects)


# --- plan invariants ---------------------------------------------------------------------------------

LABEL_KEYS = st.sampled_from(["topolabel.dev/block", "topolabel.dev/rack", "example.com/rack", "kubernetes.io/hostname",
                              "node.kubernetes.io/instance-type", "cloud.google.com/gke-nodepool", "team/owner",
                              "bad key"])
LEVELS = (Level("block", "topolabel.dev/block"), Level("rack", "topolabel.dev/rack"))
NAMES = st.sampled_from([f"n{i}" for i in range(8)])
VALUES = st.sampled_from(["b1", "b2", "r1", "r2", "rack-1"])


@st.composite
def clusters(draw: Any) -> tuple[list[Node], Snapshot]:
    """Nodes with any labels and any managed-labels annotation, and a snapshot placing some of them."""
    names = draw(st.lists(NAMES, unique=True, min_size=1, max_size=6))
    nodes = []
    for name in names:
        labels = draw(st.dictionaries(LABEL_KEYS, VALUES, max_size=5))
        managed = draw(st.lists(LABEL_KEYS, max_size=4))
        nodes.append(Node(name, labels, {MANAGED_ANNOTATION: ",".join(managed)} if managed else {}))
    placed = draw(st.lists(st.sampled_from(names), unique=True))
    blocks = {n: draw(st.sampled_from(["b1", "b2"])) for n in placed}
    snapshot = Snapshot(LEVELS, {n: {"block": blocks[n], "rack": f"{blocks[n]}-{draw(st.sampled_from(['r1', 'r2']))}"}
                                 for n in placed})
    return nodes, snapshot


@given(clusters())
def test_a_plan_removes_only_owned_keys_and_never_touches_an_unplaced_node(cluster: tuple[list[Node], Snapshot]) -> None:
    nodes, snapshot = cluster
    plan = make_plan(snapshot, nodes)
    by_name = {n.name: n for n in nodes}
    for change in plan.changes:
        node = by_name[change.node]
        assert change.node in snapshot.nodes  # a node the source did not place keeps every label
        for key in change.remove:
            assert key in owned_keys(node) and not level_key_problems(key) and key in node.labels
        for key, value in change.set.items():
            assert snapshot.labels_for(node.name)[key] == value
            assert key in owned_keys(node) or key not in node.labels  # never a foreign key's value rewritten
        assert set(change.managed) <= set(snapshot.labels_for(node.name))


@given(clusters())
def test_a_plan_holds_the_change_plan_node_makes_for_each_node(cluster: tuple[list[Node], Snapshot]) -> None:
    """make_plan's shortcuts (the keys sorted once, a never-labelled node's change made directly) change nothing."""
    nodes, snapshot = cluster
    planned = {c.node: c for c in make_plan(snapshot, nodes).changes}
    for node in nodes:
        alone = plan_node(node, snapshot.labels_for(node.name)) if node.name in snapshot.nodes else None
        assert planned.get(node.name) == alone
        assert alone is None or list(planned[node.name].set.items()) == list(alone.set.items())  # the order printed


@given(st.dictionaries(st.sampled_from([f"a{i}" for i in range(6)]), st.sampled_from(["rack-1", "rack 1", "Rack_1", "r/2"]),
                       min_size=1),
       st.dictionaries(st.sampled_from([f"new{i}" for i in range(4)]),
                       st.sampled_from(["rack-1", "rack 1", "rack/1", "RACK-1", "r/2", "r-2", "x" * 80]), min_size=1))
def test_values_of_labelled_domains_are_stable_when_nodes_join(first: dict[str, str], joining: dict[str, str]) -> None:
    levels = (Level("rack", "topolabel.dev/rack"),)
    before = to_snapshot(Discovery("t", ("rack",), {n: (r,) for n, r in first.items()}), levels)
    labelled = [Node(n, before.labels_for(n), {MANAGED_ANNOTATION: "topolabel.dev/rack"}) for n in before.nodes]
    paths = {**{n: (r,) for n, r in first.items()}, **{n: (r,) for n, r in joining.items()}}
    after = to_snapshot(Discovery("t", ("rack",), paths), levels,
                        written_values(levels, [*labelled, *(Node(n) for n in joining)]))
    assert {n: after.nodes[n] for n in before.nodes} == before.nodes  # nobody already labelled moves
    assert all(is_valid_value(v["rack"]) for v in after.nodes.values())
    racks = {}
    for node, (rack,) in paths.items():  # still one value per domain, and distinct domains stay distinct
        racks.setdefault(rack, set()).add(after.nodes[node]["rack"])
    assert all(len(values) == 1 for values in racks.values())
    assert len({next(iter(v)) for v in racks.values()}) == len(racks)


# --- the snapshot file reader ---------------------------------------------------------------------

SNAPSHOT_VALUES = VALUES | ODD | st.sampled_from(["abc\n", "x" * 63, "A.b_c", "-a", "é", "b1 "])
PROBLEMS = st.fixed_dictionaries({}, optional={"node": NAMES | st.none(), "source": SCALARS,
                                               "message": st.text(max_size=5)})


@st.composite
def snapshot_documents(draw: Any) -> Any:
    """Snapshot files as discover writes them, with any part replaced by anything: wrong types, odd names and
    values, domains under two parents, unknown keys."""
    levels = draw(st.sampled_from([LEVELS, LEVELS[:1], LEVELS[::-1], (Level("block", "kubernetes.io/hostname"),)]))
    names = draw(st.lists(NAMES | ODD, max_size=6))
    doc = {"levels": [{"name": lv.name, "label": lv.label} for lv in levels],
           "nodes": {name: {lv.name: draw(SNAPSHOT_VALUES) for lv in levels} for name in names},
           "problems": draw(st.lists(PROBLEMS, max_size=2))}
    for key in draw(st.lists(st.sampled_from(["levels", "nodes", "problems", "extra"]), max_size=2)):
        doc[key] = draw(DATA)
    if doc["nodes"] and isinstance(doc["nodes"], dict) and draw(st.booleans()):
        doc["nodes"][draw(st.sampled_from(sorted(doc["nodes"], key=str)))] = draw(DATA)
    return doc


@given(snapshot_documents() | DATA)
def test_the_snapshot_file_reader_agrees_with_the_generic_one(document: Any) -> None:
    """msgspec's typed path (labeler.topology.snapshotfile) accepts only what snapshot_from_dict accepts, with the same
    snapshot, and whatever it refuses is refused with the generic reader's message."""
    text = json.dumps(document)
    generic = _outcome(lambda: snapshot_from_dict(load(text, "f"), "f"))
    assert _outcome(lambda: parse_snapshot(text.encode(), "f")) == generic


def _outcome(read: Any) -> Any:
    """A reader's result, or its error's type and message."""
    try:
        return read()
    except TopolabelError as exc:
        return type(exc).__name__, str(exc)
