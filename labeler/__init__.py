"""topolabel's core, the bottom layer: it imports no other topolabel package (docs/architecture.md).

Its families: reading and writing (errors, files, documents, jsonlist, snapshotfile, display, progress); the
model and placement (model, placement, labelvalues, names, quantities, plan, verify); the cluster (kube,
timeouts, nodes, apply, lease, shards, hosttools, gcpause); the config (config, queues, validation,
config_schema). The CLI, the operator and the agent live in `topolabel`; sources in `providers`, Kueue objects
in `kueue_config`, other schedulers' formats in `exporters`.
"""
