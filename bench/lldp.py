"""Benchmark: the LLDP source on a large synthetic fabric (default 20,000 hosts).

Racks of 16 hosts under MLAG leaf pairs, 8 data ports per host (4 to each leaf) plus a management port,
32 racks per block under 4 spines. Phases, each in a fresh process so its peak RSS is its own:
annotations in a nodes file with a switch map, and NODE.json files with the switches' own LLDP facts.
Each phase is one whole `topolabel` process measured by bench.measure (GNU time): wall, CPU and peak RSS,
Python start-up and imports included. Run: python -m bench.lldp [--hosts N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.measure import load, measure, topolabel
from bench.table import print_table
from providers.lldp.facts import ANNOTATION, Neighbor, to_json

RACK, RACKS_PER_BLOCK, SPINES, PORTS = 16, 32, 4, 8


def fabric(hosts: int) -> tuple[dict[str, str], dict[str, str], dict, dict[str, list[Neighbor]]]:
    """(host -> facts JSON, host -> rack, switch map, switch -> its own neighbours)."""
    facts, truth, leaves, switches = {}, {}, {}, {}
    for h in range(hosts):
        r = h // RACK
        pair = (f"leaf-{r:04d}a", f"leaf-{r:04d}b")
        host = f"gpu-{h:06d}"
        ports = [Neighbor(f"eth{p}", pair[p % 2], f"id-{pair[p % 2]}", f"swp{h % RACK * 4 + p // 2}")
                 for p in range(PORTS)]
        facts[host] = to_json(ports + [Neighbor("eno1", "oob", "id-oob", f"swp{h}")])
        truth[host] = "_".join(pair)
        for leaf in pair:
            leaves[leaf] = f"block-{r // RACKS_PER_BLOCK}"
    for leaf, block in leaves.items():
        spines = [f"spine-{block}-{s}" for s in range(SPINES)]
        peer = leaf[:-1] + ("b" if leaf.endswith("a") else "a")
        switches[leaf] = [Neighbor(f"swp{60 + i}", s) for i, s in enumerate(spines)] + [Neighbor("swp64", peer)]
        for s in spines:
            switches.setdefault(s, [])
    switch_map = {"levels": ["block"], "switches": {leaf: {"block": b} for leaf, b in leaves.items()},
                  "pairs": [[leaf, leaf[:-1] + "b"] for leaf in leaves if leaf.endswith("a")]}
    return facts, truth, switch_map, switches


def write_inputs(tmp: Path, hosts: int) -> dict[str, str]:
    facts, truth, switch_map, switches = fabric(hosts)
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": h, "annotations": {ANNOTATION: f}}}
             for h, f in facts.items()]
    paths = {"nodes": tmp / "nodes.json", "map": tmp / "switches.json", "hosts": tmp / "hosts",
             "switches": tmp / "switches", "truth": tmp / "truth.json"}
    paths["nodes"].write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    paths["map"].write_text(json.dumps(switch_map))
    paths["truth"].write_text(json.dumps(truth))
    for directory, content in ((paths["hosts"], facts), (paths["switches"], {s: to_json(n) for s, n in switches.items()})):
        directory.mkdir()
        for name, text in content.items():
            (directory / f"{name}.json").write_text(text)
    return {k: str(v) for k, v in paths.items()}


PHASES = {
    "annotations (nodes file) + switch map": ["--nodes", "{nodes}", "--switch-map", "{map}"],
    "NODE.json files + switch LLDP facts": ["--lldp-dir", "{hosts}", "--switch-lldp", "{switches}"],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=20_000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_inputs(Path(tmp), args.hosts)
        truth = json.loads(Path(paths["truth"]).read_text())
        for name, template in PHASES.items():
            snap = Path(tmp) / "snap.json"
            cmd = ["discover", "--source", "lldp", "-o", "json", *(a.format(**paths) for a in template)]
            run = measure(topolabel(*cmd), stdout=snap)
            placed = json.loads(snap.read_text())["nodes"]
            if {h: v["rack"] for h, v in placed.items()} != truth:
                raise SystemExit(f"{name}: placement differs from the synthetic wiring")
            rows.append({"phase": name, "hosts": f"{args.hosts:,}", "discover s": f"{run.wall:.2f}",
                         "process CPU s": f"{run.cpu:.2f}", "peak RSS MB": f"{run.rss_mb:.0f}"})
    print_table(f"LLDP source, {args.hosts:,} hosts x {PORTS + 1} neighbours ({load()})", rows)


if __name__ == "__main__":
    main()
