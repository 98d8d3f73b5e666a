"""InfiniBand fat trees with known ground truth, written as ibsim net files.

`build(Spec(...))` returns a `Fabric`: its net file text (for `ibsim`), the counts ibsim needs
(`-N -S -P`), and the `Truth` (each host's leaf group and block, the HCAs left with the default
description, the cables cut, the links slowed down). Shapes: a 2-level leaf/spine tree, a 3-level tree with
pods (blocks) under cores, rail-optimised scalable units (one leaf per rail, optionally rail-grouped
spines), dual-port HCAs, storage leaves that every host also reaches, leaves with no host yet, service
hosts (UFM, storage heads) that are not compute nodes, and a leaf cabled to another pod's spine. Damage is
drawn from a seeded RNG.

    python -m hack.ibfabric --pods 2 --sus 4 --rails 8 --hosts 4 --spines 8 --cores 4 -o fabric.net
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_HCA_DESC = "MT4129 ConnectX7   Mellanox Technologies"
DEFAULT_SWITCH_DESC = "Quantum Mellanox Technologies"
STORAGE_DEVICE = "storage0"
LOWER_SPEED = {"HDR": "EDR", "EDR": "FDR", "FDR": "QDR", "QDR": "DDR"}


@dataclass
class Spec:
    pods: int = 1  # blocks; more than one needs cores
    sus: int = 4  # leaf groups (scalable units) per pod
    rails: int = 1  # leaves per leaf group = links per host
    hosts: int = 4  # hosts per leaf group
    spines: int = 2  # spines per pod
    cores: int = 0
    uplinks: int = 1  # cables from each leaf to each of its spines
    ports_per_hca: int = 1  # 2: each HCA is dual-port and covers two rails
    rail_spines: bool = False  # spines grouped by rail: a rail's leaves reach only that rail's spines
    storage_leaves: int = 0  # leaves in pod 1 where every host has one more HCA (STORAGE_DEVICE)
    speed: str = "HDR"
    naming: str = "rack"  # rack: MF0;P1-IBLEAF-03-02:MQM8790/U1; plain: leaf-p1-u3-r2; default: vendor text
    device: str = "mlx5_{}"
    default_hosts: int = 0  # hosts whose HCAs all keep the default description
    default_hcas: int = 0  # single HCAs with the default description, on hosts named by their other HCAs
    random_guids: bool = False  # GUIDs scattered like a real fabric's (vendor prefix, random rest), not in sequence
    cut_hca_links: int = 0  # host cables missing (on hosts with more than one link)
    cut_uplinks: int = 0  # leaf-spine cables missing, on different leaves
    slow_uplinks: int = 0  # leaf-spine links at 1x width or one speed lower
    empty_leaves: int = 0  # leaves in pod 1 with no host cabled (host ports left free), uplinked like the others
    service_hosts: int = 0  # UFM / storage heads with one HCA on a rail-1 leaf of pod 1: not compute nodes
    cross_pod_cables: int = 0  # single cables from a pod-1 leaf to a spine of pod 2 (needs pods >= 2)
    seed: int = 0


@dataclass
class Truth:
    """What a correct reader must find."""

    leafgroup: dict[str, str] = field(default_factory=dict)  # host -> group id
    block: dict[str, str] = field(default_factory=dict)  # host -> pod id
    guids: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # host -> [(device, node GUID)]
    default_hcas: dict[int, str] = field(default_factory=dict)  # GUID -> host, for default descriptions
    cut_uplinks: list[tuple[str, int]] = field(default_factory=list)  # (leaf switch name, port)
    slow_links: list[tuple[str, int, str]] = field(default_factory=list)  # (leaf name, port, rate)
    cut_hosts: dict[str, set[str]] = field(default_factory=dict)  # host -> leaf names it lost a cable to
    empty_leaves: list[str] = field(default_factory=list)  # names of the leaves without hosts
    service: dict[str, str] = field(default_factory=dict)  # service host -> the leaf it is cabled to
    cross_cables: list[tuple[str, str]] = field(default_factory=list)  # (leaf name, other pod's spine name)

    def named_hosts(self) -> set[str]:
        """Hosts a reader places without a GUID map: at least one HCA keeps a named description."""
        return {h for h, hcas in self.guids.items() if any(g not in self.default_hcas for _, g in hcas)}


@dataclass
class Node:
    id: str
    kind: str  # Switch or Ca
    guid: int
    desc: str
    nports: int = 0
    ports: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # port -> (remote id, port, rate)
    name: str = ""  # the readable switch name a reader should derive
    reserved: int = 0  # ports 1..reserved stay free (a leaf's host ports when no host is cabled)


@dataclass
class Fabric:
    spec: Spec
    nodes: dict[str, Node] = field(default_factory=dict)
    truth: Truth = field(default_factory=Truth)

    def add(self, node: Node) -> Node:
        self.nodes[node.id] = node
        return node

    def link(self, a: str, b: str, rate: str) -> tuple[int, int]:
        na, nb = self.nodes[a], self.nodes[b]
        pa, pb = _free(na), _free(nb)
        na.ports[pa], nb.ports[pb] = (b, pb, rate), (a, pa, rate)
        return pa, pb

    def cut(self, a: str, port: int) -> None:
        remote, rport, _ = self.nodes[a].ports.pop(port)
        del self.nodes[remote].ports[rport]

    def counts(self) -> tuple[int, int, int]:
        """ibsim's -N (nodes), -S (switches), -P (ports: switch ports count port 0 too), with room to spare."""
        switches = [n for n in self.nodes.values() if n.kind == "Switch"]
        ports = sum(n.nports + 1 for n in switches) + sum(n.nports for n in self.nodes.values() if n.kind == "Ca")
        return len(self.nodes) + 16, len(switches) + 16, ports + 64

    def first_ca(self) -> str:
        return next(n.id for n in self.nodes.values() if n.kind == "Ca" and n.ports)

    def net_text(self) -> str:
        """The ibsim net file: explicit GUIDs, descriptions after `#`, rates as `lid 0 4xHDR`."""
        out = []
        for node in self.nodes.values():
            guid_key = "switchguid" if node.kind == "Switch" else "caguid"
            tail = " enhanced port 0 lid 0" if node.kind == "Switch" else ""
            out.append(f'{guid_key}={node.guid:#x}\n{node.kind}\t{node.nports} "{node.id}"\t# "{node.desc}"{tail}')
            for port in sorted(node.ports):
                remote, rport, rate = node.ports[port]
                lid = "" if node.kind == "Switch" else "lid 0 lmc 0 "
                out.append(f'[{port}]\t"{remote}"[{rport}]\t# {lid}"{self.nodes[remote].desc}" lid 0 {rate}')
            out.append("")
        return "\n".join(out) + "\n"

    def capture_text(self, switches_first: bool = False) -> str:
        """What `ibnetdiscover` prints for this fabric, without running ibsim: for fabrics too large to
        simulate here (100,000 HCAs). Same layout as the tool's plain output: a block per node, switch
        ports as `[p] "H-guid"[rp](portguid) # "desc" lid L 4xHDR`, CA ports with their own port GUID;
        a port's GUID is its node's GUID plus the port number, as ibsim gives them. Nodes in the order they
        were built, or with `switches_first` in the tool's order: every switch, then every CA."""
        lids = {node.id: lid for lid, node in enumerate(self.nodes.values(), start=1)}
        out = ["#\n# Topology file: generated by hack.ibfabric\n#\n"]
        order = list(self.nodes.values())
        if switches_first:
            order.sort(key=lambda node: node.kind != "Switch")
        for node in order:
            kind = "S" if node.kind == "Switch" else "H"
            key = "switchguid" if node.kind == "Switch" else "caguid"
            out.append(f"vendid=0x2c9\ndevid=0xd2f2\nsysimgguid={node.guid:#x}\n{key}={node.guid:#x}\n")
            tail = f" enhanced port 0 lid {lids[node.id]} lmc 0" if node.kind == "Switch" else ""
            out.append(f'{node.kind}\t{node.nports} "{kind}-{node.guid:016x}"\t\t# "{node.desc}"{tail}\n')
            for port in sorted(node.ports):
                remote_id, rport, rate = node.ports[port]
                remote = self.nodes[remote_id]
                rkind = "S" if remote.kind == "Switch" else "H"
                rpguid = f"({remote.guid + rport:x})" if remote.kind == "Ca" else ""
                if node.kind == "Switch":
                    out.append(f'[{port}]\t"{rkind}-{remote.guid:016x}"[{rport}]{rpguid}\t\t'
                               f'# "{remote.desc}" lid {lids[remote_id]} {rate}\n')
                else:
                    out.append(f'[{port}]({node.guid + port:x}) \t"{rkind}-{remote.guid:016x}"[{rport}]{rpguid}\t\t'
                               f'# lid {lids[node.id]} lmc 0 "{remote.desc}" lid {lids[remote_id]} {rate}\n')
            out.append("\n")
        return "".join(out)

    def guid_map(self, hosts: set[str] | None = None) -> dict[str, list[str]]:
        """`--guid-map` content: host -> [device=GUID], for `hosts` (default: all)."""
        return {h: [f"{d}={g:#018x}" for d, g in hcas] for h, hcas in self.truth.guids.items()
                if hosts is None or h in hosts}

    def node_name_map(self) -> str:
        """An ibnetdiscover node-name-map naming the default-description HCAs."""
        devices = {g: d for hcas in self.truth.guids.values() for d, g in hcas}
        return "".join(f'{g:#018x} "{host} {devices[g]}"\n' for g, host in sorted(self.truth.default_hcas.items()))


def _free(node: Node) -> int:
    port = node.reserved + 1
    while port in node.ports:
        port += 1
    if port > node.nports:
        node.nports = port
    return port


def build(spec: Spec) -> Fabric:
    """A fabric from `spec`; hosts take a leaf's low ports and uplinks the ports after them, as on the rack."""
    if spec.rail_spines and spec.rails > 1 and not spec.cores:
        raise ValueError("rail-grouped spines without cores make one separate subnet per rail")
    if spec.pods > 1 and not spec.cores:
        raise ValueError("pods are joined by cores: give cores > 0")
    if spec.cross_pod_cables and spec.pods < 2:
        raise ValueError("a cable to another pod's spine needs pods >= 2")
    rng = random.Random(spec.seed)
    fabric = Fabric(spec)
    guids = _Guids(rng, spec.random_guids)
    rate = f"4x{spec.speed}"
    cores = [fabric.add(_switch(spec, guids, "core", f"core{c + 1}", c + 1)) for c in range(spec.cores)]
    first_spines: list[Node] = []
    pod_spines: list[list[Node]] = []
    for pod in range(spec.pods):
        spines = [fabric.add(_switch(spec, guids, "spine", f"p{pod + 1}-spine{s + 1}", s + 1, pod + 1))
                  for s in range(spec.spines)]
        first_spines = first_spines or spines
        pod_spines.append(spines)
        for spine in spines:
            for core in cores:
                fabric.link(spine.id, core.id, rate)
        leaves = {(su, rail): fabric.add(_switch(spec, guids, "leaf", f"p{pod + 1}-su{su + 1}-r{rail + 1}",
                                                 rail + 1, pod + 1, su + 1))
                  for su in range(spec.sus) for rail in range(spec.rails)}
        for su in range(spec.sus):
            for n in range(spec.hosts):
                _host(fabric, guids, pod, su, n, leaves, rate)
        if pod == 0:
            for e in range(spec.empty_leaves):  # a unit whose hosts are not installed: host ports stay free
                leaf = fabric.add(_switch(spec, guids, "leaf", f"p1-empty{e + 1}", 1, 1, spec.sus + e + 1))
                leaf.reserved = spec.hosts
                leaves[(spec.sus + e, 0)] = leaf
                fabric.truth.empty_leaves.append(leaf.name)
        for (su, rail), leaf in sorted(leaves.items()):
            for spine in _spines_of(spec, spines, rail):
                for _ in range(spec.uplinks):
                    fabric.link(leaf.id, spine.id, rate)
    storage = [fabric.add(_switch(spec, guids, "storage", f"storage{s + 1}", s + 1, 1))
               for s in range(spec.storage_leaves)]
    for i, host in enumerate(sorted(fabric.truth.guids) if storage else []):
        device = STORAGE_DEVICE
        hca = fabric.add(Node(f"hca-{host}-{device}", "Ca", guids.next("Ca"), f"{host} {device}", 1))
        fabric.truth.guids[host].append((device, hca.guid))
        fabric.link(hca.id, storage[i % len(storage)].id, rate)
    for leaf in storage:
        for spine in first_spines:
            fabric.link(leaf.id, spine.id, rate)
    _service_hosts(fabric, guids, rate)
    _cross_pod_cables(fabric, rng, pod_spines, rate)
    _damage(fabric, rng)
    return fabric


def _service_hosts(fabric: Fabric, guids: "_Guids", rate: str) -> None:
    """UFM servers and storage heads: one HCA each, on the rail-1 leaf of pod 1's first unit."""
    leaf = fabric.nodes["sw-p1-su1-r1"]
    for s in range(fabric.spec.service_hosts):
        host = f"{'ufm' if s % 2 == 0 else 'stor'}-{s // 2 + 1:02d}"
        hca = fabric.add(Node(f"hca-{host}-mlx5_0", "Ca", guids.next("Ca"), f"{host} mlx5_0", 1))
        fabric.link(hca.id, leaf.id, rate)
        fabric.truth.service[host] = leaf.name


def _cross_pod_cables(fabric: Fabric, rng: random.Random, pod_spines: list[list[Node]], rate: str) -> None:
    """A pod-1 leaf cabled to a spine of pod 2, as a cable plugged into the wrong patch panel."""
    leaves = sorted(n.id for n in fabric.nodes.values() if n.id.startswith("sw-p1-su"))
    for leaf_id in rng.sample(leaves, fabric.spec.cross_pod_cables):
        spine = rng.choice(pod_spines[1])
        fabric.link(leaf_id, spine.id, rate)
        fabric.truth.cross_cables.append((fabric.nodes[leaf_id].name, spine.name))


class _Guids:
    """GUIDs like real ones (vendor OUI prefixes), far enough apart for a node's port GUIDs.

    In sequence by default; `scattered` draws the low 32 bits at random (as adapters from different batches
    have), so measurements of compressed fabric data are not flattered by sequential GUIDs.
    """

    def __init__(self, rng: random.Random, scattered: bool = False) -> None:
        self.rng, self.scattered, self.seen = rng, scattered, set()
        self.switch = 0x2C5EAB0300000000 + (rng.getrandbits(20) << 12)
        self.ca = 0xE09D730300000000 + (rng.getrandbits(20) << 16)

    def next(self, kind: str) -> int:
        if self.scattered:
            prefix = 0x2C5EAB0300000000 if kind == "Switch" else 0xE09D730300000000
            guid = prefix | (self.rng.getrandbits(28) << 4)
            while guid in self.seen:
                guid = prefix | (self.rng.getrandbits(28) << 4)
            self.seen.add(guid)
            return guid
        if kind == "Switch":
            self.switch += 0x40
            return self.switch
        self.ca += 0x10
        return self.ca


def _switch(spec: Spec, guids: _Guids, tier: str, ident: str, index: int, pod: int = 0, su: int = 0) -> Node:
    if spec.naming == "default":
        desc = name = ""
    elif spec.naming == "plain":
        name = {"core": f"core-{index}", "spine": f"spine-p{pod}-{index}", "leaf": f"leaf-p{pod}-u{su}-r{index}",
                "storage": f"storage-leaf-{index}"}[tier]
        desc = name
    else:
        name = {"core": f"ibcore-{index:02d}", "spine": f"p{pod}-ibspine-{index:02d}",
                "leaf": f"p{pod}-ibleaf-{su:02d}-{index:02d}", "storage": f"p{pod}-ibstor-{index:02d}"}[tier]
        desc = f"MF0;{name.upper()}:MQM8790/U1"
    guid = guids.next("Switch")
    return Node(f"sw-{ident}", "Switch", guid, desc or DEFAULT_SWITCH_DESC, name=name or f"sw-{guid:016x}")


def _spines_of(spec: Spec, spines: list[Node], rail: int) -> list[Node]:
    if not spec.rail_spines:
        return spines
    per_rail = max(1, len(spines) // spec.rails)
    start = (rail * per_rail) % len(spines)
    return spines[start:start + per_rail]


def _host(fabric: Fabric, guids: _Guids, pod: int, su: int, n: int, leaves: dict, rate: str) -> None:
    spec = fabric.spec
    host = f"p{pod + 1}-gpu-{su + 1:02d}-c{n + 1:02d}"
    fabric.truth.leafgroup[host] = f"p{pod + 1}-su{su + 1}"
    fabric.truth.block[host] = f"p{pod + 1}"
    fabric.truth.guids[host] = []
    for j in range(max(1, spec.rails // spec.ports_per_hca)):
        rails = range(j * spec.ports_per_hca, min(spec.rails, (j + 1) * spec.ports_per_hca))
        device = spec.device.format(j)
        hca = fabric.add(Node(f"hca-{host}-{device}", "Ca", guids.next("Ca"), f"{host} {device}", len(rails)))
        fabric.truth.guids[host].append((device, hca.guid))
        for rail in rails:
            fabric.link(hca.id, leaves[(su, rail)].id, rate)


def _damage(fabric: Fabric, rng: random.Random) -> None:
    """Default descriptions, cut cables and slow links, on distinct hosts and leaves chosen by the seed."""
    spec, truth, nodes = fabric.spec, fabric.truth, fabric.nodes
    hosts = sorted(truth.guids)
    rng.shuffle(hosts)
    compute = {h: [(d, g) for d, g in truth.guids[h] if d != STORAGE_DEVICE] for h in hosts}
    by_guid = {n.guid: n for n in nodes.values()}
    for host in hosts[:spec.default_hosts]:
        for _, guid in truth.guids[host]:
            by_guid[guid].desc = DEFAULT_HCA_DESC
            truth.default_hcas[guid] = host
    rest = [h for h in hosts[spec.default_hosts:] if len(compute[h]) > 1]
    for host in rest[:spec.default_hcas]:
        guid = rng.choice(compute[host])[1]
        by_guid[guid].desc = DEFAULT_HCA_DESC
        truth.default_hcas[guid] = host
    multi = [h for h in rest[spec.default_hcas:] if sum(by_guid[g].nports for _, g in compute[h]) > 1]
    for host in multi[:spec.cut_hca_links]:
        hca = by_guid[rng.choice(compute[host])[1]]
        port = rng.choice(sorted(hca.ports))
        truth.cut_hosts[host] = {nodes[hca.ports[port][0]].name}
        fabric.cut(hca.id, port)
    leaves = [n for n in nodes.values() if n.kind == "Switch" and n.id.startswith("sw-p") and "-su" in n.id]
    rng.shuffle(leaves)
    uplinks = [(leaf, port) for leaf in leaves for port, (remote, _, _) in sorted(leaf.ports.items())
               if "spine" in remote]
    for leaf in leaves[:spec.cut_uplinks]:
        port = rng.choice([p for lf, p in uplinks if lf is leaf])
        truth.cut_uplinks.append((leaf.name, port))
        fabric.cut(leaf.id, port)
    for leaf in leaves[spec.cut_uplinks:spec.cut_uplinks + spec.slow_uplinks]:
        port = rng.choice([p for lf, p in uplinks if lf is leaf and p in leaf.ports])
        remote, rport, rate = leaf.ports[port]
        slow = f"1x{spec.speed}" if len(truth.slow_links) % 2 == 0 else f"4x{LOWER_SPEED[spec.speed]}"
        leaf.ports[port] = (remote, rport, slow)
        nodes[remote].ports[rport] = (leaf.id, port, slow)
        truth.slow_links.append((leaf.name, port, slow))


# Fabrics by HCA count, GUIDs scattered as on a real fabric, for size and speed measurements: the rail-optimised
# 8,192-HCA fabric of bench/infiniband.py (1,024 hosts x 8 rails), and 12,500 hosts x 8 rails in 25 pods.
SIZED = {8192: Spec(pods=8, sus=4, rails=8, hosts=32, spines=16, uplinks=2, cores=8, random_guids=True),
         100_000: Spec(pods=25, sus=20, rails=8, hosts=25, spines=16, cores=16, rail_spines=True, random_guids=True)}


def random_spec(seed: int) -> Spec:
    """A shape drawn from `seed`, for tests on fabrics the inference was not tuned on."""
    rng = random.Random(seed)
    rails = rng.choice([1, 2, 4, 8])
    pods = rng.choice([1, 2, 3])
    spines = rng.choice([r for r in (2, 4, 8) if r >= min(rails, 4)]) if rails > 1 else rng.choice([2, 3, 4])
    cores = rng.randint(2, 4) if pods > 1 else 0
    return Spec(pods=pods, sus=rng.randint(2, 5), rails=rails, hosts=rng.randint(2, 6), spines=spines,
                cores=cores, uplinks=rng.choice([1, 2]), ports_per_hca=2 if rails > 1 and rng.random() < 0.3 else 1,
                rail_spines=rails > 1 and spines >= rails and cores > 0 and rng.random() < 0.5,
                naming=rng.choice(["rack", "plain", "default"]), device=rng.choice(["mlx5_{}", "HCA-{}"]),
                default_hosts=rng.randint(0, 2), default_hcas=rng.randint(0, 2) if rails > 1 else 0,
                cut_hca_links=rng.randint(0, 2) if rails > 1 else 0, seed=seed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, value in Spec().__dict__.items():
        kind = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(value, bool) else type(value)
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=value)
    parser.add_argument("-o", "--output", required=True, help="net file to write")
    args = vars(parser.parse_args(argv))
    out = Path(args.pop("output"))
    fabric = build(Spec(**args))
    out.write_text(fabric.net_text())
    nodes, switches, ports = fabric.counts()
    print(f"{out}: {len(fabric.truth.guids)} hosts; run: IBSIM_SOCKNAME=x ibsim -s -n -N {nodes} -S {switches} "
          f"-P {ports} {out}")


if __name__ == "__main__":
    main()
