"""The CEL environment a selector sees: the device's maps, and the Kubernetes library's quantity and semver."""

from __future__ import annotations

import pytest

from scheduler_core.dra.cel import SelectorError, activation, matches
from scheduler_core.dra.model import Device, Version

DEVICE = Device("drv.io", "p", "d0", "n1", {"drv.io/fw": Version("1.10.0"), "drv.io/numa": (0, 1),
                                            "other.io/ok": True}, {"memory": 80 << 30})
VARS = activation(DEVICE)


@pytest.mark.parametrize(("expression", "expected"), [
    ('device.driver == "drv.io"', True),
    ('quantity("1Gi").compareTo(quantity("1024Mi")) == 0', True),
    ('device.capacity["drv.io"].memory.isLessThan(quantity("81Gi"))', True),
    ('isQuantity("1Gi") && !isQuantity("one gig")', True),
    ('device.attributes["drv.io"].fw.isGreaterThan(semver("1.9.0"))', True),
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
    ('semver("1.0.0-alpha.2").isGreaterThan(semver("1.0.0-alpha.10"))', False),  # numeric identifiers by value
    ('device.attributes["drv.io"].fw.major() == 1 && device.attributes["drv.io"].fw.minor() == 10', True),
    ('isSemver("1.2") || isSemver("v1.2.3")', False),
    ('device.attributes["drv.io"].numa.includes(1) && !device.attributes["drv.io"].numa.includes(2)', True),
    ('device.attributes["other.io"].ok', True),
    ('"x" in device.attributes["absent.io"]', False),
])
def test_expressions(expression: str, expected: bool) -> None:
    assert matches(expression, VARS) is expected


@pytest.mark.parametrize(("expression", "message"), [
    ("device.attributes[\"drv.io\"].missing", "CEL runtime error"),
    ("device.driver", "could not be converted to bool"),
    ("device.driver ==", "compilation failed"),
    ('quantity("1Gi").compareTo(semver("1.0.0")) == 0', "CEL runtime error"),
])
def test_errors(expression: str, message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        matches(expression, VARS)
