"""`fusedbench alert --confirm`: what the first look flags (`regressions.confirm.flag`) measured again on this
machine's GPU (`measure.confirm`: the baseline's code beside the candidate's in lock-step, or the candidate alone
where the baseline cannot be rebuilt), then decided by the confirmation's rule (`regressions.confirm`)."""

from __future__ import annotations

import os
import tempfile

from fusedbench.catalog.deliberate import Deliberate
from fusedbench.catalog.providers import AUTOTUNED
from fusedbench.errors import FusedbenchError
from fusedbench.measure.checkout import read_checkout
from fusedbench.measure.confirm import ConfirmError, Side, export_source, measure_again
from fusedbench.regressions.compare import Run
from fusedbench.regressions.confirm import Confirmation, Flagged, confirmed, flag, judge_confirmation
from fusedbench.regressions.gate import MachineVerdict


def confirm_verdict(verdict: MachineVerdict, results, repo: str) -> tuple[MachineVerdict, list[Confirmation]]:
    """Measure what the first look flags again (on this machine's GPU, the candidate's code from the checkout at
    `repo`), and the verdict after it; nothing flagged, nothing measured."""
    flags = flag(verdict)
    if not flags:
        return verdict, []
    checkout = read_checkout(repo)
    confirmations = []
    with tempfile.TemporaryDirectory(prefix="fusedbench-baseline-") as scratch:
        for flagged in flags:
            confirmations.append(_confirm_group(flagged, results, repo, checkout, scratch))
    return confirmed(verdict, confirmations), confirmations


def _record_environment(results, run: Run, group: str) -> dict:
    mine = [r for r in results.records if (r.machine, r.commit, r.group) == (run.machine, run.commit, group)]
    return dict(mine[-1].environment) if mine else {}


def _not_rebuildable(results, flagged: Flagged) -> str:
    """Why the baseline's measurement cannot be rebuilt beside the candidate's ('' where it can): a library or the
    driver changed between the two runs, by their records."""
    first = flagged.judgement
    base = _record_environment(results, first.baseline, flagged.group)
    cand = _record_environment(results, first.candidate, flagged.group)
    for what, before, after in (
        ("library versions", base.get("versions"), cand.get("versions")),
        ("driver", (base.get("gpu") or {}).get("driver"), (cand.get("gpu") or {}).get("driver")),
    ):
        if before != after:
            return f"the {what} changed between the runs ({before} -> {after})"
    return ""


def _confirm_group(flagged: Flagged, results, repo: str, checkout, scratch: str) -> Confirmation:
    """One flagged group measured again: side by side where the baseline can be rebuilt, else the candidate alone."""
    first = flagged.judgement
    cand, base = first.candidate, first.baseline
    if checkout.commit != cand.commit or checkout.dirty:
        state = f"{checkout.commit[:8]}{' with changes' if checkout.dirty else ''}"
        raise FusedbenchError(
            f"--confirm times the candidate's code from the checkout, which is at {state}, not the candidate "
            f"{cand.commit[:8]}: check out {cand.commit[:8]} (clean) and run it again"
        )
    changed = Deliberate.from_json(_record_environment(results, cand, flagged.group))
    candidate = Side("candidate", repo, changed.environment())
    reason = _not_rebuildable(results, flagged)
    source = repo
    if not reason and base.commit != cand.commit:
        try:
            source = export_source(repo, base.commit, os.path.join(scratch, base.commit))
        except ConfirmError as exc:
            reason = str(exc)
    requests, rounds = flagged.requests(), flagged.rounds * (3 if reason else 1)
    if reason:
        measured = measure_again(requests, [candidate], rounds)
        how, base_cells = f"candidate again against its record ({reason})", None
    else:
        measured = measure_again(requests, [Side("baseline", source), candidate], rounds)
        how = "side by side" + (f", its {'injection' if changed.injection else 'tuning'} re-applied" if changed else "")
        how += f", {AUTOTUNED} at the candidate's pick, and the picks compared" if measured.picks else ""
        base_cells = measured.cells["baseline"]
    return judge_confirmation(
        flagged,
        how,
        base_cells,
        measured.cells["candidate"],
        rounds=rounds,
        seconds=measured.seconds,
        calls=measured.calls,
        not_measured=measured.not_measured,
        picks=measured.picks,
    )
