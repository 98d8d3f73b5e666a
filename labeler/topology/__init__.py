"""The core's model and placement: levels, snapshots and label values, a source's answer turned into a checked
snapshot (and a snapshot file read back), the label plan, drift, and which nodes fabric health isolates."""
