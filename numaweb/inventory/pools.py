"""A node's pool: the first pool label its Node object carries (the managed services' own, then the usual
hand-made ones), so the cluster map and the fleet metrics group nodes alike."""

from __future__ import annotations

from django.db.models import Expression
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

#: pool labels of the managed Kubernetes services and the usual hand-made one, first found wins
POOL_LABELS = ("cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool",
               "node.kubernetes.io/pool", "pool")


def pool_of() -> Expression:
    """The pool of a `Node` row as a query expression (NULL when no pool label is set)."""
    return Coalesce(*(KT(f"labels__{key}") for key in POOL_LABELS))
