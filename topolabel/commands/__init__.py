"""One module per `topolabel` subcommand; each has `register(subparsers, parents)`.

Add a new subcommand by writing its module and naming it in `COMMANDS`.
"""

COMMANDS = ("discover", "plan", "apply", "kueue", "agent", "verify", "run", "job", "fit", "show", "export",
            "config", "completion")
