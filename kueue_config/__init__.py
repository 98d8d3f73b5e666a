"""Kueue objects for Topology-Aware Scheduling, generated from a snapshot and the cluster's nodes."""
