"""Logging for every command, set up in one place: ``--log-level`` and one stderr handler on ``conveyor``.

``add_log_level`` gives every command of an app a ``--log-level`` option (``debug``, ``info``,
``warning``, ``error``) and runs the command inside ``logging_to_stderr``: one handler with
``LOG_FORMAT`` on the ``conveyor`` logger for the command's lifetime, removed afterwards (a test
that invokes many commands in one process does not pile handlers up). A command that declares
its own ``log_level`` parameter (``serve``, whose help says what its levels show) calls
``logging_to_stderr`` itself.
"""

from __future__ import annotations

import enum
import functools
import inspect
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import typer
from typer.core import TyperCommand

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""Every command's log line: time, level, logger, message (``serve``'s format, now everyone's)."""
LOG_LEVEL_PARAMETER: Final = "log_level"


class LogLevel(enum.Enum):
    """``--log-level``: what the ``conveyor`` loggers print on stderr."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


DEFAULT_LOG_LEVEL: Final = LogLevel.WARNING
"""Commands other than ``serve`` print warnings and errors unless told otherwise."""


@contextmanager
def logging_to_stderr(level: LogLevel) -> Iterator[logging.Logger]:
    """The ``conveyor`` logger at ``level``, writing ``LOG_FORMAT`` lines to stderr, for the block's lifetime."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger = logging.getLogger("conveyor")
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(level.value.upper())
    try:
        yield logger
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def wants_debug() -> bool:
    """Whether ``--log-level debug`` is in force (commands that quiet expected failures let them through then)."""
    return logging.getLogger("conveyor").level == logging.DEBUG


def _log_level_option(default: LogLevel) -> Any:
    return typer.Option(
        default, "--log-level", case_sensitive=False,
        help="What conveyor logs on stderr: debug, info, warning or error.",
    )


def with_log_level(command: Callable[..., Any], default: LogLevel = DEFAULT_LOG_LEVEL) -> Callable[..., Any]:
    """``command`` with a ``--log-level`` option, run inside ``logging_to_stderr`` at the level chosen."""
    signature = inspect.signature(command, eval_str=True)
    extra = inspect.Parameter(
        LOG_LEVEL_PARAMETER, inspect.Parameter.KEYWORD_ONLY, default=_log_level_option(default), annotation=LogLevel
    )

    @functools.wraps(command)
    def logged(*args: Any, log_level: LogLevel = default, **kwargs: Any) -> Any:
        with logging_to_stderr(log_level):
            return command(*args, **kwargs)

    logged.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), extra]
    )
    logged.__annotations__ = {**{name: p.annotation for name, p in signature.parameters.items()},
                              LOG_LEVEL_PARAMETER: LogLevel, "return": signature.return_annotation}
    return logged


def add_log_level(app: typer.Typer, command_class: type[TyperCommand] | None = None) -> None:
    """Give every command registered on ``app`` (and its sub-apps) ``--log-level``, unless it has its own.

    ``command_class``, when given, becomes every command's class (the help's look, set in the same pass).
    """
    for info in app.registered_commands:
        if command_class is not None and info.cls in (None, TyperCommand):
            info.cls = command_class
        callback = info.callback
        if callback is None or LOG_LEVEL_PARAMETER in inspect.signature(callback).parameters:
            continue
        info.callback = with_log_level(callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            add_log_level(group.typer_instance, command_class)
