"""The core's cluster access: kubeconfigs, the API client with its timeouts and deadlines, patches with
retries, the Lease, and blobs sharded into ConfigMaps."""
