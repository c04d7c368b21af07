"""A job's pods as the job page pages them: (task, replica) in task order, sliced without building the rest."""

import pytest

from numaweb.jobs.models import Task
from numaweb.pages.views.jobs import _Replicas


def test_replicas_index_and_slice_like_a_list():
    a, b = Task(name="a", replicas=2), Task(name="b", replicas=3)
    pods = _Replicas([a, b])
    every = [(a, 0), (a, 1), (b, 0), (b, 1), (b, 2)]
    assert len(pods) == 5 and list(pods) == every
    assert pods[1:4] == every[1:4] and pods[3:] == every[3:] and pods[9:] == []
    assert pods[0] == (a, 0) and pods[-1] == (b, 2)
    with pytest.raises(IndexError):
        pods[5]
