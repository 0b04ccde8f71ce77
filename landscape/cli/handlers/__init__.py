"""The command handlers, one module per group of the parser (``landscape.cli.parser``): importing
the package registers every command in ``landscape.cli.running.COMMANDS``."""

from landscape.cli.handlers import barriers, checkpoints, merging, symmetries

__all__ = ["barriers", "checkpoints", "merging", "symmetries"]
