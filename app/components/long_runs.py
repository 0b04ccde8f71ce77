"""Long computations on a page: a progress bar with the time left, a Cancel button, a status box
that ends in the result or a failure card."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

from app.components.failures import Fix, failure_key, show_error
from app.components.text import plain
from landscape.progress import Progress, fraction
from landscape.store.cache import NotCached


def duration(seconds: float) -> str:
    """``"8 s"``, ``"2 min 05 s"``: how long something took or will take, for people."""
    s = int(round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def estimate(stage: str, done: float, elapsed: float, rate: float | None = None) -> str:
    """A progress bar's text: the stage, the share done, the time so far and, once a little of
    the work is done, the time left (``done`` is a fraction). ``rate``: the share done per second
    of work (:class:`WorkRate`); without, the share done over the time so far."""
    bits = [f"{100 * done:.0f}%", f"{duration(elapsed)} so far"]
    if 0.02 <= done < 1 and elapsed >= 1:
        bits.append(f"about {duration((1 - done) / (rate or done / elapsed))} left")
    return f"{stage} — " + ", ".join(bits) if stage else ", ".join(bits)


class WorkRate:
    """The share of a run done per second of work, from its progress reports.

    Parts read from the cache finish at once: counted at the rate so far, they made the bar say
    "a few seconds left" while minutes of computing remained. A report that comes within
    ``INSTANT`` seconds of the last and moves the bar by a visible step is such a part: its step
    is left out of the rate (small steps of real work, however frequent, are kept)."""

    INSTANT = 0.05  # seconds
    VISIBLE = 0.01  # share of the bar

    def __init__(self, start: float) -> None:
        self.at, self.share, self.seconds, self.worked = start, 0.0, 0.0, 0.0

    def report(self, share: float, now: float) -> float | None:
        """Record that ``share`` is done at time ``now``; the rate, None before any work."""
        step, dt = share - self.share, now - self.at
        if not (dt < self.INSTANT and step >= self.VISIBLE):
            self.seconds += dt
            self.worked += max(step, 0.0)
        self.at, self.share = now, share
        return self.worked / self.seconds if self.worked > 0 and self.seconds > 0 else None


CANCELLED = "_long_runs_cancelled"  # session key: {run key: the inputs it was cancelled for}


class LongRun:
    """A long computation on the page: a progress bar that says how long is left, and a Cancel
    button. Pass it as the computation's ``progress``; :meth:`close` it when done.

    A click on Cancel makes Streamlit stop the running script at its next page update (the next
    progress report). With ``inputs``, for work a page starts on its own, the cancellation is
    remembered for those inputs: later runs show a note and a Run again button instead of
    starting over (:attr:`cancelled`). Without, a click started the work, and not clicking again
    is enough.

    Cancel keeps what was on the page: a cancelled page still draws every result that is stored
    (read without computing, :class:`NotCached` for the rest) and every section below, and says
    what it left out (:func:`left_out`). Reports to a cancelled run are ignored.
    """

    def __init__(self, label: str, *, key: str, inputs: Hashable | None = None) -> None:
        self.label, self.key = label, key
        self.t0 = time.perf_counter()
        self.rate = WorkRate(self.t0)
        self.slot = st.empty()
        memory = st.session_state.setdefault(CANCELLED, {})
        self.cancelled = inputs is not None and memory.get(key) == inputs
        with self.slot.container():
            if self.cancelled:
                st.info(f"Cancelled: {plain(label)}", icon=":material/cancel:")
                if st.button("Run again", key=f"again-{key}", icon=":material/replay:"):
                    memory.pop(key, None)
                    st.rerun()
                return
            with st.container(horizontal=True, vertical_alignment="center"):
                self.bar = st.progress(0.0, text=plain(label))
                if st.button("Cancel", key=f"cancel-{key}", icon=":material/cancel:"):
                    if inputs is not None:
                        memory[key] = inputs
                    st.rerun()

    def __call__(self, stage: str, done: float, total: float) -> None:
        if self.cancelled:
            return
        share = min(max(fraction(done, total), 0.0), 1.0)
        rate = self.rate.report(share, time.perf_counter())
        self.bar.progress(share, text=plain(estimate(stage, share, self.seconds, rate)))

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        """Remove the bar and the Cancel button (a cancelled run keeps its note and Run again)."""
        if not self.cancelled:
            self.slot.empty()


STARTED = "_long_runs_started"  # session key: {run key: the inputs a click started}
SLOW = 20.0  # seconds: work expected to take longer starts only on a click


def ask_first(
    key: str, inputs: Hashable, parts: list[tuple[str, float | None]], basis: str
) -> bool:
    """Whether the work in ``parts`` may start now: each part is what it is and the seconds it
    is expected to take (measured on earlier runs), None when nothing measured says so and it is
    known to be long (learned matching). Work expected to take over :data:`SLOW` seconds, or
    unknown and long, starts only on a click: until then the page says what it will cost
    beside a button, and draws what is stored (as a cancelled run does, :func:`left_out`).
    ``basis`` says what the seconds were measured on."""
    started = st.session_state.setdefault(STARTED, {})
    known = [sec for _, sec in parts if sec is not None]
    if not parts or started.get(key) == inputs or (
        len(known) == len(parts) and sum(known) <= SLOW
    ):
        return True
    said = "; ".join(
        f"{what} (about {duration(sec)})" if sec is not None
        else f"{what} (not run on this model yet, so its time is unknown: it trains a "
        "transform, seconds for a small model, minutes for a transformer on a CPU)"
        for what, sec in parts
    )  # fmt: skip
    total = ""
    if known:  # measured: the time the stored results of the same method took to match
        more = " and more" if len(known) < len(parts) else ""
        total = f" In all about {duration(sum(known))}{more}, {basis}."
    with st.container(border=True):
        st.info(f"Not stored yet, so computed on a click: {plain(said)}.{total}",
                icon=":material/schedule:")  # fmt: skip
        if st.button(f"Compute {len(parts)} part(s)", key=f"start-{key}", type="primary",
                     icon=":material/play_arrow:"):  # fmt: skip
            started[key] = inputs
            st.rerun()
    return False


def left_out(parts: list[str], cancelled: bool = True) -> None:
    """The note of a cancelled page (or one waiting for a click, :func:`ask_first`) under what
    it still drew: the parts it did not compute."""
    if parts:
        why, how = ("cancelled", "Run again") if cancelled else ("waiting", "Compute")
        st.caption(f"Not measured ({why}): {plain('; '.join(parts))}. {how} above to measure "
                   "them.")  # fmt: skip


def run_in_status(
    compute: Callable[[Progress], Any], *, running: str, done: str | Callable[[Any], str],
    failed: str, what: str, key: str | None = None, inputs: Hashable | None = None,
    fix: Fix | None = None,
) -> Any:  # fmt: skip
    """``compute(progress)`` under a status box with a :class:`LongRun` (time left, Cancel).
    The box says ``running``, then ``done`` (a text, or one made from the result) with the time
    it took; on an error it says ``failed`` and a failure card below names ``what`` (with
    ``fix``). ``inputs``: as for :class:`LongRun`, for work started without a click. Returns the
    result, or None when it failed or was cancelled."""
    key = key or failure_key(what)
    error = None
    with st.status(running, expanded=True) as status:
        run = LongRun(running, key=key, inputs=inputs)
        if run.cancelled:
            status.update(label=f"{what}: cancelled", state="error", expanded=True)
            return None
        try:
            result = compute(run)
        except Exception as err:
            error = err
            status.update(label=failed, state="error", expanded=False)
        else:
            label = done(result) if callable(done) else done
            status.update(label=f"{label} ({duration(run.seconds)})", state="complete",
                          expanded=False)  # fmt: skip
        run.close()
    if error is not None:
        show_error(what, error, fix, key=key)
        return None
    return result


def read_else_run(
    read: Callable[[], Any], compute: Callable[[Progress], Any], *, what: str,
    fix: Fix | None = None, **status: Any,
) -> Any:  # fmt: skip
    """A page's stored result: ``read()`` (the memo, else the disk cache; :class:`NotCached`
    when it is not stored), else ``compute(progress)`` under :func:`run_in_status` (``status``:
    its texts, ``key`` and ``inputs``). A read that fails otherwise is a failure card naming
    ``what`` (with ``fix``). Returns the result, or None. Pages that compute only on a click
    (Gauge, Surface) read with ``read`` and offer the button themselves."""
    try:
        return read()
    except NotCached:
        return run_in_status(compute, what=what, fix=fix, **status)
    except Exception as err:
        show_error(what, err, fix)
        return None
