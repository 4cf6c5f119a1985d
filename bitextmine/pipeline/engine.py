"""Engines run a stage's tasks: in this process (the default), or as Ray tasks on a cluster.

Both call the same stage functions with the same arguments; tasks communicate only through the work
directory (which every Ray node must see at the same path) and small return values.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..config import ENGINES
from ..errors import BitextmineError, ConfigError, MissingDependencyError


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
    stopped by :meth:`close`. A task that can use a GPU asks for one where the cluster has GPUs."""

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
                ray.init(address=address, **kw)
            else:
                ray.init(num_cpus=num_cpus, **kw)
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
        except ray.exceptions.RayTaskError as e:
            for r in pending:
                ray.cancel(r)
            cause = getattr(e, "cause", None)
            if isinstance(cause, BitextmineError):
                raise cause from None
            raise

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def make_engine(name: str, address: str | None = None):
    """The engine called ``name`` (local | ray)."""
    if name == "local":
        if address:
            raise ConfigError("--ray-address needs --engine ray")
        return LocalEngine()
    if name == "ray":
        return RayEngine(address)
    raise ConfigError(f"engine {name!r}: expected one of {', '.join(ENGINES)}")
