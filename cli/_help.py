"""Help as users expect it: ``-h`` beside ``--help``; a flag shown as a flag (``--shrink``, not ``--shrink <bool>``).

typer's rich help prints every option's value type, flags included; an option that takes no
value gets an empty metavar here, so its row shows only its names.
"""

from __future__ import annotations

from typing import Any, Final

from typer.core import TyperCommand, TyperGroup, TyperOption

HELP_OPTIONS: Final = {"help_option_names": ["-h", "--help"]}
"""``-h`` as well as ``--help``, on the app and (contexts pass them down) every command."""


def _flags_without_type(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
    return params


class FlagsAsFlagsCommand(TyperCommand):
    """A command whose help shows its flags without a value type."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The command's parameters and its help option, flags given an empty metavar."""
        return _flags_without_type(super().get_params(ctx))


class FlagsAsFlagsGroup(TyperGroup):
    """A group (the app, ``bench``) whose help shows its flags without a value type."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The group's parameters and its help option, flags given an empty metavar."""
        return _flags_without_type(super().get_params(ctx))
