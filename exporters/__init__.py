"""Pure exporters: a snapshot in, another scheduler's configuration out (Slurm text, Volcano and KAI objects).

Nothing here reads files or talks to a cluster, so the CLI (`topolabel export`) and the operator can both
call these functions and decide where the result goes.
"""
