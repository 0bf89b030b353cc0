"""Typed exit codes shared by every entry point (documented in the README)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0              # everything requested finished and every run is done
    RUN_FAILED = 1      # at least one run failed, was cancelled or lost
    USAGE = 2           # bad command line, plan, task card, agent spec or config
    INFRA = 3           # the harness itself could not work (store locked, executor unavailable, ...)
    INTERRUPTED = 130   # Ctrl-C / SIGINT


class UsageError(Exception):
    """Bad input from the user: the message says what is wrong and how to fix it."""

    exit_code = ExitCode.USAGE


class InfraError(Exception):
    """The harness cannot do its job on this machine (lock held, engine unreachable, ...)."""

    exit_code = ExitCode.INFRA
