"""Exceptions raised by the engine.

Every input problem raises a subclass of `EngineError` (itself a `ValueError`) whose message names
the offending value, so callers (API, admin, management commands) can show it as is.
"""


class EngineError(ValueError):
    """Base class for every error the engine raises on bad input."""


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
