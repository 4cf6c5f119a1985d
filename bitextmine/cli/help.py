"""Help pages whose options come in named groups: the few options most runs need first, under
"Options", then the rest under their headings (click lists every option in one block)."""

from __future__ import annotations

import click

COL_MAX = 26  # the widest first column (click: 30)


class GroupedCommand(click.Command):
    """A command whose ``--help`` lists its options in sections: first "Options" (every option no group
    names), then each of ``option_groups``, ((heading, parameter names), ...), in order.

    A name that is no parameter of the command, or one named by two groups, is a ValueError when the
    command is built, so a renamed option cannot drop out of the help unnoticed."""

    def __init__(self, *args, option_groups: tuple[tuple[str, tuple[str, ...]], ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        names = [n for _, group in option_groups for n in group]
        known = {p.name for p in self.params}
        unknown = sorted(set(names) - known)
        twice = sorted({n for n in names if names.count(n) > 1})
        if unknown or twice:
            raise ValueError(f"command {self.name!r}: option groups name unknown parameters {unknown} "
                             f"or parameters twice {twice}")
        self.option_groups = tuple((heading, tuple(group)) for heading, group in option_groups)

    def sections(self, ctx: click.Context) -> list[tuple[str, list[click.Parameter]]]:
        """[(heading, parameters), ...] in help order; every parameter of the command is in exactly one."""
        # the command's options, then --help; arguments are named in the usage line (click >= 8.2 gives a
        # help record to an argument too, which would list it among the options)
        params = [p for p in self.get_params(ctx) if isinstance(p, click.Option)]
        by_name = {p.name: p for p in params}
        grouped = {n for _, group in self.option_groups for n in group}
        return [("Options", [p for p in params if p.name not in grouped])] + [
            (heading, [by_name[n] for n in group]) for heading, group in self.option_groups]

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections = [(heading, [r for r in (p.get_help_record(ctx) for p in params) if r is not None])
                    for heading, params in self.sections(ctx)]
        # one column width for every section (write_dl sizes each list by its own terms): pad the short terms
        width = min(max((len(t) for _, rows in sections for t, _ in rows), default=0), COL_MAX)
        for heading, rows in sections:
            if rows:
                with formatter.section(heading):
                    formatter.write_dl([(t.ljust(width) if text else t, text) for t, text in rows], col_max=COL_MAX)
