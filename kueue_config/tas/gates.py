"""The Kueue v0.19.2 feature gates that change what TAS does, with their defaults (`pkg/features`).

`fit` models the defaults. A cluster may run Kueue with other gates (`--feature-gates` in its
Configuration); the user says so with `--kueue-feature-gates`, and `fit` then either follows (the gates
it models) or refuses to guess for a job the gate would affect.
"""

from __future__ import annotations

from dataclasses import dataclass

from labeler.errors import InputError

DEFAULTS = {
    "TASMultiLayerTopology": True,               # beta in 0.19: the slice-constraints annotation
    "TASProfileMixed": True,                     # beta: LeastFreeCapacity for unconstrained PodSets
    "TASBalancedPlacement": False,               # alpha: not modelled
    "ElasticJobsViaWorkloadSlices": True,        # beta: the elastic-job annotation is honoured
    "ElasticJobsViaWorkloadSlicesWithTAS": False,  # alpha: not modelled
    "TASRespectNodeAffinityPreferred": False,    # alpha: not modelled
    "SchedulerLibraryIntegration": False,        # alpha: not modelled
}
NOT_MODELLED = ("TASBalancedPlacement", "ElasticJobsViaWorkloadSlicesWithTAS", "TASRespectNodeAffinityPreferred",
                "SchedulerLibraryIntegration")
_TRUE, _FALSE = {"true", "1", "t"}, {"false", "0", "f"}


@dataclass(frozen=True)
class Gates:
    """Gate values as Kueue's manager would have them."""

    values: tuple[tuple[str, bool], ...] = tuple(DEFAULTS.items())

    def __getitem__(self, name: str) -> bool:
        return dict(self.values)[name]

    @property
    def multi_layer(self) -> bool:
        return self["TASMultiLayerTopology"]

    @property
    def profile_mixed(self) -> bool:
        return self["TASProfileMixed"]

    def unmodelled(self) -> list[str]:
        """Gates switched on that `fit` does not model."""
        return [g for g in NOT_MODELLED if self[g]]

    @classmethod
    def parse(cls, text: str | None) -> "Gates":
        """`Name=true,Other=false` as Kubernetes components take `--feature-gates`; unknown names are an error."""
        values = dict(DEFAULTS)
        for item in filter(None, (part.strip() for part in (text or "").split(","))):
            name, sep, raw = item.partition("=")
            if not sep or name not in DEFAULTS or raw.strip().lower() not in _TRUE | _FALSE:
                raise InputError(f"--kueue-feature-gates: {item!r} is not NAME=true|false for one of "
                                 + ", ".join(DEFAULTS))
            values[name] = raw.strip().lower() in _TRUE
        return cls(tuple(values.items()))
