"""The worker app: what every background run shares, whatever it computes.

- `runs`: one *run* abstraction for the rows a Celery worker computes — scheduling sessions, comparison
  variants, make-room questions. A run kind (`runs.Kind`) is declared by the app that owns the rows; this
  module gives it sending by task name after the commit, the claim, a throttled progress writer with the soft
  time limit, and ONE lost-worker rule (its process gone from this host, its host silent for
  NUMAWEB_WORKER_TIMEOUT, or — for kinds that write a heartbeat on the row — the row silent too long). A lost
  run is failed with the reason and queued again; a run that resumes after being superseded writes nothing.
- `models.WorkerHeartbeat` and `heartbeats`: each worker's heartbeat row (/healthz, the `check_worker` command
  and `./dev run`'s supervisor read them; the table keeps the name the scheduling app gave it).
- `housekeeping`: the thread each worker runs beside its tasks: heartbeat, then every declared kind's lost
  and pending runs.
- `tasks`: the ping task and the worker's start/stop signals.

It imports no other app's services or tasks: they import it (tasks are sent by name), so no import circle."""
