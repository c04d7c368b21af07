"""The engine's own JSON: a topology (`Topology.to_dict`) or a node (`Node.to_dict`, which adds the
kubelet settings and allocations). Round-trips exactly: `dump(load(x)) == x` for anything `dump`
wrote (keys sorted, two-space indent)."""

from __future__ import annotations

import json

from ..errors import EngineError, FormatError
from ..model.kubelet_config import KubeletConfig
from ..model.node import Allocation, Node
from ..model.topology import Topology
from ._documents import too_many_digits
from ._draft import Loaded


def load(text: str, fmt: str = "engine-json") -> Loaded:
    try:
        data: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"engine JSON: invalid at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise FormatError("engine JSON: nested too deeply") from None
    except ValueError as exc:
        raise (too_many_digits(exc, "engine JSON") or exc) from None
    if not isinstance(data, dict):
        raise FormatError("engine JSON: must be an object")
    try:
        if "topology" in data:
            topology = Topology.from_dict(data["topology"])
            kubelet = KubeletConfig.from_dict(data.get("kubelet"))
            allocations = [Allocation.from_dict(a) for a in data.get("allocations") or ()]
            return Loaded(fmt, topology, kubelet, allocations, extra={"node_name": data.get("name", "")})
        return Loaded(fmt, Topology.from_dict(data))
    except EngineError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise FormatError(f"engine JSON: {exc}") from None


def dump(obj: object) -> str:
    if isinstance(obj, Topology | Node):
        return json.dumps(obj.to_dict(), indent=2, sort_keys=True) + "\n"
    raise FormatError(f"engine JSON export needs a Topology or a Node, not {type(obj).__name__}")
