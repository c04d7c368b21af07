"""Permissions that belong to no single model (what-if, comparisons, imports, reading the API docs).

`Access` is never stored: it only carries these permissions, so roles can grant them like any other."""

from django.db import models


class Access(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("browse", "Can read the pages, the API schema and its docs"),
            ("run_whatif", "Can ask a node what-if questions"),
            ("compare", "Can run comparisons of scheduling profiles"),
            ("import_inventory", "Can import clusters and nodes"),
        ]
