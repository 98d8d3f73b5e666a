"""The last step of both fabric sources (infiniband, ufm): from a fabric to each node's place.

Who owns which HCA (a GUID map file, node annotations), which HCAs count (`--hca-pattern`), which part of the
fabric to leave out (`--ib-exclude`), then the placement. Loaded only when a source runs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from labeler.errors import InputError, SourceError
from labeler.topology.model import Discovery

from ..base import SourceContext
from .fabric import Fabric
from .hosts import GuidMap, add_annotations, guid_map_from
from .options import FabricOptions, split_guids
from .parse import parse_guid
from .place import Request, place

if TYPE_CHECKING:
    from .select import Exclusion


def locate(fabric: Fabric, opts: FabricOptions, ctx: SourceContext, origin: str, source: str,
           notices: Sequence[str] = ()) -> Discovery:
    """Each node's place in `fabric`, read by `source` from `origin`; `notices` are the reader's own problems."""
    guids = GuidMap()
    if opts.guid_map:
        from labeler.io.documents import read_document  # a GUID map file is rare: its readers load for it

        try:
            guids = guid_map_from(read_document(opts.guid_map), opts.guid_map)
        except InputError as exc:
            raise SourceError(str(exc)) from None
    add_annotations(guids, ctx.nodes, opts.guid_annotation)
    left_out = None
    if opts.ib_exclude or opts.ib_exclude_guids:
        from .select import exclude  # loads only when a part of the fabric is left out

        fabric, left_out = exclude(fabric, exclusion(opts))
    pattern = re.compile(opts.hca_pattern) if opts.hca_pattern else None
    found = place(fabric, Request(ctx.nodes, guids, pattern, origin, source))
    for message in (*notices, *([left_out] if left_out else [])):
        found.problem(message)
    return found


def exclusion(opts: FabricOptions) -> Exclusion:
    """What `--ib-exclude` and `--ib-exclude-guids` select (their values were checked with the options)."""
    from .select import Exclusion

    pattern = re.compile(opts.ib_exclude) if opts.ib_exclude else None
    guids = frozenset(parse_guid(g) for g in split_guids(opts.ib_exclude_guids)) if opts.ib_exclude_guids else frozenset()
    return Exclusion(pattern, guids)
