import os
import signal
import time

import pytest

from bitextmine import parallel
from bitextmine.parallel import ordered_map

STATE = {}


def init(tag, child):
    STATE.update(tag=tag, child=child, pid=os.getpid())


def work(x):
    if x == "boom":
        raise ValueError("item boom failed")
    return x * 2, STATE["tag"], STATE["child"], STATE["pid"]


def test_order_all_in_workers():
    """More items than ``inline``: every one runs in a worker (none here, leaving cores idle), in order."""
    out = list(ordered_map(work, range(40), init=init, init_args=("t",), workers=2, inline=3))
    assert [o[0] for o in out] == [2 * i for i in range(40)]
    assert all(o[1] == "t" for o in out)
    assert all(o[2] for o in out) and all(o[3] != os.getpid() for o in out)
    out = list(ordered_map(work, range(4), init=init, init_args=("u",), workers=2, inline=3))
    assert [o[0] for o in out] == [0, 2, 4, 6] and all(o[3] != os.getpid() for o in out)


def test_small_inputs_start_no_process():
    out = list(ordered_map(work, [1, 2], init=init, init_args=("s",), workers=2))
    assert [o[3] for o in out] == [os.getpid()] * 2 and [o[2] for o in out] == [False] * 2
    assert list(ordered_map(work, [], init=init, workers=2)) == []


@pytest.mark.parametrize("where", [0, 10])
def test_errors_reach_the_caller(where):
    items = list(range(20))
    items[where] = "boom"
    with pytest.raises(ValueError, match="item boom failed"):
        list(ordered_map(work, items, init=init, init_args=("e",), workers=2))


def gc_state(x):
    import gc

    return gc.isenabled(), gc.get_freeze_count() > 0, os.getpid()


@pytest.mark.parametrize("n", [2, 10])
def test_items_run_without_the_cyclic_collector_and_the_caller_gets_it_back(n):
    """fn runs with the cyclic GC off (inline and in workers; the workers see the caller's objects
    frozen); afterwards this process's collector is enabled and nothing of it stays frozen."""
    import gc

    assert gc.isenabled() and gc.get_freeze_count() == 0
    out = list(ordered_map(gc_state, range(n), init=init, init_args=("g",), workers=2))
    assert all(enabled is False for enabled, _, _ in out)
    if n > 2:  # in workers
        assert all(frozen and pid != os.getpid() for _, frozen, pid in out)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_numbered_chunks_cover_every_item_once_in_order():
    from bitextmine.parallel import numbered_chunks

    for n_items in (0, 1, 6, 7, 13):
        for n in (1, 3, 7):
            chunks = list(numbered_chunks(iter(range(n_items)), n))
            assert [x for c, _ in chunks for x in c] == list(range(n_items))
            assert [first for _, first in chunks] == list(range(1, n_items + 1, n))
            assert all(len(c) == n for c, _ in chunks[:-1])


def test_joined_tail_joins_a_short_last_chunk_to_the_one_before():
    from bitextmine.parallel import joined_tail, numbered_chunks

    for n_items in (0, 1, 6, 7, 8, 13, 20):
        for n, least in ((1, 0), (4, 2), (7, 4), (7, 7)):
            got = list(joined_tail(numbered_chunks(iter(range(n_items)), n), least))
            plain = list(numbered_chunks(iter(range(n_items)), n))
            if len(plain) > 1 and len(plain[-1][0]) < least:  # the obvious: the last two chunks made one
                plain = plain[:-2] + [(plain[-2][0] + plain[-1][0], plain[-2][1])]
            assert got == plain
            assert [x for c, _ in got for x in c] == list(range(n_items))
            assert all(len(c) >= least for c, _ in got[1:]) and all(len(c) <= n + max(least - 1, 0) for c, _ in got)


def test_workers_follow_the_cores_this_process_may_use(monkeypatch):
    """taskset or a container's cpuset leaves fewer cores than the machine has: one worker each, not one per core
    of the machine."""
    import os

    from bitextmine import parallel

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert parallel.usable_cores() == 1
    monkeypatch.delattr(os, "sched_getaffinity")
    assert parallel.usable_cores() == 64


def killed_at_3(x):
    import signal

    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer stops a process
    return x


def failing_init(child):
    if child:
        raise RuntimeError("cannot load the model here")


def test_a_worker_that_dies_or_cannot_start_stops_the_map_with_an_error():
    """The pool started another worker in a dead one's place and its item was waited for forever."""
    import time

    from bitextmine.errors import EngineError

    t = time.perf_counter()
    with pytest.raises(EngineError, match=r"a worker process \(\d+\) stopped, killed by signal 9"):
        list(ordered_map(killed_at_3, range(8), init=lambda child: None, workers=2))
    with pytest.raises(EngineError, match=r"stopped, exit code 1: its set-up failed"):
        list(ordered_map(work, range(8), init=failing_init, workers=2))
    assert time.perf_counter() - t < 60



def sigterm_handler(_):
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, os.getpid()


def test_workers_end_quietly_whatever_sigterm_handler_the_parent_set():
    """The pool ends its workers by SIGTERM; a handler the parent installed (Ray's prints a stack trace) must not
    be theirs."""
    before = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        out = list(ordered_map(sigterm_handler, range(8), init=init, init_args=("q",), workers=2, inline=2))
    finally:
        signal.signal(signal.SIGTERM, before)
    assert all(default for default, _ in out) and all(pid != os.getpid() for _, pid in out)


def _sigint_handler(_item):
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_workers_leave_ctrl_c_to_the_parent():
    """Ctrl-C reaches every process of the terminal's group: the workers ignore it (each printed its own
    KeyboardInterrupt traceback), the parent stops the pool."""
    got = list(ordered_map(_sigint_handler, range(6), init=lambda child: None, workers=2, inline=1))
    assert got == [True] * 6, got


def _signal_state(_item):
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return _AT_START, signal.SIGTERM in blocked, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


_AT_START = None  # in a worker: whether SIGTERM was blocked when its set-up began


def _recording_child_init(init, init_args):
    global _AT_START
    _AT_START = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    _ORIGINAL_CHILD_INIT(init, init_args)


_ORIGINAL_CHILD_INIT = parallel._child_init


def test_workers_start_with_stop_signals_blocked_until_their_set_up_sets_them(monkeypatch):
    monkeypatch.setattr(parallel, "_child_init", _recording_child_init)
    got = set(ordered_map(_signal_state, range(6), init=lambda child: None, workers=2, inline=1))
    assert got == {(True, False, True)}, got
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the parent's mask is as it was


def _double(x):
    return 2 * x


def _slow_second_start(marker_dir):
    def child_init(init, init_args):
        try:  # the first worker starts at once; the others are still starting when the map ends
            os.close(os.open(os.path.join(marker_dir, "first"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            time.sleep(1)
        _ORIGINAL_CHILD_INIT(init, init_args)
    return child_init


def test_a_worker_stopped_while_starting_never_runs_the_parents_handler(tmp_path, monkeypatch):
    """The pool stops its workers with SIGTERM when the map ends. A worker still starting ran the parent's handler
    (a command's raises an exception), which between the fork and the pool's code went on running the parent's
    program: a copy of the test suite that its parent waited for without end."""
    parent = os.getpid()

    def handler(signum, frame):
        if os.getpid() != parent:
            open(os.path.join(tmp_path, f"ran-in-{os.getpid()}"), "w").close()
        raise RuntimeError("the parent's handler")

    monkeypatch.setattr(parallel, "_child_init", _slow_second_start(str(tmp_path)))
    before = signal.signal(signal.SIGTERM, handler)
    try:
        for _ in range(3):
            (tmp_path / "first").unlink(missing_ok=True)
            assert list(ordered_map(_double, range(3), init=lambda child: None, workers=3, inline=0)) == [0, 2, 4]
    finally:
        signal.signal(signal.SIGTERM, before)
    assert os.getpid() == parent and sorted(p.name for p in tmp_path.iterdir()) == ["first"]
