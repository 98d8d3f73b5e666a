"""The LLDP source against real lldpd in network namespaces: inferred placement versus the wiring."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import yaml

from testkit.lldplab import (Lab, build_lab, dual_homed_wiring, fixed_wiring,  # noqa: F401 (build_lab is a fixture)
                           lab_available, mismatches, random_wiring)
from topolabel.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


def discover(capsys: pytest.CaptureFixture, *args: str) -> dict:
    capsys.readouterr()
    assert main(["discover", "--source", "lldp", "-o", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def dumps(lab: Lab, tmp_path: Path) -> tuple[str, str]:
    hosts = lab.dump(lab.wiring.hosts, tmp_path / "hosts")
    switches = lab.dump(lab.wiring.switches, tmp_path / "switches")
    return str(hosts), str(switches)


def test_fixed_lab_places_racks_and_pairs_and_reports_the_rest(build_lab, tmp_path, capsys) -> None:
    wiring = fixed_wiring()
    hosts, switches = dumps(build_lab(wiring), tmp_path)

    snap = discover(capsys, "--lldp-dir", hosts, "--switch-lldp", switches)
    assert mismatches(snap, wiring) == []
    assert snap["nodes"] == {"gpu-a": {"block": "spine-1", "rack": "leaf-r01"},
                             "gpu-b": {"block": "spine-1", "rack": "leaf-r02_leaf-r03"}}
    why = {p["node"]: p["message"] for p in snap["problems"]}
    assert "no LLDP neighbour on a data-plane port" in why["gpu-c"] and "eno1 -> oob-sw" in why["gpu-c"]
    assert "disagree" in why["gpu-d"] and "leaf-r01" in why["gpu-d"] and "leaf-r02" in why["gpu-d"]

    # without the switches' facts nothing says leaf-r02 and leaf-r03 are a pair: gpu-b's ports disagree
    alone = discover(capsys, "--lldp-dir", hosts)
    assert set(alone["nodes"]) == {"gpu-a"} and alone["nodes"]["gpu-a"] == {"rack": "leaf-r01"}
    assert any(p.get("node") == "gpu-b" and "disagree" in p["message"] for p in alone["problems"])


@pytest.mark.parametrize("seed, blocks", [(20261130, 2), (7, 3)])
def test_unseen_random_wiring_lands_every_host_right(build_lab, tmp_path, capsys, seed, blocks) -> None:
    wiring = random_wiring(seed, blocks=blocks)
    hosts, switches = dumps(build_lab(wiring), tmp_path)

    from_lldp = discover(capsys, "--lldp-dir", hosts, "--switch-lldp", switches)
    assert mismatches(from_lldp, wiring) == []
    for host, block in wiring.block.items():  # a block is named after its spines
        assert all(spine in from_lldp["nodes"][host]["block"] for spine in wiring.spines[block])

    switch_map = tmp_path / "switches.yaml"
    switch_map.write_text(yaml.safe_dump(wiring.switch_map()))
    from_map = discover(capsys, "--lldp-dir", hosts, "--switch-map", str(switch_map))
    assert mismatches(from_map, wiring) == []
    assert all(from_map["nodes"][h]["block"] == b for h, b in wiring.block.items())
    assert {h: v["rack"] for h, v in from_map["nodes"].items()} == {h: v["rack"] for h, v in from_lldp["nodes"].items()}


def test_lldpd_works_with_exactly_the_daemonsets_capabilities() -> None:
    """The DaemonSet's lldpd container (its command, every capability dropped but the ones it adds, no
    privilege escalation) run through setpriv in a namespace cabled to a switch's lldpd: it hears the switch."""
    pod = yaml.safe_load((Path(__file__).parent.parent / "manifests" / "agent" / "daemonset.yaml").read_text())
    lldpd = next(c for c in pod["spec"]["template"]["spec"]["containers"] if c["name"] == "lldpd")
    security = lldpd["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"]
    caps = ",".join(["-all", *(f"+{c.lower()}" for c in security["capabilities"]["add"])])
    tag = uuid.uuid4().hex[:6]
    host, switch = f"tlh-{tag}", f"tls-{tag}"
    tmp_path = Path(tempfile.mkdtemp(prefix="topolabel-caps-"))  # not under pytest's 0700 directories:
    tmp_path.chmod(0o755)  # lldpd's unprivileged side (user _lldpd) works with its socket here
    socket = tmp_path / "lldpd.socket"
    daemons = []
    try:
        for ns in (host, switch):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "link", "add", f"h{tag}", "netns", host, "type", "veth", "peer", "name", f"s{tag}",
                        "netns", switch], check=True)
        for ns, veth, name in ((host, f"h{tag}", "eth0"), (switch, f"s{tag}", "swp1")):
            subprocess.run(["ip", "-n", ns, "link", "set", veth, "name", name], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", name, "up"], check=True)
        conf = tmp_path / "switch.conf"
        conf.write_text("configure system hostname leaf-r01\nconfigure lldp tx-interval 1\n")
        daemons.append(subprocess.Popen(["ip", "netns", "exec", switch, "lldpd", "-d", "-u", str(tmp_path / "sw.sock"),
                                         "-O", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        command = [str(socket) if arg == "/run/topolabel/lldpd.socket" else arg for arg in lldpd["command"]]
        log = open(tmp_path / "lldpd.log", "w")
        daemons.append(subprocess.Popen(["ip", "netns", "exec", host, "setpriv", "--no-new-privs", "--bounding-set",
                                         caps, "--inh-caps", "-all", *command], stdout=log, stderr=subprocess.STDOUT))
        deadline, heard = time.monotonic() + 30, []
        while not heard and time.monotonic() < deadline:
            time.sleep(0.5)
            done = subprocess.run(["lldpcli", "-u", str(socket), "-f", "json0", "show", "neighbors"],
                                  capture_output=True, text=True)
            if done.returncode == 0:
                heard = [i for b in json.loads(done.stdout).get("lldp", []) for i in b.get("interface", [])]
        assert heard, (tmp_path / "lldpd.log").read_text()[-2000:]
        assert heard[0]["chassis"][0]["name"][0]["value"] == "leaf-r01"
    finally:
        for proc in daemons:
            proc.kill()
            proc.wait()
        for ns in (host, switch):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(tmp_path, ignore_errors=True)
def test_unmapped_dual_homed_racks_are_inferred_from_their_hosts_and_a_miscabled_claim_is_refused(build_lab, tmp_path, capsys) -> None:
    wiring = dual_homed_wiring()
    hosts, _ = dumps(build_lab(wiring), tmp_path)

    snap = discover(capsys, "--lldp-dir", hosts)  # no switch map, no switch facts
    assert {h: v["rack"] for h, v in snap["nodes"].items()} == {
        "gpu-a1": "tor-a1_tor-a2", "gpu-a2": "tor-a1_tor-a2", "gpu-a3": "tor-a1_tor-a2", "gpu-a4": "tor-a1_tor-a2",
        "gpu-b1": "tor-b", "gpu-b2": "tor-b", "gpu-c1": "tor-c1_tor-c2", "gpu-c2": "tor-c1_tor-c2"}
    notices = " ".join(p["message"] for p in snap["problems"] if "node" not in p)
    assert "pair tor-a1_tor-a2 inferred from 3 hosts" in notices and "pair tor-c1_tor-c2 inferred from 2 hosts" in notices
    why = {p["node"]: p["message"] for p in snap["problems"] if "node" in p}
    assert set(why) == wiring.degraded | wiring.miswired
    assert "hears only tor-a1 of the pair tor-a1_tor-a2" in why["gpu-a4"]
    # the miscabled host's claim (tor-c1 with tor-b) is refused; it does not take rack C's pair from its hosts
    assert "disagree" in why["gpu-x"] and "claim is refused" in why["gpu-x"]
