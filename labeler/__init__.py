"""topolabel's core, the bottom layer: it imports no other topolabel package (docs/architecture.md).

Its families, one sub-package each: `io` (files, documents, jsonlist, nodejson, nodes, hosttools), `topology`
(model, labelvalues, names, placement, plan, verify, isolation, snapshotfile), `cluster` (kubeconfig, kube,
timeouts, deadline, apply, lease, shards) and `settings` (config, config_schema, queues, quantities,
validation); under them the few modules all of them share (errors, progress, gcpause, display). The CLI, the
operator and the agent live in `topolabel`; sources in `providers`, Kueue objects in `kueue_config`, other
schedulers' formats in `exporters`.
"""
