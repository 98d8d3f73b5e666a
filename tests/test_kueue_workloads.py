"""testkit/kueue_workloads.py reads Kueue v1beta2's topology assignments in both of their forms."""

from __future__ import annotations

import pytest

from testkit.kueue_workloads import admission, decode, pending_message

LEVELS = ["topolabel.dev/block", "kubernetes.io/hostname"]


def test_universal_values_and_counts() -> None:
    assignment = {"levels": LEVELS, "slices": [{
        "domainCount": 1, "valuesPerLevel": [{"universal": "b1"}, {"universal": "n1"}],
        "podCounts": {"universal": 3}}]}
    assert decode(assignment) == (tuple(LEVELS), {("b1", "n1"): 3})


def test_individual_values_with_prefix_and_suffix_and_several_slices() -> None:
    assignment = {"levels": LEVELS, "slices": [
        {"domainCount": 3,
         "valuesPerLevel": [{"universal": "b1"},
                            {"individual": {"prefix": "gke-a3-", "suffix": "-x", "roots": ["n0", "n1", "n2"]}}],
         "podCounts": {"individual": [2, 1, 1]}},
        {"domainCount": 2,
         "valuesPerLevel": [{"individual": {"roots": ["b2", "b3"]}}, {"individual": {"roots": ["m0", "m1"]}}],
         "podCounts": {"universal": 4}},
    ]}
    assert decode(assignment)[1] == {("b1", "gke-a3-n0-x"): 2, ("b1", "gke-a3-n1-x"): 1, ("b1", "gke-a3-n2-x"): 1,
                                     ("b2", "m0"): 4, ("b3", "m1"): 4}


def test_a_slice_whose_lengths_disagree_is_refused() -> None:
    bad = {"levels": LEVELS, "slices": [{
        "domainCount": 2, "valuesPerLevel": [{"universal": "b1"}, {"individual": {"roots": ["n1"]}}],
        "podCounts": {"universal": 1}}]}
    with pytest.raises(ValueError, match="malformed"):
        decode(bad)


def test_admission_and_pending_message() -> None:
    workload = {"status": {
        "conditions": [{"type": "QuotaReserved", "status": "True", "message": "ok"},
                       {"type": "Admitted", "status": "True"}],
        "admission": {"clusterQueue": "gpu", "podSetAssignments": [
            {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "h100"},
             "topologyAssignment": {"levels": LEVELS, "slices": [{
                 "domainCount": 1, "valuesPerLevel": [{"universal": "b1"}, {"universal": "n1"}],
                 "podCounts": {"universal": 2}}]}},
            {"name": "launcher", "count": 1, "flavors": {"cpu": "default"}}]}}}
    placed = admission(workload)
    assert placed["main"].domains == {("b1", "n1"): 2} and placed["main"].flavors == {"nvidia.com/gpu": "h100"}
    assert placed["launcher"].levels == () and placed["launcher"].domains == {}
    assert pending_message(workload) is None
    waiting = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "couldn't assign"}]}}
    assert admission(waiting) is None and pending_message(waiting) == "couldn't assign"
