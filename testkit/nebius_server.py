"""A local stand-in for the Nebius Compute API's `InstanceService.List`, a gRPC server built from the Nebius
SDK's own service definitions.

The SDK ships the serialized protobuf file descriptors of every Nebius API (its registry); the server loads
`nebius/compute/v1/instance_service.proto` and its imports into a protobuf descriptor pool, makes the request
and response classes from it, and serves `nebius.compute.v1.InstanceService/List` over TLS with a
self-signed certificate for 127.0.0.1, so the real SDK client talks to it with TLS verification on (given
the certificate as its CA bundle). It pages with `page_size`/`page_token`, checks `authorization: Bearer
<token>`, answers PERMISSION_DENIED for `denied` projects and NOT_FOUND for unknown ones, and records every
call. Listens on 127.0.0.1, port 0.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory

from testkit.tlscert import Certificate

SERVICE = "nebius.compute.v1.InstanceService"
TOKEN = "ne1-test-token"


def message_classes(*names: str) -> list[type]:
    """Protobuf classes for `names`, from the SDK's descriptors of the InstanceService file and its imports."""
    from nebius.api._registry import REGISTRY

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: Any) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        pool.AddSerializedFile(file.serialized_pb)
        added.add(file.name)

    add(REGISTRY.service_descriptor(SERVICE).file)
    return [message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names]


ListRequest, ListResponse, InstanceMessage = message_classes(
    "nebius.compute.v1.ListInstancesRequest", "nebius.compute.v1.ListInstancesResponse", "nebius.compute.v1.Instance")


def instance(project: str, instance_id: str, path: list[str] | None, nvl_group: str = "",
             state: str = "RUNNING") -> Any:
    """An Instance message as the API returns it; `path` is the InfiniBand topology path, root first."""
    message = InstanceMessage()
    message.metadata.id = instance_id
    message.metadata.parent_id = project
    message.metadata.name = f"vm-{instance_id[-6:]}"
    message.spec.nvl_instance_group_id = nvl_group
    message.status.state = InstanceMessage.DESCRIPTOR.fields_by_name["status"].message_type.enum_types_by_name[
        "InstanceState"].values_by_name[state].number
    if path is not None:
        message.status.infiniband_topology_path.path.extend(path)
    return message


@dataclass(frozen=True)
class Call:
    project: str
    page_size: int
    page_token: str


@dataclass
class NebiusServer:
    """Serves `projects` (project id -> Instance messages) over TLS with `certificate`."""

    certificate: Certificate
    projects: dict[str, list[Any]] = field(default_factory=dict)
    page_cap: int = 1000
    denied: set[str] = field(default_factory=set)
    fail: list[grpc.StatusCode] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "NebiusServer":
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.unary_unary_rpc_method_handler(self._list, request_deserializer=ListRequest.FromString,
                                                      response_serializer=ListResponse.SerializeToString)
        self._server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"List": handler})])
        credentials = grpc.ssl_server_credentials([(self.certificate.key_pem, self.certificate.cert_pem)])
        self.port = self._server.add_secure_port("127.0.0.1:0", credentials)
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop(0).wait()

    def count(self, project: str | None = None) -> int:
        with self._lock:
            return sum(1 for c in self.calls if project is None or c.project == project)

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.calls.append(Call(request.parent_id, request.page_size, request.page_token))
            failure = self.fail.pop(0) if self.fail else None
        if dict(context.invocation_metadata()).get("authorization") != f"Bearer {TOKEN}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or missing token")
        if failure is not None:
            context.abort(failure, f"injected {failure.name}")
        if request.parent_id in self.denied:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"permission denied for {request.parent_id}")
        if request.parent_id not in self.projects:
            context.abort(grpc.StatusCode.NOT_FOUND, f"resource {request.parent_id} not found")
        items = self.projects[request.parent_id]
        start = int(request.page_token or 0)
        size = min(request.page_size or 100, self.page_cap)
        response = ListResponse()
        response.items.extend(items[start:start + size])
        if start + size < len(items):
            response.next_page_token = str(start + size)
        return response
