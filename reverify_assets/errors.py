"""The two kinds of failure a user can cause, with NeMo Gym's exit codes."""


class ReverifyError(Exception):
    """A config, data or runtime error: the message names the file, line or key. Exit code 1."""

    exit_code = 1


class UsageError(ReverifyError):
    """A bad flag or an invalid combination of flags. Exit code 2, as argparse does."""

    exit_code = 2
