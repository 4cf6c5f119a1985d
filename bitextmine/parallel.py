"""An ordered map over worker processes with bounded look-ahead, for the stages that parallelise by batch."""

from __future__ import annotations

import contextlib
import gc
import itertools
import multiprocessing as mp
import os
import signal
from collections import deque
from typing import Any, Callable, Iterable, Iterator


def ordered_map(fn: Callable[[Any], Any], items: Iterable[Any], *, init: Callable[..., None], init_args: tuple = (),
                workers: int = 0, inline: int = 2) -> Iterator[Any]:
    """Yield ``fn(item)`` for every item, in input order.

    Inputs of at most ``inline`` items run in this process after ``init(*init_args, child=False)``, so
    small inputs never start processes; longer ones run wholly in ``workers`` processes (0 = one per
    core; none of their items runs here, where it would leave the other cores idle), each set up with
    ``init(*init_args, child=True)``, at most ``2 * workers`` items ahead, so memory stays bounded
    whatever the input size. An exception in ``fn`` is raised here and stops the workers.

    Python's cyclic garbage collector is off while ``fn`` runs (objects are still freed by reference
    counting; cycles are collected between items): a batch's many small results would otherwise trigger
    collections that walk every object of the process, torch's 150,000 included (measured: SentencePiece
    16% slower with torch imported, because of that alone). The objects that exist when the workers
    start are frozen out of the collector's sight in the workers (``gc.freeze``, as the Python
    documentation advises before a fork).

    The workers are forked, not spawned: spawning re-imports the caller's ``__main__``, which breaks
    scripts without a main guard. Forking a process that holds torch is safe when the children never
    enter OpenMP, which is why ``init`` must set ``torch.set_num_threads(1)`` in a child that uses torch
    (as torch's own DataLoader workers do). Each worker's BLAS (numpy's matrix products) runs on one
    thread: with one per core in every worker, small products fought over the cores (measured: `filter
    --score prob` 3,600 pairs/s against 4,700 on 2 cores).
    """
    workers = workers or usable_cores()
    it = iter(items)
    head = list(itertools.islice(it, inline + 1))
    if len(head) <= inline:
        if head:
            init(*init_args, child=False)
        for item in head:
            yield _without_gc(fn, item)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
    gc.freeze()  # the children inherit these objects frozen; this process takes them back below
    try:
        with _stop_signals_blocked():
            pool = ctx.Pool(workers, initializer=_child_init, initargs=(init, init_args))
    finally:
        gc.unfreeze()
    with pool:
        started = list(pool._pool)  # the workers: none leaves before the map ends unless it dies
        pending: deque = deque()
        for item in itertools.chain(head, it):
            pending.append(pool.apply_async(_without_gc, (fn, item)))
            if len(pending) >= 2 * workers:
                yield _result(pending.popleft(), started)
        while pending:
            yield _result(pending.popleft(), started)


def _result(pending, workers: list) -> Any:
    """The result of an ``apply_async`` call, waiting for it; EngineError when one of ``workers`` has stopped (killed,
    for lack of memory most often, or its set-up failed): multiprocessing's pool starts another in its place, but
    the stopped one's item is lost and the wait would never end."""
    while True:
        try:
            return pending.get(timeout=POLL_SECONDS)
        except mp.TimeoutError:
            dead = next((w for w in workers if w.exitcode is not None), None)
            if dead is not None:
                from .errors import EngineError

                code = dead.exitcode
                how = (f"killed by signal {-code}{' (SIGKILL: out of memory?)' if code == -9 else ''}" if code < 0
                       else f"exit code {code}{': its set-up failed (see above)' if code else ''}")
                raise EngineError(f"a worker process ({dead.pid}) stopped, {how}; its work is lost, so the run "
                                  "stops") from None


POLL_SECONDS = 0.5  # how often a wait for a worker's result checks that the workers are alive


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (what taskset or a container's cpuset allows), else
    every core of the machine."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1


def _child_init(init: Callable[..., None], init_args: tuple) -> None:
    """A worker's set-up: SIGTERM (how the pool ends its workers) ends it quietly whatever handler the parent
    set (Ray's, in a driver that started a local cluster, printed a stack trace for every worker); Ctrl-C, which
    the terminal sends to every process of the group, is left to the parent, which stops the pool (each worker
    printed its own KeyboardInterrupt traceback); its BLAS on one thread (the processes are the parallelism),
    then ``init``. Where threadpoolctl is missing (a copy of the sources run without installing them), BLAS
    keeps its threads."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as Ctrl-C: the terminal's group gets it, the parent stops the pool
    if hasattr(signal, "pthread_sigmask"):  # blocked since the fork (_stop_signals_blocked): one sent since ends it now
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        threadpool_limits(1, user_api="blas")
    init(*init_args, child=True)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    """SIGTERM, SIGINT and SIGHUP blocked in this thread inside the block, where the pool forks its first workers
    and starts the thread that forks their replacements (a thread keeps the mask it started with): a worker starts
    with them blocked until :func:`_child_init` has set their handling. A worker the pool stopped (SIGTERM) as it
    was starting ran the parent's handler instead, which in a command is Python code raising an exception: raised
    in the child between the fork and the pool's code, it went on running the parent's program (a copy of the test
    suite, which its parent waited for without end)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block (objects are still freed by reference counting),
    as it was after: for batch calls that build many small results (see :func:`ordered_map`)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _without_gc(fn: Callable[[Any], Any], item: Any) -> Any:
    """``fn(item)`` with the cyclic garbage collector off (see :func:`ordered_map`)."""
    with gc_paused():
        return fn(item)


def numbered_chunks(items: Iterable[Any], n: int) -> Iterator[tuple[list, int]]:
    """(a list of up to ``n`` consecutive items, the 1-based number of its first item) over ``items``."""
    it, first = iter(items), 1
    while True:
        chunk = list(itertools.islice(it, n))
        if not chunk:
            return
        yield chunk, first
        first += len(chunk)


def joined_tail(chunks: Iterable[tuple[list, int]], least: int) -> Iterator[tuple[list, int]]:
    """The (items, number of the first) chunks of ``chunks`` in order, except that a chunk of fewer than ``least``
    items joins the chunk before it: the last chunk of a reader that fills every other one (:func:`numbered_chunks`),
    which would otherwise be a neighbourhood of a few lines where margins and the second stage judge each pair
    among the pairs given with it. Holds one chunk back."""
    held = None
    for items, first in chunks:
        if held is not None and len(items) < least:
            held = (held[0] + items, held[1])
            continue
        if held is not None:
            yield held
        held = (items, first)
    if held is not None:
        yield held
