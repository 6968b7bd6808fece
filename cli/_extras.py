"""A command whose extra is not installed: one line on stderr saying what to install, exit status 1, no traceback."""

from __future__ import annotations

import typer

from conveyor.runtime.extras import MissingExtra, require_extra


def tell_missing(missing: MissingExtra) -> None:
    """Print ``missing`` (it names the extra and the pip line) on stderr."""
    typer.echo(f"Error: {missing}", err=True)


def needs_extra(extra: str, command: str) -> None:
    """Exit 1 saying ``conveyor COMMAND needs the 'EXTRA' extra: pip install ...`` when ``extra`` is missing."""
    try:
        require_extra(extra, f"conveyor {command}")
    except MissingExtra as missing:
        tell_missing(missing)
        raise typer.Exit(1) from None
