"""The published fabric form: exactly what the parser read comes back, the same fabric gives the same bytes,
and a 100,000-HCA fabric fits one ConfigMap shard (published to and read back from the real API server)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from hack.ibfabric import SIZED, Spec, build, random_spec
from labeler.cluster.shards import SHARD_BYTES, publish, read_published
from labeler.errors import SourceError
from providers.infiniband.parse import parse_ibnetdiscover
from providers.infiniband.place import Request, place
from providers.infiniband.published import FORMAT, decode, encode, pack, to_bytes, unpack
from testkit.environment import SHARED
from testkit.kubecluster import KubeCluster, kube_cluster  # noqa: F401

NDR = SHARED / "fabrics" / "ndr-582ca.ibnetdiscover"


def round_trip(text: str) -> None:
    fabric = parse_ibnetdiscover(text, "capture")
    back = decode(unpack(pack(to_bytes(encode(fabric))), "published"), "published")
    assert back == fabric
    assert place(back, Request()) == place(fabric, Request())


def test_a_real_capture_comes_back_exactly() -> None:
    round_trip(NDR.read_text())  # default descriptions, SHARP aggregation nodes, partial leaves


@pytest.mark.parametrize("seed", range(6))
def test_generated_fabrics_come_back_exactly(seed: int) -> None:
    spec = random_spec(seed)
    spec.random_guids = seed % 2 == 0
    round_trip(build(spec).capture_text())


def test_the_same_fabric_gives_the_same_bytes_and_a_cut_cable_other_bytes() -> None:
    fabric = build(Spec(sus=2, rails=2, hosts=3, spines=2))
    first = to_bytes(encode(parse_ibnetdiscover(fabric.capture_text(), "a")))
    assert to_bytes(encode(parse_ibnetdiscover(fabric.capture_text(), "b"))) == first
    host = sorted(fabric.truth.guids)[0]
    fabric.cut(f"hca-{host}-mlx5_0", 1)
    assert to_bytes(encode(parse_ibnetdiscover(fabric.capture_text(), "c"))) != first


@pytest.mark.parametrize("doc, fragment", [
    ({"format": "topolabel.dev/ib-fabric/v9"}, "format 'topolabel.dev/ib-fabric/v9', expected"),
    ({"format": FORMAT, "kinds": "SH", "guids": ["1"], "descs": [], "nports": []}, "node columns differ"),
    ({"format": FORMAT, "kinds": "S", "guids": ["zz"], "descs": ["x"], "nports": [1]}, "ValueError"),
    ([1, 2], "AttributeError"),
])
def test_a_malformed_publication_is_one_line(doc: object, fragment: str) -> None:
    with pytest.raises(SourceError) as err:
        decode(doc, "fabric compute")
    assert str(err.value).startswith("fabric compute: not a published fabric") and fragment in str(err.value)
    with pytest.raises(SourceError, match="fabric compute: cannot read the published fabric"):
        unpack(b"not xz", "fabric compute")


@pytest.mark.slow
@pytest.mark.parametrize("hcas", sorted(SIZED))
def test_large_fabrics_fit_one_shard_and_come_back_from_the_server(hcas: int, kube_cluster: KubeCluster) -> None:  # noqa: F811
    fabric = build(SIZED[hcas])
    assert sum(len(v) for v in fabric.truth.guids.values()) == hcas
    parsed = parse_ibnetdiscover(fabric.capture_text(), "generated")
    blob = pack(to_bytes(encode(parsed)))
    print(f"{hcas:,} HCAs: {len(blob):,} bytes published")
    assert len(blob) <= SHARD_BYTES  # one ConfigMap; 16 are allowed, so there is room for 20x this
    namespace = "topolabel-ibsize-test"
    kube_cluster.kubectl("create", "namespace", namespace, check=False)
    api = kube_cluster.api()
    name = f"topolabel-ib-size-{uuid.uuid4().hex[:6]}"
    publish(api, namespace, name, blob, {}, {"app.kubernetes.io/managed-by": "topolabel"}, None)
    found = read_published(api, namespace, name)
    assert found is not None and hashlib.sha256(found[1]).digest() == hashlib.sha256(blob).digest()
    assert decode(unpack(found[1], name), name) == parsed
