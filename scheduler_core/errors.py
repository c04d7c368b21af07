"""Exceptions raised by the engine.

Every input problem raises a subclass of `EngineError` (itself a `ValueError`) whose message names
the offending value, so callers (API, admin, management commands) can show it as is.
"""


class EngineError(ValueError):
    """Base class for every error the engine raises on bad input. `field` names the input it is about
    when the engine knows it (`cpu`, `memory`, a device resource, `replicas`, `min_available`,
    `topology_policy`, `name`, `priority`; a pod's `labels`, `annotations`, `pod_priority`), so a form can
    show the message next to that field."""

    def __init__(self, message: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class CPUSetError(EngineError):
    """A CPU list such as `3-1`, `0-99999999` or `a,b` that is not a valid Linux cpuset."""


class TopologyError(EngineError):
    """A machine topology that is inconsistent: duplicate CPU, CPU without NUMA node, bad distance..."""


class RequestError(EngineError):
    """A pod, container or job request that is invalid: negative or non-integer counts, bad names."""


class PolicyError(EngineError):
    """An unknown or invalid kubelet / scheduler policy, scope or option."""


class InsufficientResourcesError(EngineError):
    """A request that can never fit: larger than the whole machine, or than what is free."""


class FormatError(EngineError):
    """An importer could not read its input; the message names the line or element when there is one."""


def check_int(value: object, what: str, minimum: int | None = 0, *, error: type[EngineError] | None = None,
              field: str | None = None) -> int:
    """`value` if it is an int (not a bool) of at least `minimum` (None: any int); otherwise the error
    class given (RequestError by default) naming `what`: "... must be an integer, not 1.5",
    "... cannot be negative: -1" or "... must be at least 1, not 0"."""
    cls = error or RequestError
    if isinstance(value, bool) or not isinstance(value, int):
        raise cls(f"{what} must be an integer, not {value!r}", field)
    if minimum is not None and value < minimum:
        if minimum == 0:
            raise cls(f"{what} cannot be negative: {value}", field)
        raise cls(f"{what} must be at least {minimum}, not {value}", field)
    return value
