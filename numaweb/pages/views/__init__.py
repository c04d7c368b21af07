"""The pages (function views), one module per area: dashboard, nodes (and clusters), jobs, sessions,
comparisons, room (make room), dra (pods using DRA devices). Full pages for plain requests, `_fragment`
templates for HTMX ones; the URLs are in `numaweb.pages.urls`.

Every decision shown comes from the engine through the app that owns it (the views call no engine operation,
docs/ARCHITECTURE.md): node state from the inventory services, what-if from `inventory.checks.what_if`, session
results from the rows the Celery task wrote (the engine's explain records)."""
