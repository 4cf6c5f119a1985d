"""Plain text tables and plots, shared by the reports of bench, calibrate and eval."""

from __future__ import annotations

from typing import Any, Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table, columns aligned; floats with 2 decimals."""
    cells = [[f"{c:.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells])


def pyplot():
    """matplotlib.pyplot with the file-only Agg backend; MissingDependencyError without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from .errors import MissingDependencyError

        raise MissingDependencyError("the plot needs matplotlib: pip install 'bitextmine[plot]'") from None
    return plt
