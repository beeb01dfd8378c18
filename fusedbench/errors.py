"""The project's error classes: each maps to a one-line message and an exit code in the CLI."""


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
