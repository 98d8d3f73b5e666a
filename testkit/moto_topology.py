"""moto's EC2 in server mode, plus the `DescribeInstanceTopology` action moto 5.2 lacks.

moto's server hands every EC2 query to `EC2Response.call_action`, which calls the method named after the
action (`describe_instance_topology`) and serialises an `ActionResult` with moto's serializer, which walks
botocore's output shape for the operation (`instanceSet`/`item`/`networkNodeSet`, `nextToken`). Adding that
one method to `EC2Response` therefore gives a reply that botocore parses like a real one. Instances are
real moto instances (run with `launch`, stopped with the EC2 API); their topology is set per instance
with `place`. The fake keeps the real API's rules (at most 100 ids, no `MaxResults` with ids, only running
instances answered), pages at `page_size`, can fail or throttle a region, and counts calls per region.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

import pytest

MAX_IDS = 100
AMI = "ami-12c6146b"  # an image moto ships in every region


@dataclass(frozen=True)
class Request:
    region: str
    ids: tuple[str, ...]
    max_results: int | None
    next_token: str | None


@dataclass
class Fabric:
    """The topology side of one server: what to answer, how, and what was asked."""

    page_size: int = MAX_IDS
    stopped: Literal["omit", "empty"] = "omit"  # stopped instances left out, or listed with no network nodes
    topology: dict[str, tuple[tuple[str, ...], str | None]] = field(default_factory=dict)
    errors: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # region -> code, message, status
    throttles: Counter[str] = field(default_factory=Counter)  # region -> calls still to throttle
    calls: Counter[str] = field(default_factory=Counter)
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_FABRICS: dict[int, Fabric] = {}  # server port -> its fabric (moto's backends are per process)


class TopologyServer:
    """A ThreadedMotoServer on 127.0.0.1 (a free port) that answers DescribeInstanceTopology."""

    def __init__(self, page_size: int = MAX_IDS) -> None:
        from moto.server import ThreadedMotoServer

        _install()
        self.fabric = Fabric(page_size=page_size)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.url = ""

    def __enter__(self) -> "TopologyServer":
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        self.reset(self.fabric.page_size)
        return self

    def __exit__(self, *exc: Any) -> None:
        _FABRICS.pop(self._port, None)
        self._server.stop()

    @property
    def _port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def reset(self, page_size: int = MAX_IDS) -> None:
        """Forget every instance (in all of moto) and every placement, error and count."""
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")).read()
        self.fabric = _FABRICS[self._port] = Fabric(page_size=page_size)

    def client(self, region: str) -> Any:
        import boto3

        return boto3.client("ec2", region_name=region, endpoint_url=self.url)

    def launch(self, region: str, count: int, instance_type: str = "p5.48xlarge", zone: str | None = None) -> list[str]:
        """Run `count` instances (moto allows any count in one call) and return their ids in launch order."""
        placement = {"AvailabilityZone": zone or f"{region}a"}
        reply = self.client(region).run_instances(ImageId=AMI, MinCount=count, MaxCount=count,
                                                  InstanceType=instance_type, Placement=placement)
        return [i["InstanceId"] for i in reply["Instances"]]

    def place(self, instance: str, network_nodes: list[str], capacity_block: str | None = None) -> None:
        """Give an instance its network node set (top-down); instances never placed are unsupported types."""
        self.fabric.topology[instance] = (tuple(network_nodes), capacity_block)

    def place_tree(self, ids: list[str], top: str, per_leaf: int = 8, layers: int = 3) -> None:
        """Place instances under layer-1 node `nn-<top>`: 4 leaves per spine, `per_leaf` instances per leaf,
        and with `layers=4` two finest nodes per leaf (as p6-b200 types report)."""
        for n, instance in enumerate(ids):
            leaf = n // per_leaf
            path = [f"nn-{top}", f"nn-{top}-s{leaf // 4}", f"nn-{top}-l{leaf}"]
            if layers == 4:
                path.append(f"nn-{top}-l{leaf}-e{n % 2}")
            self.place(instance, path)

    def stop(self, region: str, ids: list[str]) -> None:
        self.client(region).stop_instances(InstanceIds=ids)

    def fail(self, region: str, code: str, message: str, status: int = 400) -> None:
        """Every DescribeInstanceTopology call in `region` fails with this error."""
        self.fabric.errors[region] = (code, message, status)

    def throttle(self, region: str, times: int) -> None:
        """The next `times` calls in `region` fail with RequestLimitExceeded (HTTP 503), as EC2 throttles."""
        self.fabric.throttles[region] = times

    @property
    def calls(self) -> Counter[str]:
        return self.fabric.calls


@pytest.fixture(scope="module")
def _module_topology_server() -> Iterator[TopologyServer]:
    with TopologyServer() as server:
        yield server


@pytest.fixture
def topology_server(_module_topology_server: TopologyServer, monkeypatch: pytest.MonkeyPatch,
                    tmp_path: Any) -> TopologyServer:
    """The module's server, emptied, with fake credentials and no AWS config from this machine."""
    fake_credentials(monkeypatch, tmp_path)
    _module_topology_server.reset()
    return _module_topology_server


def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for key in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_MAX_ATTEMPTS", "AWS_SESSION_TOKEN",
                "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


def _install() -> None:
    """Add the action to moto's EC2 responses once per process (moto looks methods up on the class)."""
    from moto.ec2.responses import EC2Response

    if getattr(EC2Response, "describe_instance_topology", None) is not _describe_instance_topology:
        EC2Response.describe_instance_topology = _describe_instance_topology  # type: ignore[attr-defined]


def _describe_instance_topology(self: Any) -> Any:
    """moto's EC2Response method for the action: `self` is the request, already parsed by moto."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError, InvalidParameterCombination, InvalidParameterValueError

    fabric = _FABRICS[int(self.headers["Host"].rsplit(":", 1)[1])]
    ids = list(self._get_param("InstanceIds", []) or [])
    max_results = self._get_param("MaxResults")
    token = self._get_param("NextToken")
    with fabric.lock:
        fabric.calls[self.region] += 1
        fabric.requests.append(Request(self.region, tuple(ids), max_results, token))
        throttled = fabric.throttles[self.region] > 0
        fabric.throttles[self.region] -= int(throttled)
    failure = ("RequestLimitExceeded", "Request limit exceeded.", 503) if throttled else fabric.errors.get(self.region)
    if failure:
        return _error(self, EC2ClientError(failure[0], failure[1]), failure[2])
    if len(ids) > MAX_IDS:
        raise InvalidParameterValueError(f"InstanceIds ({len(ids)} ids; at most {MAX_IDS})")
    if ids and max_results is not None:
        raise InvalidParameterCombination("The parameter instancesSet cannot be used with the parameter maxResults")
    instances = self.ec2_backend.get_multi_instances_by_id(ids) if ids else self.ec2_backend.all_instances()
    zone_ids = {z.name: z.zone_id for z in self.ec2_backend.describe_availability_zones()}
    items = [item for inst in instances if (item := _item(fabric, inst, zone_ids)) is not None]
    size = fabric.page_size if ids else int(max_results or 20)
    start = int(token or 0)
    end = start + size
    return ActionResult({"Instances": items[start:end], "NextToken": str(end) if end < len(items) else None})


def _item(fabric: Fabric, inst: Any, zone_ids: dict[str, str]) -> dict[str, Any] | None:
    """An InstanceTopology for a placed instance; None for what the API leaves out."""
    if inst.id not in fabric.topology:
        return None  # a type without topology support
    nodes, block = fabric.topology[inst.id]
    if inst.state != "running":
        if fabric.stopped == "omit":
            return None
        nodes, block = (), None
    item = {"InstanceId": inst.id, "InstanceType": inst.instance_type, "NetworkNodes": list(nodes),
            "AvailabilityZone": inst.placement.zone, "ZoneId": zone_ids.get(inst.placement.zone)}
    if block:
        item["CapacityBlockId"] = block
    return item


def _error(response: Any, exc: Exception, status: int) -> tuple[str, dict[str, Any]]:
    """An EC2 error body from moto's serializer, with the HTTP status EC2 uses for it."""
    from moto.core.responses import ActionResult

    _, headers, body = response.serialized(ActionResult(exc))
    headers["status"] = status
    return body, headers
