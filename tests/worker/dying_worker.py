"""`python -m tests.worker.dying_worker [celery worker options]`: the product's Celery worker, except that a run
which kills its worker every time it starts (out of memory, a crash in a library) is planted: a comparison
variant of profile $NUMAWEB_TEST_DOOMED, or a make-room question for the job of that name, SIGKILLs the pool
process running it as soon as it is computed."""

import os
import signal
import sys


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
    django.setup()
    from numaweb.comparisons import services as comparisons
    from numaweb.room import services as room

    doomed = os.environ["NUMAWEB_TEST_DOOMED"]
    run_variant, make_room = comparisons.run_variant, room.make_room

    def dying_variant(nodes, jobs, variant, *args, **kwargs):
        if variant.profile == doomed:
            os.kill(os.getpid(), signal.SIGKILL)
        return run_variant(nodes, jobs, variant, *args, **kwargs)

    def dying_question(cluster, job, *args, **kwargs):
        if job.name == doomed:
            os.kill(os.getpid(), signal.SIGKILL)
        return make_room(cluster, job, *args, **kwargs)

    comparisons.run_variant = dying_variant
    room.make_room = dying_question
    from numaweb.celery import app

    app.worker_main(["worker", *sys.argv[1:]])


if __name__ == "__main__":
    main()
