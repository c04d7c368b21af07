"""The engine stands alone: importing every module of scheduler_core loads no web-layer package, and the
engine installs and runs a session where Django does not exist."""

import ast
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[1]
WEB = {"django", "djangorestframework", "drf-spectacular", "drf-spectacular-sidecar", "django-htmx", "celery",
       "redis", "psycopg", "dj-database-url", "gunicorn", "django-axes", "django-csp", "django-simple-history",
       "whitenoise"}
SESSION = """
import importlib.util, scheduler_core
from scheduler_core import Cluster, Container, Job, KubeletConfig, Node, Pod, Task, run_session
from scheduler_core.model.topology import synthetic
assert importlib.util.find_spec("django") is None, "Django is installed here"
node = Node("n1", synthetic(1, 2, 4, 2), KubeletConfig(cpu_manager_policy="static",
            topology_manager_policy="single-numa-node"))
job = Job("j", (Task("t", Pod("p", (Container.guaranteed("c", cpu_milli=2000, memory=1 << 30),)), replicas=2,
                     topology_policy="single-numa-node"),))
print(scheduler_core.__file__, run_session(Cluster([node]), [job], profile="aligned").to_dict()["counts"])
"""


def test_engine_installs_and_runs_without_django(tmp_path: Path) -> None:
    """`pip install .` requires no web package, and the installed engine runs a session in an
    environment where Django does not exist."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("numaweb-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    required = {line.split(":", 1)[1].split(";")[0].strip() for line in metadata.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    names = {re.split(r"[\s<>=!~\[]", r, maxsplit=1)[0].lower() for r in required}
    assert names == {"defusedxml", "pyyaml", "rapidyaml"}
    assert not names & WEB

    env = tmp_path / "env"
    venv.create(env, with_pip=False)  # an empty environment: no Django, no project on its path
    python = env / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with zipfile.ZipFile(wheel) as zf:  # a pure-Python wheel installs by unpacking it
        zf.extractall(site)
    out = subprocess.run([python, "-c", SESSION], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, counts = out.stdout.split(" ", 1)
    assert where.startswith(site)
    assert "'placed': 2, 'unplaced': 0, 'admitted': 2" in counts


def test_checkers_see_every_public_name() -> None:
    """The facade's TYPE_CHECKING imports (what mypy and IDEs see) name the same objects, from the same
    modules, as the lazy imports that run, and as `__all__`."""
    import scheduler_core

    tree = ast.parse(Path(scheduler_core.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}
    assert seen == scheduler_core._EXPORTS
    assert sorted(seen) == sorted(scheduler_core.__all__)
