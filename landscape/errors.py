"""One error type for bad input: the CLI prints its message on one line and exits non-zero."""


class LandscapeError(Exception):
    """A problem with the user's input or environment, stated in one line."""
