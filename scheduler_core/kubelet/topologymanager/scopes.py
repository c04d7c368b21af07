"""The Topology Manager's scopes by name, as `--topology-manager-scope` spells them, and the choice
NewManager makes: a policy that merges nothing (`none`) runs the none scope whatever the scope."""

from __future__ import annotations

from .policies import get_policy
from .scope import Scope
from .scope_container import ContainerScope
from .scope_none import NoneScope
from .scope_pod import PodScope

SCOPES: dict[str, type[Scope]] = {"container": ContainerScope, "pod": PodScope}


def scope_for(policy: str, scope: str) -> type[Scope]:
    """The scope class a Topology Manager with `policy` and `scope` (names already validated) runs."""
    if not get_policy(policy).merges:
        return NoneScope
    return SCOPES[scope]
