"""Independent parts of the report computed in forked child processes while the parent goes on.

A report is pieces of work that need nothing of each other (each machine's section with its verdicts and history,
each machine's peers, the MLP section), each single-threaded pandas and numpy: on a machine of two cores or more
they share its cores rather than taking turns on one. A forked child shares the parent's loaded results
without copying them and sends back its value pickled. Where fork is not offered (not Linux) or only one
core is usable, the work is done at once in the caller, with the same result.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from typing import Any

from fusedbench.errors import FusedbenchError


def can_fork() -> bool:
    """Whether a child would run beside the parent: Linux's fork, and a second core to run on."""
    return sys.platform == "linux" and len(os.sched_getaffinity(0)) > 1


def in_child(function: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start function(*args) in a forked child; the returned callable waits for its value (or raises its
    exception). Without fork or a second core it is computed here, before this returns."""
    if not can_fork():
        value = function(*args)
        return lambda: value
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, function, args), daemon=True)
    child.start()
    send.close()

    def result() -> Any:
        try:
            ok, value = receive.recv()
        except EOFError:
            child.join()  # its exit code is known once it has ended
            raise FusedbenchError(
                f"a report worker ({function.__name__}) ended without a result (exit code {child.exitcode}): "
                "out of memory? run the report again"
            ) from None
        finally:
            receive.close()
            child.join()
        if not ok:
            raise value
        return value

    return result


def _child(send, function: Callable[..., Any], args: tuple) -> None:
    """The child's body: its value, or its exception (as a FusedbenchError's line where it does not pickle)."""
    try:
        outcome = (True, function(*args))
    except BaseException as error:  # sent to the parent, which raises it
        outcome = (False, error)
    try:
        send.send(outcome)
    except Exception as error:  # an unpicklable value or exception: its line, not a hang
        send.send((False, FusedbenchError(f"a report worker ({function.__name__}) failed: {error}")))
    finally:
        send.close()
