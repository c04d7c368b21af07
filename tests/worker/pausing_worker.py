"""`python -m tests.worker.pausing_worker [celery worker options]`: the product's Celery worker, except
that the first session to reach checkpoint $NUMAWEB_TEST_PAUSE_AT pauses there (for a test to kill the
process, or stop it). Before pausing it writes $NUMAWEB_TEST_PAUSE_MARKER as JSON: its pid and the placement and
allocation rows its own (uncommitted) transaction already holds; it goes on once the marker's `.release` file
exists (after 600 s at most), and says so with a `.resumed` file. Later sessions, e.g. the re-run in a
fresh prefork child, find the marker and do not pause."""

import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
    django.setup()
    from numaweb.inventory.models import Allocation
    from numaweb.scheduling import services
    from numaweb.scheduling.models import Placement

    stage, marker = os.environ["NUMAWEB_TEST_PAUSE_AT"], Path(os.environ["NUMAWEB_TEST_PAUSE_MARKER"])

    def pause(at: str, session) -> None:
        if at != stage or marker.exists():
            return
        seen = {"pid": os.getpid(), "session": session.pk, "placements": Placement.objects.count(),
                "allocations": Allocation.objects.filter(origin=Allocation.SCHEDULED).count()}
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps(seen))
        tmp.rename(marker)
        release = marker.with_suffix(".release")  # a test lets it go on (after SIGCONT) by creating this file
        deadline = time.monotonic() + 600
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        marker.with_suffix(".resumed").touch()

    services.checkpoint = pause
    from numaweb.celery import app

    app.worker_main(["worker", *sys.argv[1:]])


if __name__ == "__main__":
    main()
