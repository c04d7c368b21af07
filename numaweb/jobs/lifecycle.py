"""A job's end: finished (kept, marked so) or deleted, releasing in the same transaction every allocation
its pods hold. Here rather than in `services` because it writes through the inventory's lock order
(`inventory.services.hold_nodes`, `release`), and the inventory's services read jobs through `services`."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from numaweb.inventory import services as inventory
from numaweb.inventory.models import Allocation

from .models import Job


def _release(job: Job, finish: bool) -> int:
    """Hold the nodes where the job's pods hold resources, then the job; release them all; finish or delete
    the job. Node ids are read before the locks (nodes are always held before jobs, by every writer), so
    if a pod of the job gained an allocation on another node meanwhile, the whole step runs again."""
    for _attempt in range(5):
        with transaction.atomic():
            nodes = set(Allocation.objects.filter(job=job).values_list("node_id", flat=True))
            inventory.hold_nodes(nodes)
            locked = Job.objects.select_for_update().filter(pk=job.pk).first()
            if locked is None:
                return 0
            if not set(Allocation.objects.filter(job=job).values_list("node_id", flat=True)) <= nodes:
                continue
            released = inventory.release(Allocation.objects.filter(job=job))
            if finish:
                Job.objects.filter(pk=job.pk).update(finished_at=timezone.now(), status=Job.FINISHED)
            else:
                locked.delete()
            return released
    raise RuntimeError(f"job {job}: its pods kept gaining allocations; try again")


def finish_job(job: Job) -> int:
    """Mark the job finished and release every allocation its pods hold, in one transaction; returns how
    many allocations were released."""
    released = _release(job, finish=True)
    job.refresh_from_db()
    return released


def delete_job(job: Job) -> int:
    """Delete the job and release every allocation its pods hold, in one transaction."""
    return _release(job, finish=False)
