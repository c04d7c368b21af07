"""The settings read and never write (numaweb.startup writes what they name, when the product starts), and an
invalid value stops the start with ImproperlyConfigured naming its variable."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

import numaweb.settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Path(numaweb.settings.__file__)


def _import_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> object:
    """numaweb/settings.py executed afresh as another module, under `env`."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("settings_probe", SETTINGS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_importing_the_settings_and_setting_up_django_writes_nothing(tmp_path):
    data = tmp_path / "data"
    env = {**os.environ, "NUMAWEB_DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "numaweb.settings"}
    env.pop("DJANGO_SECRET_KEY", None)
    code = "import django; django.setup(); from django.conf import settings; print(settings.DATA_DIR)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == str(data) and not data.exists()


def test_the_entry_point_makes_the_folders_and_the_key(tmp_path, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    env = {**os.environ, "NUMAWEB_DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "numaweb.settings"}
    out = subprocess.run([sys.executable, "manage.py", "shell", "-v", "0", "-c",
                          "from django.conf import settings; print(settings.SECRET_KEY)"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert out and out == (data / "secret_key").read_text().strip()
    assert (data / "broker").is_dir() and (data / "static").is_dir()
    assert (data / "secret_key").stat().st_mode & 0o777 == 0o600


def test_the_settings_read_an_existing_key_without_writing(tmp_path, monkeypatch):
    (tmp_path / "secret_key").write_text("kept-key\n")
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    probe = _import_settings(monkeypatch, NUMAWEB_DATA_DIR=str(tmp_path / "."))
    assert probe.SECRET_KEY == "kept-key"  # type: ignore[attr-defined]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret_key"]


@pytest.mark.parametrize(("variable", "value", "reason"), [
    ("NUMAWEB_SESSION_MAX_RUNS", "three", "is not an integer"),
    ("DJANGO_DEBUG", "maybe", "is not a boolean"),
    ("NUMAWEB_LOG_FORMAT", "xml", "is not a log format"),
    ("NUMAWEB_TASK_SOFT_TIME_LIMIT", "7200", "must be above 0 and below NUMAWEB_TASK_TIME_LIMIT"),
])
def test_an_invalid_value_is_improperly_configured_naming_the_variable(tmp_path, monkeypatch, variable, value,
                                                                        reason):
    with pytest.raises(ImproperlyConfigured) as error:
        _import_settings(monkeypatch, NUMAWEB_DATA_DIR=str(tmp_path / "data"), **{variable: value})
    assert str(error.value).startswith(f"{variable}=") and reason in str(error.value)
    assert not (tmp_path / "data").exists()
