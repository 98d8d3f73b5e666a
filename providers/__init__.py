"""Topology sources. Each module turns one kind of evidence into a `labeler.topology.model.Discovery`.

A source module defines `SOURCE = providers.base.Source(...)` (its name, options model, flags, discovery,
whether it needs the cluster's nodes and whether it answers per node) and is listed in
`providers.registry.SOURCES`.
"""
