"""Long computations on a page: a progress bar with the time left, a Cancel button, a status box
that ends in the result or a failure card."""

from __future__ import annotations

import bisect
import threading
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


ESTIMATING = "time left: estimating …"


def estimate(stage: str, done: float, elapsed: float, left: float | None = None) -> str:
    """A progress bar's text: the stage, the share done (``done``, a fraction), the time so far
    and the time left: ``left`` seconds (from :class:`TimeLeft`), or, while none can be said
    honestly (None), that it is being estimated."""
    bits = [f"{100 * done:.0f}%", f"{duration(elapsed)} so far"]
    if done < 1:
        bits.append(ESTIMATING if left is None else f"about {duration(left)} left")
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


class TimeLeft:
    """The time left of a run, from its progress reports, said only when it can be said
    honestly; pure (the times are passed in), so that it is tested on made-up sequences.

    The share done over the time so far said "4 s left" while minutes remained: when only the
    first, quick stage of many had reported, when parts read from the cache had jumped the bar,
    or when a slow stage followed a quick one. So the time left (:meth:`left`) is None, said as
    "estimating", until

    - ``SETTLE`` seconds of work have passed and ``MEANINGFUL`` of the work being computed is
      done (parts read at once, :class:`WorkRate`, count neither as work nor as work to do);

    and it is taken at the slower of two rates: the rate since the start, and the rate over the
    last ``RECENT`` seconds of work, so that a slower stage lengthens it as soon as it reports,
    and a quick stretch never shortens it below what the whole run says. A quiet spell longer
    than every gap between reports so far counts as work that has not moved the bar (no
    progress over the whole recent window is "estimating" again); a shorter one is the usual
    wait for the next report. And the time left is said only once it holds: while the finish it
    foresees moves later by more than ``DRIFT`` of the time left within ``STEADY`` seconds (a
    quick stage followed by a quiet one), it is "estimating" too. :meth:`left` is asked at
    least once a second while the run goes on (the bar's redraw), so that it sees that drift.
    """

    SETTLE = 5.0  # seconds of work before any time left is said
    MEANINGFUL = 0.1  # share of the computed work done before any time left is said
    RECENT = 15.0  # seconds of work: the window of the recent rate
    STEADY = 3.0  # seconds over which the foreseen finish must hold ...
    DRIFT = 0.25  # ... moving later by at most this share of the time left

    def __init__(self, start: float) -> None:
        self.rate = WorkRate(start)
        # after each report: the seconds of work so far and the share they did (both only grow)
        self.seconds: list[float] = [0.0]
        self.worked: list[float] = [0.0]
        self.gap = 0.0  # the longest time between two reports so far
        self.foreseen: list[tuple[float, float]] = []  # (asked at, the finish it foresaw)

    def report(self, share: float, now: float) -> None:
        """Record that ``share`` (a fraction) is done at time ``now``."""
        self.gap = max(self.gap, now - self.rate.at)
        self.rate.report(share, now)
        self.seconds.append(self.rate.seconds)
        self.worked.append(self.rate.worked)

    @property
    def share(self) -> float:
        return self.rate.share

    def left(self, now: float) -> float | None:
        """The seconds left at time ``now``, or None while they cannot be said honestly."""
        r = self.rate
        if r.share >= 1:
            return 0.0
        left = self._rated(now)
        if left is None:
            self.foreseen.clear()
            return None
        self.foreseen = [(t, f) for t, f in self.foreseen if t >= now - self.STEADY]
        self.foreseen.append((now, now + left))
        first_t, first_f = self.foreseen[0]
        if now - first_t < self.STEADY or now + left - first_f > self.DRIFT * left:
            return None  # not held long enough, or the finish it foresees is moving away
        return left

    def _rated(self, now: float) -> float | None:
        """The time left at the slower of the two rates, None before there is one."""
        r = self.rate
        quiet = max(now - r.at, 0.0)
        seconds = r.seconds + max(quiet - self.gap, 0.0)  # quiet past every gap seen: slower
        to_do = 1.0 - r.share
        if seconds < self.SETTLE or r.worked <= 0:
            return None
        if r.worked / (r.worked + to_do) < self.MEANINGFUL:  # of the work being computed
            return None
        rate = r.worked / seconds
        i = bisect.bisect_right(self.seconds, seconds - self.RECENT) - 1
        if i >= 0:  # a whole window of work is behind: its rate, if slower
            rate = min(rate, (r.worked - self.worked[i]) / (seconds - self.seconds[i]))
        return to_do / rate if rate > 0 else None


CANCELLED = "_long_runs_cancelled"  # session key: {run key: the inputs it was cancelled for}


class LongRun:
    """A long computation on the page: a progress bar that says how long is left, and a Cancel
    button. Pass it as the computation's ``progress``; :meth:`close` it when done.

    The bar's text is drawn again every ``TICK`` seconds between reports (the time so far, and
    the time left, which grows while the work is quiet: :class:`TimeLeft`), so a stage that
    reports rarely does not look frozen; the share it shows moves only with the reports.

    A click on Cancel makes Streamlit stop the running script at its next page update (the next
    progress report). With ``inputs``, for work a page starts on its own, the cancellation is
    remembered for those inputs: later runs show a note and a Run again button instead of
    starting over (:attr:`cancelled`). Without, a click started the work, and not clicking again
    is enough.

    Cancel keeps what was on the page: a cancelled page still draws every result that is stored
    (read without computing, :class:`NotCached` for the rest) and every section below, and says
    what it left out (:func:`left_out`). Reports to a cancelled run are ignored.
    """

    TICK = 1.0  # seconds between redraws of the bar's text while no report comes

    def __init__(self, label: str, *, key: str, inputs: Hashable | None = None) -> None:
        self.label, self.key = label, key
        self.t0 = time.perf_counter()
        self.left = TimeLeft(self.t0)
        self.stage = ""
        self.lock = threading.Lock()
        self.closed = threading.Event()
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
        self._start_ticking()

    def __call__(self, stage: str, done: float, total: float) -> None:
        if self.cancelled:
            return
        share = min(max(fraction(done, total), 0.0), 1.0)
        with self.lock:
            self.stage = stage
            self.left.report(share, time.perf_counter())
        self._draw()  # in the script's thread: a click on Cancel stops the script here

    def _draw(self) -> None:
        now = time.perf_counter()
        with self.lock:
            if self.closed.is_set():
                return
            text = estimate(self.stage, self.left.share, now - self.t0, self.left.left(now))
            self.bar.progress(self.left.share, text=plain(text))

    def _start_ticking(self) -> None:
        """Redraw the bar every :attr:`TICK` seconds from a thread of its own, until the run is
        closed or the script run that drew the bar is over (a Cancel, an error, a new run)."""
        from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        if ctx is None:  # not on a page (a bare script): the reports alone draw the bar
            return
        script, this_run = threading.current_thread(), ctx.cursors

        def tick() -> None:
            while not self.closed.wait(self.TICK):
                if not script.is_alive() or ctx.cursors is not this_run:
                    return
                try:
                    self._draw()
                except BaseException:  # the page is gone or stopping: nothing to draw on
                    return

        thread = threading.Thread(target=tick, name=f"long-run-{self.key}", daemon=True)
        add_script_run_ctx(thread, ctx)
        thread.start()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def stop(self) -> None:
        """Stop redrawing the bar (it stays as it is)."""
        with self.lock:
            self.closed.set()

    def close(self) -> None:
        """Remove the bar and the Cancel button (a cancelled run keeps its note and Run again)."""
        self.stop()
        if not self.cancelled:
            self.slot.empty()


STARTED = "_long_runs_started"  # session key: {run key: the inputs a click started}
SLOW = 20.0  # seconds: work expected to take longer starts only on a click


UNKNOWN = "time unknown on this machine"


def ask_first(
    key: str, inputs: Hashable, parts: list[tuple[str, float | None]], basis: str,
    unknown: str = "", *, about: str = "about", here: bool = True,
) -> bool:  # fmt: skip
    """Whether the work in ``parts`` may start now: each part is what it is and the seconds it
    is expected to take (measured on earlier runs), None when nothing measured here says so.
    Work expected to take over :data:`SLOW` seconds, or of unknown time, starts only on a
    click: until then the page says what it will cost beside a button, and draws what is
    stored (as a cancelled run does, :func:`left_out`). ``basis`` says what the seconds were
    measured on; ``unknown``, what the work does that takes its unknown time (said after
    "time unknown on this machine", never as a number). ``here=False``: the seconds were not
    measured on this machine (the shipped results' times): said, with ``about`` before them
    ("under about" for a bound), but the work waits for a click however short they are."""
    started = st.session_state.setdefault(STARTED, {})
    known = [sec for _, sec in parts if sec is not None]
    if not parts or started.get(key) == inputs or (
        here and len(known) == len(parts) and sum(known) <= SLOW
    ):
        return True
    said = "; ".join(
        f"{what} ({about} {duration(sec)})" if sec is not None
        else f"{what} ({UNKNOWN}{': ' + unknown if unknown else ''})"
        for what, sec in parts
    )  # fmt: skip
    total = ""
    if known:  # measured: the time the stored results of the same kind took
        more = " and more" if len(known) < len(parts) else ""
        total = f" In all {about} {duration(sum(known))}{more}, {basis}."
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
        except BaseException:  # Cancel (or a new run of the page): the bar stops with it
            run.stop()
            raise
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
    fix: Fix | None = None, cost: Callable[[], list[tuple[str, float | None]]] | None = None,
    basis: str | Callable[[], str] = "", unknown: str = "", **status: Any,
) -> Any:  # fmt: skip
    """A page's stored result: ``read()`` (the memo, else the disk cache; :class:`NotCached`
    when it is not stored), else ``compute(progress)`` under :func:`run_in_status` (``status``:
    its texts, ``key`` and ``inputs``). A read that fails otherwise is a failure card naming
    ``what`` (with ``fix``). With ``cost`` (its parts and their expected seconds, asked only
    when the result is not stored) the computation goes through :func:`ask_first` (with
    ``basis``, a text or a function giving it, asked with the cost, and ``unknown``): over
    :data:`SLOW` seconds, or of unknown time, it waits for a click beside its cost, and None is
    returned meanwhile. Returns the result, or None.

    The pages' one way to one stored result, read else computed; ``read`` and ``compute`` are
    ``app.state`` wrappers, whose ``compute`` stores the result and reads it into the memo
    (``state.stored_else_computed``). Where a page reads differently it says why: the
    Interpolation and Triangle pages read many parts under one bar and one click (``compute=``
    of the wrappers), the Surface page computes only on its own button, however quick, and the
    Gauge page remembers a part's miss for the session, so that a rerun does not look again."""
    try:
        return read()
    except NotCached:
        pass
    except Exception as err:
        show_error(what, err, fix)
        return None
    if cost is not None:
        key = status.get("key") or failure_key(what)
        parts = cost()
        said = basis() if callable(basis) else basis
        if not ask_first(key, status.get("inputs"), parts, said, unknown):
            return None
    return run_in_status(compute, what=what, fix=fix, **status)
