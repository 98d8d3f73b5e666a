"""A pod template's TAS annotations read as Kueue v0.19 reads them, down to Go's parsing rules.

Kueue turns the annotations into a Workload's `PodSetTopologyRequest` (`jobframework.NewPodSetTopologyRequest
(...).Build()`), parsing numbers with `strconv.ParseInt`, booleans with `strconv.ParseBool` and the
multi-layer constraints with `encoding/json`. Python's `int()`, `bool()` and `json` accept things Go
refuses (`" 4"`, `"4_0"`, `4.0`, `NaN`), so the checks and `fit` use these readers, never the builtins.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .workloads import GROUP_NAME, PREFERRED, REQUIRED, SLICE_CONSTRAINTS, SLICE_REQUIRED, SLICE_SIZE, UNCONSTRAINED

INT32 = (-(2**31), 2**31 - 1)
GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
            "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_GO_INT = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
_GO_UINT = re.compile(r"[0-9]+\Z", re.ASCII)
MAX_LAYERS = 3


def go_int32(text: str) -> int | None:
    """`strconv.ParseInt(text, 10, 32)`: an optional sign and ASCII digits, in int32 range; else None."""
    if not _GO_INT.match(text):
        return None
    value = int(text)
    return value if INT32[0] <= value <= INT32[1] else None


def go_uint64(text: str) -> int | None:
    """`strconv.ParseUint(text, 10, 64)`: ASCII digits only (no sign), below 2**64; else None."""
    if not _GO_UINT.match(text):
        return None
    value = int(text)
    return value if value < 2**64 else None


def go_bool(text: str) -> bool | None:
    """`strconv.ParseBool`: exactly the twelve spellings Go accepts; else None."""
    return GO_BOOLS.get(text)


@dataclass(frozen=True)
class Constraint:
    """One slice layer: `size` pods that must share one domain of `topology`."""

    topology: str
    size: int


class _Number(str):
    """A JSON number kept as its text, so integers can be told from `4.0` as Go's decoder does."""


class _Object(list):
    """A JSON object as its (key, value) pairs in order, so duplicate keys resolve as in Go (the last wins)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


def _go_field(key: str) -> str:
    """Go's case-insensitive field match (`encoding/json` folds ASCII case, the long s and the Kelvin sign)."""
    return key.replace("\u017f", "s").replace("\u212a", "k").lower()


def _constraint(item: Any, index: int) -> Constraint:
    if item is None:
        return Constraint("", 0)
    if not isinstance(item, _Object):
        raise ValueError(f"cannot unmarshal {_json_kind(item)} into Go value of type "
                         f"v1beta2.PodsetSliceRequiredTopologyConstraint (entry {index})")
    topology, size = "", 0
    for key, value in item:
        name = _go_field(key)
        if name == "topology" and value is not None:
            if not isinstance(value, str) or isinstance(value, _Number):
                raise ValueError(f"cannot unmarshal {_json_kind(value)} into Go struct field .topology of type string")
            topology = value
        elif name == "size" and value is not None:
            if not isinstance(value, _Number):
                raise ValueError(f"cannot unmarshal {_json_kind(value)} into Go struct field .size of type int32")
            parsed = go_int32(value)
            if parsed is None:
                raise ValueError(f"cannot unmarshal number {value} into Go struct field .size of type int32")
            size = parsed
    return Constraint(topology, size)


def _json_kind(value: Any) -> str:
    if isinstance(value, _Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _Object):
        return "object"
    return "array"


def parse_constraints(text: str) -> list[Constraint]:
    """The multi-layer annotation decoded as Go decodes it into `[]PodsetSliceRequiredTopologyConstraint`.

    Raises ValueError with Go's reason when `encoding/json` would fail. The number of layers and the
    values are not checked here (see `constraint_problems`).
    """
    try:
        data = json.loads(text, object_pairs_hook=_Object, parse_int=_Number, parse_float=_Number,
                          parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(exc.msg) from None
    if data is None:
        return []
    if not isinstance(data, list) or isinstance(data, _Object):
        raise ValueError(f"cannot unmarshal {_json_kind(data)} into Go value of type "
                         "[]v1beta2.PodsetSliceRequiredTopologyConstraint")
    return [_constraint(item, i) for i, item in enumerate(data)]


@dataclass(frozen=True)
class TopologyRequest:
    """A PodSet's `PodSetTopologyRequest` as Kueue builds it; `constraints` unifies both slice forms."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    group: str | None = None

    @property
    def explicit(self) -> bool:
        """`workload.IsExplicitlyRequestingTAS`: any mode or slice layer (even `unconstrained: "false"`)."""
        return (self.required is not None or self.preferred is not None or self.unconstrained is not None
                or bool(self.constraints))

    @property
    def slice_only(self) -> bool:
        return self.required is None and self.preferred is None and bool(self.constraints)

    def level_key(self, keys: tuple[str, ...], implied: bool) -> str | None:
        """Kueue's `levelKeyWithImpliedFallback`: the level the PodSet is placed at, or None."""
        if self.required is not None:
            return self.required
        if self.preferred is not None:
            return self.preferred
        if self.slice_only:
            return keys[0]
        if self.unconstrained or implied:
            return keys[-1]
        return None


class RequestError(ValueError):
    """The annotations cannot be turned into a Workload: Kueue's job controller fails to build the PodSet."""


def build_request(annotations: Mapping[str, Any], multi_layer: bool = True) -> TopologyRequest:
    """`NewPodSetTopologyRequest(meta).Build()` for one pod template (`multi_layer`: the TASMultiLayerTopology gate)."""
    ann = {str(k): str(v) for k, v in annotations.items()}
    required, preferred = ann.get(REQUIRED), ann.get(PREFERRED)
    unconstrained: bool | None = None
    if REQUIRED not in ann and PREFERRED not in ann and UNCONSTRAINED in ann:
        unconstrained = go_bool(ann[UNCONSTRAINED])
        if unconstrained is None:
            raise RequestError(f'strconv.ParseBool: parsing "{ann[UNCONSTRAINED]}": invalid syntax')
    if REQUIRED in ann:
        preferred = None
    constraints: tuple[Constraint, ...] = ()
    if multi_layer and SLICE_CONSTRAINTS in ann:
        try:
            layers = parse_constraints(ann[SLICE_CONSTRAINTS])
        except ValueError as exc:
            raise RequestError(f"failed to parse multi-layer topology constraints annotation: {exc}") from None
        if not 1 <= len(layers) <= MAX_LAYERS:
            raise RequestError(f"topology constraints must contain between 1 and 3 entries: got {len(layers)}")
        constraints = tuple(layers)
    elif SLICE_REQUIRED in ann and SLICE_SIZE in ann:
        size = go_int32(ann[SLICE_SIZE])
        if size is None:
            raise RequestError(f'strconv.ParseInt: parsing "{ann[SLICE_SIZE]}": invalid syntax')
        constraints = (Constraint(ann[SLICE_REQUIRED], size),)
    group = ann.get(GROUP_NAME) if (required is not None or preferred is not None) else None
    return TopologyRequest(required, preferred, unconstrained, constraints, group)
