"""A user's mistake on a command line: one line `error: ...` on stderr and exit status 2, no traceback.

Code raises `UserError` where it finds the mistake (a missing input, an invalid option, a checkpoint or an
output folder that belongs to another run); a command line's entry point runs under `exit_on_user_error`,
the one place that turns it into that line. Any other exception is a bug: it keeps its traceback and exit
status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

USER_ERROR_STATUS = 2


class UserError(Exception):
    """A mistake of whoever runs the job or the validation; its message says what is wrong and what to do."""


def exit_with_user_error(message: str) -> None:
    """Print `error: <message>` as one line on stderr and exit with status 2."""
    print("error: " + " ".join(str(message).split()), file=sys.stderr, flush=True)
    raise SystemExit(USER_ERROR_STATUS)


@contextlib.contextmanager
def exit_on_user_error() -> Iterator[None]:
    """A command line's body: a UserError raised in it ends the process with `exit_with_user_error`."""
    try:
        yield
    except UserError as error:
        exit_with_user_error(str(error))


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose mistakes (a missing, unknown or invalid argument) are one line too, instead
    of the usage followed by the message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        exit_with_user_error(f"{message} (see {self.prog} --help)")
