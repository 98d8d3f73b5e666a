"""Topology-Aware Scheduling tools for data scientists: read jobs and Kueue objects, annotate, lint, fit, show.

`tree` is Kueue's topology tree for one flavor, `placer` Kueue's placement in it, `fit` a whole workload's
answer; `show` draws the tree (`render_tree`, `svg`) without the placer.
"""
