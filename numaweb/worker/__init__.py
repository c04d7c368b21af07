"""The worker app: what every background run shares, whatever it computes.

- `runs`: one lifecycle for the rows a Celery worker computes — scheduling sessions, comparison variants,
  make-room questions. A run kind (a `runs.Kind` subclass) is declared by the app that owns the rows and writes
  only its `consume` (and `close`, for a parent); the base owns sending by task name after the commit, the
  broker-down answer, the claim, a throttled progress writer with the soft time limit, the failure wording, ONE
  lost-worker rule (its process gone from this host, its host silent for NUMAWEB_WORKER_TIMEOUT, or — for kinds
  that write a heartbeat on the row — the row silent too long) and the re-queue, capped at NUMAWEB_RUN_MAX_RUNS
  starts. A run that resumes after being superseded writes nothing. `models.Run` holds the columns they share.
- `models.WorkerHeartbeat` and `heartbeats`: each worker's heartbeat row (/healthz, the `check_worker` command
  and `./dev run`'s supervisor read them; the table keeps the name the scheduling app gave it).
- `housekeeping`: the thread each worker runs beside its tasks: heartbeat, then every declared kind's lost
  and pending runs.
- `tasks`: the ping task and the worker's start/stop signals.
- `supervisor`: what keeps `./dev run`'s worker running (`manage.py serve` starts it): restarted when it exits,
  killed and replaced when it hangs, its runs queued again at once.

It imports no other app's services or tasks: they import it (tasks are sent by name), so no import circle."""
