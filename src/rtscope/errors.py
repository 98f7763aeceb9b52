"""Errors that rtscope reports to the user as a clean message and exit code."""


class RtscopeError(Exception):
    """A problem the user can act on. `exit_code` 2 means bad input (usage), 1 a failed operation."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(RtscopeError):
    """Bad input: an unknown name, a value out of range, a malformed file given by the user."""

    exit_code = 2


class SampleFileError(UsageError):
    """A sample file that is truncated, corrupt or not of the rtscope format."""


class ProbeError(RtscopeError):
    """A probe or peer tool that failed while measuring."""


def choices(valid) -> str:
    """Render a list of valid names for an error message."""
    return ", ".join(str(v) for v in valid)


def did_you_mean(name, valid) -> str:
    """` (did you mean 'x'?)` when `name` is a near miss of one valid name (a typo), else ""."""
    import difflib
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""
