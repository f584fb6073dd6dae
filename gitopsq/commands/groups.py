"""A click group that answers a mistyped sub-command with the nearest real ones, as click does for options."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import click


def suggestion(name: str, choices: list[str]) -> str:
    """`` Did you mean 'x'?`` (or a short list) for the choices close to ``name``; empty when none is close."""
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if not close:
        close = [c for c in choices if c.startswith(name) or name.startswith(c)][:3] if name else []
    if not close:
        return ""
    if len(close) == 1:
        return f" Did you mean {close[0]!r}?"
    return f" Did you mean one of: {', '.join(repr(c) for c in close)}?"


class SuggestingGroup(click.Group):
    """A group whose unknown-command error names the closest commands."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            ctx.fail(f"No such command {name!r}.{suggestion(name, self.list_commands(ctx))}")
        return super().resolve_command(ctx, args)


def group(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], SuggestingGroup]:
    """``click.group`` with `SuggestingGroup` as its class."""
    return click.group(name=name, cls=SuggestingGroup, **kwargs)
