"""`topolabel run`: a kopf operator that keeps node labels and Kueue objects true to the topology.

Modules, from the pure core outwards:
- `topology`: the last good discovery and per-node merges (pure);
- `labelling`: which nodes to patch, with the operator's own writes overlaid until the watch shows them;
- `kueue`: which Kueue objects to create, apply or delete, with in-use checks (pure) and the writes;
- `status`: conditions, the custom resource's status and Kubernetes Events;
- `metrics`: Prometheus metrics and the HTTP endpoints (/metrics, /healthz, /readyz);
- `kubeapi`: raw JSON calls to the API server with retries and a metric per call;
- `settings`: run options and the config (file, custom resource, flags);
- `controller`: the reconcile loop (joins within seconds, full resync on an interval);
- `handlers`: the kopf wiring (login, Node events feeding the node cache, startup and cleanup).
"""
