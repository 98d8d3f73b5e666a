"""topolabel's application layer: the CLI (`cli`, `commands/`), the operator (`operator/`), the LLDP agent and the
InfiniBand collector, on top of the sources, Kueue and exports packages and the `labeler` core."""
