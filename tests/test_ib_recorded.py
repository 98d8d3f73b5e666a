"""The InfiniBand reader and placement give, byte for byte, what they gave before they were made lean.

Digests recorded from the networkx-based reader and placement (main at 119a413) on every capture in
../shared/fabrics, on generated fabrics of many shapes and damages (`Fabric.capture_text()`, also with CRLF
line ends), and on the real `ibnetdiscover` output (plain, `-g`, `--full`) of ibsim fabrics. Each case
holds two digests: of the nodes and cables read (every attribute, in order) and of the placement (levels,
every path, every problem in order, or the error). If `hack.ibfabric` changes what it generates, the
generated cases change too: check the difference against the reader's rules, not by re-recording blindly.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import pytest

from hack.ibfabric import SIZED, Spec, build, random_spec
from labeler.errors import TopolabelError
from providers.infiniband.fabric import Fabric
from providers.infiniband.parse import parse_ibnetdiscover
from providers.infiniband.place import Request, place
from testkit.environment import SHARED
from testkit.ibsim import needs_ibsim, simulate

CAPTURES = sorted((SHARED / "fabrics").glob("*.ibnetdiscover"))
SPECS = {
    "sized-8192": SIZED[8192],
    "classic-8192": Spec(pods=8, sus=32, rails=1, hosts=32, spines=16, uplinks=2, cores=8),
    "damaged": Spec(pods=2, sus=3, rails=4, hosts=4, spines=4, cores=2, default_hosts=1, default_hcas=2,
                    cut_hca_links=2, cut_uplinks=2, slow_uplinks=2, seed=7),
    "storage-service": Spec(pods=2, sus=3, rails=2, hosts=3, spines=2, cores=2, storage_leaves=2, service_hosts=2),
    "empty-leaves": Spec(pods=2, sus=3, hosts=3, spines=2, cores=2, empty_leaves=1),
    "cross-pod": Spec(pods=2, sus=3, hosts=3, spines=2, cores=2, cross_pod_cables=2, seed=4),
    "rail-spines": Spec(pods=2, sus=2, rails=8, hosts=3, spines=8, cores=4, rail_spines=True, random_guids=True),
    **{f"random-{seed}": random_spec(seed) for seed in range(40)},
}
SIMULATED = {"small-3-level": Spec(pods=2, sus=2, rails=2, hosts=3, spines=2, cores=2, slow_uplinks=1, default_hcas=1),
             "rail-8": Spec(sus=3, rails=8, hosts=4, spines=8, cut_hca_links=1)}
FLAGS = {"plain": (), "g": ("-g",), "full": ("--full",)}

RECORDED: dict[str, tuple[str, str]] = {
    'capture:gb200-self-only.ibnetdiscover': ('ff004b5761aa3d533572', 'd84f0536ef0a13235db9'),
    'capture:ndr-582ca.ibnetdiscover': ('f456e308bfd47220e63d', '88b8e30a7e10c24a387d'),
    'capture-crlf:gb200-self-only.ibnetdiscover': ('ff004b5761aa3d533572', 'd84f0536ef0a13235db9'),
    'capture-crlf:ndr-582ca.ibnetdiscover': ('f456e308bfd47220e63d', '88b8e30a7e10c24a387d'),
    'sized-8192': ('117c2f1f6b65ee52f13b', 'e5eb7aa7e3d28f054256'),
    'classic-8192': ('8c6b973fbc6f40ecf29c', '016f850b37c9d32bbca5'),
    'damaged': ('7693ebbd62926a68856d', '19881c9f627699fbb7a5'),
    'storage-service': ('66cd1256d5a9a6a26139', '05bcdb62a6d0873002a7'),
    'empty-leaves': ('53176e4f4d89c200c8de', 'f36a77ee5f2926150d6e'),
    'cross-pod': ('0cbbb711ac93988e5dae', '8e1297d8ebe2d78b3293'),
    'rail-spines': ('f93940c735c74937c7b0', '1c9d0e2df8f8d87821a1'),
    'random-0': ('7263ece3ccd3176be8f8', 'b8dc2b81297e1e3a3227'),
    'random-1': ('537f817b6f67a6aef5b2', '27df6054e3d3ccc844b6'),
    'random-2': ('81dc2cc709babfe1748a', '02cfd6df378bb5f4c377'),
    'random-3': ('0fb4273b07ff4ef0b2f4', '51ff37a23c5cacd1002f'),
    'random-4': ('ca7afc2bdead672f01e6', 'e799a409248265bf811b'),
    'random-5': ('ffcf2e54ec85858b499b', '18e50ab22b0a0d8e7a05'),
    'random-6': ('88ee97db7dd1861df6bd', '5fd705fc359bdb7778b1'),
    'random-7': ('9e9ce4ca62330a371a26', 'a1f9dd78abfa808f18df'),
    'random-8': ('3695f828b063d7641383', '1173248ba4650b0f6127'),
    'random-9': ('01865a8c20574df4af53', '2f1f444d479f21db4cca'),
    'random-10': ('d4dc04bfbc3f3ce48272', '11a80ba3668d673b5282'),
    'random-11': ('9017fcd21a2cadbb6e5c', 'ea7fd54152b2f009d2a1'),
    'random-12': ('3cf556ea5a889596daae', '2e0fa979a23b9739aef9'),
    'random-13': ('c456f2ff06ccc004c486', 'f3e08efc7eb39a1c73cc'),
    'random-14': ('cd0ab51552b191033c8f', '7f5859982f88cfd69a3f'),
    'random-15': ('d46539d9a74dd56194b9', '91bce6847751d9364e52'),
    'random-16': ('bf50f3bc88f9973cfe55', '86e080bbe49fc45fc51e'),
    'random-17': ('148d7f2eb2039be0b978', '81bd387f119ff518450b'),
    'random-18': ('750c33739431e0c12bda', '47fdf5a544855d50be0c'),
    'random-19': ('b4e07ab45359a4f3011d', 'c5ddd7445551fc4ab52b'),
    'random-20': ('6ceece22b5ebc508f213', '47761abe33975ab9cd45'),
    'random-21': ('19e84eed958a6618f2ca', '53eee5851af443b8079d'),
    'random-22': ('abc8939bc26fc78b150d', 'a59cb1fac8d7ba95930d'),
    'random-23': ('7554f6c52edc94f5a8e1', 'fab24e821ea2f16c3d2c'),
    'random-24': ('649a4f8149ea26032665', '17ef7fc4075716df485e'),
    'random-25': ('10d4cb20d2c6cf8b0ff7', '225ffba2cae57573735a'),
    'random-26': ('7ea10c32292a9a6b78e7', 'fa55c6485e341e026517'),
    'random-27': ('28ee504144655ad50369', '2a9ede45f4fb28c00cbc'),
    'random-28': ('0f483bfc08bbfeef00b7', 'e0af52a934ee9366cf56'),
    'random-29': ('ccb195c1f510244334ad', 'e5a628822921f947ec23'),
    'random-30': ('31ec829834d0a0bedcf4', '615577ec5cfbdc99c7a1'),
    'random-31': ('a265ee170e9901455b16', '2ba302310f3e5cbde293'),
    'random-32': ('4781fbb645838b1d512c', '2f57ecd3a9b4181f34c8'),
    'random-33': ('902cfa6704fa86bcc0cd', '31738648157578b28952'),
    'random-34': ('e7af0c3a4e7d5fa42e1b', '4d1a564341557757600e'),
    'random-35': ('0b937fc17eeff74f3a3d', '1cacee91cdc311bbccad'),
    'random-36': ('1f2c08afeda89e9097d6', '31045e94f21ca897b31d'),
    'random-37': ('e7329fbd4fc2ce9c0250', '989e9144ed03cf30417c'),
    'random-38': ('66341e1a813936c2321a', '4051115a31c5d480d4b6'),
    'random-39': ('8b7eba86bded8f621af9', '411c209f4ec84a919733'),
    'damaged:crlf': ('7693ebbd62926a68856d', '19881c9f627699fbb7a5'),
    'random-3:crlf': ('0fb4273b07ff4ef0b2f4', '51ff37a23c5cacd1002f'),
    'ibsim:small-3-level:plain': ('db28be70334a93c32588', '47f91c965bf673efeebd'),
    'ibsim:small-3-level:g': ('db28be70334a93c32588', '47f91c965bf673efeebd'),
    'ibsim:small-3-level:full': ('db28be70334a93c32588', '47f91c965bf673efeebd'),
    'ibsim:rail-8:plain': ('bdfa00fc776ce33199df', '199ded86ee091f2d96cc'),
    'ibsim:rail-8:g': ('bdfa00fc776ce33199df', '199ded86ee091f2d96cc'),
    'ibsim:rail-8:full': ('bdfa00fc776ce33199df', '199ded86ee091f2d96cc'),
}


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()[:20]


def digests(text: str) -> tuple[str, str]:
    """(what was read, what was placed), each as a digest of its every detail in order."""
    try:
        fabric = parse_ibnetdiscover(text, "capture")
    except TopolabelError as exc:
        return digest(["error", type(exc).__name__, str(exc)]), ""
    try:
        found = place(fabric, Request())
    except TopolabelError as exc:
        return digest(as_recorded(fabric)), digest(["error", type(exc).__name__, str(exc)])
    placed = [found.level_names, sorted(found.paths.items()), [[p.message, p.node] for p in found.problems]]
    return digest(as_recorded(fabric)), digest(placed)


def as_recorded(fabric: Fabric) -> list:
    """The fabric in the shape the digests were recorded from (a record per node, its port GUIDs in the order
    given; a record per cable with its ends by GUID), so the columns must hold exactly what that held."""
    port_guids: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (node, port), port_guid in fabric.port_guids.items():
        port_guids[node].append((port, port_guid))
    nodes = [[guid, kind, desc, nports, port_guids[node]]
             for node, (guid, kind, desc, nports) in enumerate(zip(fabric.guids, fabric.kinds, fabric.descs,
                                                                   fabric.nports))]
    cables = []
    for a, port_a, b, port_b, rate in fabric.cables:
        ends = {fabric.guids[a]: port_a, fabric.guids[b]: port_b}
        cables.append([fabric.guids[a], fabric.guids[b], list(ends.items()), *fabric.rates[rate]])
    return [nodes, cables]


def text_of(case: str) -> str:
    """`capture:FILE`, `capture-crlf:FILE` (../shared/fabrics), or a generated `SPEC` / `SPEC:crlf`."""
    kind, _, rest = case.partition(":")
    if kind in ("capture", "capture-crlf"):
        text = (SHARED / "fabrics" / rest).read_text()
    else:
        text = build(SPECS[kind]).capture_text()
    return text.replace("\n", "\r\n") if kind == "capture-crlf" or rest == "crlf" else text


CASES = [f"capture:{path.name}" for path in CAPTURES] + [f"capture-crlf:{path.name}" for path in CAPTURES] + \
    list(SPECS) + ["damaged:crlf", "random-3:crlf"]


@pytest.mark.parametrize("case", CASES)
def test_reads_and_places_as_recorded(case: str) -> None:
    assert digests(text_of(case)) == RECORDED[case]


@needs_ibsim
@pytest.mark.slow
@pytest.mark.parametrize("name", SIMULATED)
def test_real_ibnetdiscover_output_reads_and_places_as_recorded(name: str, tmp_path: Path) -> None:
    with simulate(build(SIMULATED[name]), tmp_path) as sim:
        for flag, args in FLAGS.items():
            assert digests(sim.discover(*args)) == RECORDED[f"ibsim:{name}:{flag}"], flag


def record() -> None:
    """Print RECORDED for the reader in this checkout (how the table above was made)."""
    import tempfile

    for case in CASES:
        print(f"    {case!r}: {digests(text_of(case))!r},")
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in SIMULATED.items():
            with simulate(build(spec), Path(tmp)) as sim:
                for flag, args in FLAGS.items():
                    print(f"    {f'ibsim:{name}:{flag}'!r}: {digests(sim.discover(*args))!r},")


if __name__ == "__main__":
    record()
