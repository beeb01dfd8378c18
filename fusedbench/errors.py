"""The project's error classes, each a one-line message and an exit code in the CLI, and the data problem line."""

from __future__ import annotations


class FusedbenchError(Exception):
    """A usage or environment problem the user can fix; the CLI prints it and exits 2."""


class GpuUnavailable(FusedbenchError):
    """No usable CUDA GPU or GPU Python stack; the message says what to install or run instead."""


class Unsupported(Exception):
    """A library refused a cell (epilog x dtype x shape x provider); `reason` is its own message."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Skipped(Exception):
    """A cell that cannot run here (missing optional package, old GPU, too little memory)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class DataProblem(str):
    """One line saying what in a results folder could not be read and what was lost, and the machine whose results
    it concerns ('' where it concerns none, or none could be told): a CI gate refuses to judge a machine with one."""

    machine: str

    def __new__(cls, text: str, machine: str = "") -> DataProblem:
        problem = super().__new__(cls, text)
        problem.machine = machine
        return problem
