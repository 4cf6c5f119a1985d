"""Engines run a stage's tasks: in this process (the default), or as Ray tasks on a cluster.

Both call the same stage functions with the same arguments; tasks communicate only through the work
directory (which every Ray node must see at the same path) and small return values.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ..config import ENGINES
from ..errors import BitextmineError, ConfigError, EngineError, MissingDependencyError

# a cluster address must accept a TCP connection within this many seconds (an unreachable host or closed
# port fails at once: Ray itself would retry for about 12 minutes)
PROBE_SECONDS = 10
# Ray's attempts to reach the cluster's GCS once the port answers (each about 36 s; Ray's default is 20);
# the environment variable RAY_gcs_server_port_wait_time_s, when set, wins
GCS_TRIES = 2


class LocalEngine:
    """Runs tasks one after another in this process."""

    gpus = 0

    def map(self, fn: Callable, tasks: Sequence[tuple], *, gpu: bool = False,
            done: Callable[[], None] | None = None) -> list[Any]:
        out = []
        for args in tasks:
            out.append(fn(*args))
            if done:
                done()
        return out

    def close(self) -> None:
        pass


class RayEngine:
    """Runs tasks on Ray: an existing cluster at ``address``, or a local one started here (``num_cpus``) and
    stopped by :meth:`close`. A task that can use a GPU asks for one where the cluster has GPUs; a task whose
    worker dies is run once more. ConfigError when no cluster answers at ``address`` (at once for a closed
    port, within :data:`PROBE_SECONDS` for an unreachable host, after :data:`GCS_TRIES` attempts for a port
    that answers but is no Ray cluster); EngineError when a task's worker dies twice or a node
    or raylet dies (what finished stays in the work directory, for ``resume``)."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise MissingDependencyError("--engine ray needs Ray: pip install 'bitextmine[ray]'") from None
        self.ray = ray
        self.owned = not ray.is_initialized()
        if self.owned:
            kw: dict = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if address:
                _connect(ray, address, kw)
            else:
                ray.init(num_cpus=num_cpus, **kw)
        elif address:
            _same_cluster(ray, address)
        self.gpus = int(ray.cluster_resources().get("GPU", 0))

    def map(self, fn: Callable, tasks: Sequence[tuple], *, gpu: bool = False,
            done: Callable[[], None] | None = None) -> list[Any]:
        ray = self.ray
        remote = ray.remote(fn).options(num_cpus=1, num_gpus=1 if gpu and self.gpus else 0, max_retries=1)
        refs = [remote.remote(*args) for args in tasks]
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready)
                if done:
                    done()
            return ray.get(refs)
        except ray.exceptions.RayError as e:
            for r in pending:
                try:
                    ray.cancel(r)
                except Exception:  # the cluster may be gone: nothing left to cancel
                    pass
            raise _task_error(ray, fn, e) from None

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def _task_error(ray, fn: Callable, e: Exception) -> Exception:
    """What a failed Ray task raises here: the task's own BitextmineError, the task's other exceptions as they
    are (a bug shows its traceback, as with the local engine), save a file system error (a node that does not
    see the work directory), and an EngineError for a worker, node or raylet that died."""
    cause = getattr(e, "cause", None) if isinstance(e, ray.exceptions.RayTaskError) else None
    if isinstance(cause, BitextmineError):
        return cause
    name = getattr(fn, "__name__", "task")
    if isinstance(cause, OSError):
        return EngineError(f"Ray task {name} failed: {cause}; every node must see the work directory at the "
                           "same path")
    if isinstance(e, ray.exceptions.RayTaskError):
        return e
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return EngineError(f"Ray task {name} failed: {type(e).__name__}: {first} (a worker, node or raylet died); "
                       "with --work-dir, --resume continues from the tasks that finished")


def _connect(ray, address: str, kw: dict) -> None:
    """``ray.init(address)``, refused with a ConfigError at once when nothing answers at the address, and
    after a bounded number of attempts when something answers that is not a Ray cluster."""
    _probe(address)
    var = "RAY_gcs_server_port_wait_time_s"
    had = os.environ.get(var)
    os.environ.setdefault(var, str(GCS_TRIES))
    try:
        ray.init(address=address, **kw)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise ConfigError(f"--ray-address {address}: cannot connect to a Ray cluster there ({first})") from None
    finally:
        if had is None:
            os.environ.pop(var, None)


def _same_cluster(ray, address: str) -> None:
    """ConfigError when this process is already connected to a Ray cluster other than the one at ``address``
    (host:port; other forms, such as "auto" or ray://, are left as the connection made)."""
    host, port = _host_port(address)
    if host is None or "://" in address:
        return
    here = ray.get_runtime_context().gcs_address
    there_host, there_port = _host_port(here)
    ips = {_ip(host), _ip(there_host)}
    if port != there_port or (len(ips) > 1 and not any(ip.startswith("127.") for ip in ips)):  # this host, any name
        raise ConfigError(f"--ray-address {address}: this process is already connected to the Ray cluster at "
                          f"{here}; run where Ray is not yet started, or give that cluster's address")


def _host_port(address: str) -> tuple[str | None, int | None]:
    """(host, port) of host:port or scheme://host:port; (None, None) for other forms."""
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rstrip("/").rpartition(":")
    return (host.strip("[]"), int(port)) if sep and port.isdigit() else (None, None)


def _ip(host: str) -> str:
    import socket

    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def _probe(address: str) -> None:
    """ConfigError unless ``address`` (host:port or ray://host:port; other forms, such as "auto", are left
    to Ray) accepts a TCP connection within :data:`PROBE_SECONDS`."""
    import socket

    host, port = _host_port(address)
    if host is None:
        return
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
    except OSError as e:
        raise ConfigError(f"--ray-address {address}: nothing answers there ({e.strerror or e}); give the "
                          "address of a running cluster's head node (host:port, as 'ray start --head' prints) "
                          "or leave it out to start a local cluster") from None


def make_engine(name: str, address: str | None = None):
    """The engine called ``name`` (local | ray)."""
    if name == "local":
        if address:
            raise ConfigError("--ray-address needs --engine ray")
        return LocalEngine()
    if name == "ray":
        return RayEngine(address)
    raise ConfigError(f"engine {name!r}: expected one of {', '.join(ENGINES)}")
