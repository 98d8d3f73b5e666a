"""One module per `topolabel` subcommand; each has `register(subparsers, parents)`.

Add a new subcommand by writing its module and naming it here with its one-line help: the top-level parser
lists every command from this table without importing their modules (start-up time).
"""

COMMANDS = {
    "discover": "find where each node sits and print the snapshot",
    "plan": "show which labels would be set and removed",
    "apply": "write the label plan: one merge patch per changed node",
    "kueue": "generate Topology, ResourceFlavor, Cohort, ClusterQueue, LocalQueue YAML",
    "agent": "publish this node's LLDP neighbours (and NVLink domain) on its own Node",
    "verify": "report nodes whose labels or sources disagree",
    "run": "run the operator: label joining nodes, resync, keep Kueue objects",
    "job": "annotate or check a job for Kueue Topology-Aware Scheduling",
    "fit": "would Kueue admit this job now (queue, quota, topology), and if not, what would",
    "why": "why is this Workload pending, and what would let it in",
    "capacity": "how many jobs of a shape Kueue would admit now, where, and the room per level",
    "show": "draw each flavor's topology with free/total GPUs per domain (terminal or SVG)",
    "health": "which nodes fabric health would take out of placement, and why",
    "export": "the topology for Slurm (topology.conf/.yaml), Volcano or KAI",
    "config": "print the config's JSON Schema, or check config files",
    "completion": "print a shell completion script (bash, zsh, fish)",
    "help": "a command's help, or `help sources`: the sources and label presets",
}
