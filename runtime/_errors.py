"""Exceptions raised by the actor kernel."""

from __future__ import annotations


class ConveyorError(Exception):
    """Base class of every error conveyor raises on purpose."""


class ActorDeadError(ConveyorError):
    """The target actor has stopped, so the message or question cannot reach it."""


class AskTimeout(ConveyorError, TimeoutError):
    """No reply arrived within the timeout given to ``ask``."""


class MutableMessageError(ConveyorError, TypeError):
    """A message (or a part of it) is of a type that can be changed after sending."""


class ActorNameTaken(ConveyorError, ValueError):
    """``spawn`` was given a name that a live sibling already uses."""


class EscalatedError(ConveyorError):
    """A child escalated its failure; the original exception is ``__cause__``."""
