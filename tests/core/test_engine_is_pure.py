"""The engine stands alone: importing every module of scheduler_core loads no web-layer package."""

import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys
import scheduler_core, scheduler_core.formats
for info in pkgutil.walk_packages(scheduler_core.__path__, "scheduler_core."):
    importlib.import_module(info.name)
for name in scheduler_core.__all__:
    getattr(scheduler_core, name)
web = sorted(m for m in sys.modules if m.split(".")[0] in {"django", "celery", "rest_framework", "numaweb", "kombu"})
print(",".join(web))
"""


def test_no_web_layer_import():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
