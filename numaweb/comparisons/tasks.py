"""Celery tasks. Arguments are ids only; the work and its bookkeeping live in services."""

from celery import shared_task

from . import services


# acks_late + reject_on_worker_lost: a worker that dies mid-variant puts the message back and the
# variant runs again from scratch, up to NUMAWEB_RUN_MAX_RUNS starts (it is a dry run that writes only its own row).
@shared_task(name="numaweb.run_comparison_variant", acks_late=True, reject_on_worker_lost=True)
def run_comparison_variant(variant_id: int) -> str:
    """Run one variant of a comparison by id; the outcome is on the variant's row."""
    return services.execute_variant(variant_id).status
