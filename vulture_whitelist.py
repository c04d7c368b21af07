"""Engine names vulture reports as unused that are used in ways it cannot see (read by `./dev test`)."""

import scheduler_core

scheduler_core.__getattr__  # noqa: B018  Python calls a module's __getattr__ for the lazily imported public names
