"""Sweeps beyond one process: the independent units of an experiment computed as Ray tasks.

``executor="local"`` (the default) computes everything in this process. ``executor="ray"``
sends each independent unit of work to a Ray worker: a cell of a barrier table (one pair ×
method × group × space), a control pair's training and a control row, a triangle's edge
alignments (or its joint one) and then its grid, a draw of the gauge sweep. A unit is a
:class:`Call` of a module-level function of the experiment's own module, which runs on the
worker through the same pipeline as the serial run, against that machine's cache (a unit it
finds there costs it a lookup), on one torch thread (a task per core).

What a unit returns comes back to the driver with every cache entry of the kinds it names that
it read or stored (:class:`Found`); the driver stores those in its own content-addressed cache
as they arrive, then assembles the result exactly as the serial run does, now reading every
unit from the cache: the same result (bit for bit against a serial run on one thread, as each
worker runs; float32 rounds differently on other thread counts), and a rerun on this machine
reads it without Ray. A unit that needs another's entries (a control row its pair's
checkpoints, a triangle's grid its alignments) waits for that task, and its entries are
installed in the worker's cache first, so a cluster of several machines computes each unit
once. A task whose worker dies is retried by Ray (``MAX_RETRIES``).

``address`` connects to a running cluster (``ray start --head``, or ``auto``); without it a
local one is started for the sweep with one worker per core and shut down after it. Ray is an
optional dependency (``pip install 'landscape[ray]'``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from landscape.errors import LandscapeError
from landscape.progress import Progress, tell
from landscape.store.cache import Cache, Entry
from landscape.threads import cores, using

EXECUTORS = ("local", "ray")
MAX_RETRIES = 3  # attempts after a worker dies mid-task
CONNECT_TIMEOUT_S = 5.0  # a cluster's head answers a TCP connection at once
# the ports Ray listens at when an address names none: the GCS of ``ray start --head``, and
# the Ray client server for ``ray://``
GCS_PORT, CLIENT_PORT = 6379, 10001
_ADDRESS = re.compile(r"(?:\[(?P<ip6>[^\]]+)\]|(?P<host>[^:/\[\]\s]+))(?::(?P<port>\d{1,5}))?")


def check_executor(executor: str, address: str | None = None) -> None:
    """Refuse an unknown executor, an address without Ray, or Ray when it is not installed."""
    if executor not in EXECUTORS:
        raise LandscapeError(f"unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise LandscapeError("--address connects to a Ray cluster: use it with --executor ray")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise LandscapeError(
                "--executor ray needs Ray: pip install 'landscape[ray]' (or pip install ray)"
            ) from None
        if address is not None:
            check_address(address)


def check_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse, in one line and within about ``timeout_s``, a Ray address that is not one
    (``host:port``, ``ray://host[:port]``, ``auto`` or ``local``) or that nothing answers at: a
    TCP connection to its port (the GCS, or the client server of ``ray://``). Ray itself, given
    such an address, retries for many minutes with a warning every few seconds. ``auto`` and
    ``local`` are Ray's to resolve."""
    if address in ("auto", "local"):
        return
    rest, port = address, GCS_PORT
    if rest.startswith("ray://"):
        rest, port = rest.removeprefix("ray://"), CLIENT_PORT
    m = _ADDRESS.fullmatch(rest)
    if m is None or (m["port"] is None and not address.startswith("ray://")):
        raise LandscapeError(
            f"--address {address!r} is not a Ray address: host:port (the head's GCS, as "
            "ray start --head prints it), ray://host:port, or auto"
        )
    host, port = m["ip6"] or m["host"], int(m["port"] or port)
    if not 0 < port < 65536:
        raise LandscapeError(f"--address {address!r}: the port in host:port must lie in 1–65535")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = f"no answer within {timeout_s:g} s" if isinstance(e, TimeoutError) else (
            e.strerror or str(e) or type(e).__name__)  # fmt: skip
        raise LandscapeError(
            f"--address {address}: no Ray cluster answers there ({why}); start one with "
            "ray start --head, or leave out --address for a local one"
        ) from None


@dataclass(frozen=True)
class Call:
    """One unit of work: ``fn(*args, cache=cache, **kwargs)`` on a worker.

    ``fn`` is a module-level function (Ray sends it by name, and names the task after it);
    ``kinds`` are the cache kinds whose entries it reads or stores that the driver needs;
    ``what`` names the unit in an error.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    kinds: tuple[str, ...] = ()
    what: str = "a unit of the sweep"


@dataclass(frozen=True)
class Found:
    """A cache entry a unit read (``hit``) or computed and stored on its worker."""

    kind: str
    key: str
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any]
    hit: bool


@dataclass(frozen=True)
class Done:
    """What a unit sends back: its value, the entries it found, its compute time."""

    value: Any
    found: tuple[Found, ...]
    seconds: float


class Recording(Cache):
    """A worker's own cache that remembers every entry of ``kinds`` it serves or stores.

    The ``given`` entries (of the units this one waited for) are stored in it and served as
    they came, not read back: a checkpoint trained by another unit then holds its tensors in
    the order training made them, as in a serial run that trained it in the same process
    (learned matching rounds differently when B's parameters come in another order).
    """

    def __init__(self, kinds: Sequence[str], root: str | os.PathLike | None = None,
                 given: Sequence[Found] = ()) -> None:  # fmt: skip
        super().__init__(root)
        self.kinds = frozenset(kinds)
        self.found: dict[tuple[str, str], Found] = {}
        store(self, given)
        self.given = {(f.kind, f.key): Entry(f.tensors, f.meta, f.key) for f in given}

    def _note(self, kind: str, entry: Entry, hit: bool) -> None:
        if kind in self.kinds and (kind, entry.key) not in self.found:
            self.found[kind, entry.key] = Found(kind, entry.key, entry.tensors, entry.meta, hit)

    def get(self, kind: str, key: str) -> Entry | None:
        entry = self.given.get((kind, key)) or super().get(kind, key)
        if entry is not None:
            self._note(kind, entry, True)
        return entry

    def get_or_compute(self, kind: str, inputs: dict[str, Any],
                       compute: Callable[[], Any]) -> tuple[Entry, bool]:  # fmt: skip
        entry, hit = super().get_or_compute(kind, inputs, compute)
        self._note(kind, entry, hit)
        return entry, hit


def store(cache: Cache, found: Sequence[Found]) -> None:
    """Put every found entry into ``cache`` that it does not hold yet (on one machine the
    workers may have written it there already)."""
    for f in found:
        if not cache.path(f.kind, f.key).is_file():
            cache.put(f.kind, f.key, f.tensors, f.meta)


def _work(call: Call, *after: Done) -> Done:
    """On a worker: install the entries of the units this one waited for, run the unit on one
    torch thread against this machine's cache, and send back what it found."""
    cache = Recording(call.kinds, given=[f for done in after for f in done.found])
    t0 = time.perf_counter()
    with using(1):
        value = call.fn(*call.args, cache=cache, **call.kwargs)
    return Done(value, tuple(cache.found.values()), time.perf_counter() - t0)


class Pool:
    """The Ray cluster of one sweep: :meth:`submit` units, then :meth:`gather` them."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.task = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False, num_cpus=1)(_work)
        self.calls: dict[Any, Call] = {}

    def submit(self, call: Call, after: Sequence[Any] = ()) -> Any:
        """Start ``call`` once the tasks ``after`` (references from :meth:`submit`) are done;
        their entries are installed on its worker first. Returns its reference."""
        ref = self.task.options(name=call.fn.__name__).remote(call, *after)
        self.calls[ref] = call
        return ref

    def gather(self, refs: Sequence[Any], cache: Cache, progress: Progress | None = None,
               stage: str = "tasks") -> list[Done]:  # fmt: skip
        """Wait for every task of ``refs``; store the entries each found in ``cache`` as it
        arrives. Returns what each sent back, in the order of ``refs``. A unit's own error is
        one LandscapeError naming it."""
        ray = self.ray
        out: dict[Any, Done] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                what = self.calls[ref].what
                try:
                    done = ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the unit's own error, as one line
                    cause = e.cause if isinstance(e.cause, Exception) else e
                    raise LandscapeError(f"{what} failed on a Ray worker: {cause}") from None
                except ray.exceptions.RayError as e:  # e.g. its worker died every time
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    raise LandscapeError(
                        f"{what} failed on a Ray worker: {type(e).__name__} {first}"
                    ) from None
                store(cache, done.found)
                out[ref] = done
                tell(progress, stage, len(out), len(refs))
        return [out[ref] for ref in refs]


@contextlib.contextmanager
def sweep(address: str | None = None) -> Iterator[Pool]:
    """The :class:`Pool` of one sweep: the cluster at ``address``, a running one this process
    already joined, or a local one with a worker per core (shut down afterwards)."""
    import ray

    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": cores()}
        if address:  # a connection refused at once, not after minutes of Ray's retries
            check_address(address)
        try:
            # Ray's own info and warnings stay off stderr: the command says what went wrong
            ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                     **kwargs)  # fmt: skip
        except Exception as e:  # noqa: BLE001 - a cluster that cannot be reached: one line
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
            raise LandscapeError(f"cannot start or reach {where}: {e}") from None
        started = True
    try:
        yield Pool(ray)
    finally:
        if started:
            ray.shutdown()


def run(calls: Sequence[Call], cache: Cache, *, address: str | None = None,
        progress: Progress | None = None, stage: str = "tasks") -> list[Done]:  # fmt: skip
    """Every call as an independent Ray task (:func:`sweep`, :meth:`Pool.gather`)."""
    if not calls:
        return []
    with sweep(address) as pool:
        return pool.gather([pool.submit(c) for c in calls], cache, progress, stage)
