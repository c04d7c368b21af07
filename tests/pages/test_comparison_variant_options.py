"""The comparison form's koordinator and kai settings: offered on every variant row (named for the profile they
belong to), taken into the stored variant, and refused on their own field for another profile or a bad value."""

from __future__ import annotations

import pytest
from django.urls import reverse

from numaweb.comparisons import services
from numaweb.comparisons.models import Comparison
from tests.pages.helpers import parse
from tests.pages.test_comparisons import form_data

pytestmark = pytest.mark.django_db


def test_every_row_offers_the_koordinator_and_kai_settings(client, demo):
    html = client.get(reverse("pages:jobs")).content.decode()
    for name, label, values in (
            ("numa_strategy", "NUMA scoring strategy (koordinator)", ["", "LeastAllocated", "MostAllocated"]),
            ("cpu_bind_policy", "default CPU bind policy (koordinator)", ["", "FullPCPUs", "SpreadByPCPUs"])):
        select = html[html.index(f'name="v-0-{name}"'):]
        select = select[:select.index("</select>")]
        assert [a["value"] for tag, a in parse(select).elements if tag == "option"] == values
        assert f'aria-label="variant 1: {label}"' in html and f"{label}</th>" in html
    assert 'name="v-0-ignore_list"' in html and 'aria-label="variant 1: ignored resources (kai)"' in html
    assert 'aria-label="variant 1: scoring strategy (nrt, koordinator)"' in html


def test_the_settings_go_into_the_stored_variants(client, demo, monkeypatch):
    monkeypatch.setattr(services, "enqueue", lambda ids: None)  # no worker here
    rows = (("koordinator", {"strategy": "MostAllocated", "numa_strategy": "MostAllocated",
                             "cpu_bind_policy": "SpreadByPCPUs"}),
            ("kai", {"ignore_list": " nvidia.com/gpu, example.com/nic,, "}),
            ("koordinator", {}))
    response = client.post(reverse("comparisons:start"), form_data(demo, rows))
    assert response.status_code == 302, response.content.decode()[:2000]
    variants = list(Comparison.objects.get().variants.all())
    assert [v.label for v in variants] == ["koordinator · MostAllocated · NUMA MostAllocated · SpreadByPCPUs",
                                           "kai · ignoring example.com/nic,nvidia.com/gpu", "koordinator"]
    assert [(v.settings["strategy"], v.settings["numa_strategy"], v.settings["cpu_bind_policy"],
             v.settings["ignore_list"]) for v in variants] == [
        ("MostAllocated", "MostAllocated", "SpreadByPCPUs", None),
        (None, None, None, ["example.com/nic", "nvidia.com/gpu"]), (None, None, None, None)]


@pytest.mark.parametrize("profile, fields, field, text", [
    ("volcano", {"cpu_bind_policy": "SpreadByPCPUs"}, "cpu_bind_policy",
     "only the koordinator profile has a default CPU bind policy"),
    ("nrt", {"numa_strategy": "MostAllocated"}, "numa_strategy",
     "only the koordinator profile has a NUMA scoring strategy"),
    ("kai", {"strategy": "MostAllocated"}, "strategy", "only the nrt and koordinator profiles have a scoring strategy"),
    ("koordinator", {"strategy": "LeastNUMANodes"}, "strategy",
     "unknown Koordinator scoring strategy &#x27;LeastNUMANodes&#x27;; expected one of: LeastAllocated, MostAllocated"),
    ("koordinator", {"cpu_bind_policy": "Spread"}, "cpu_bind_policy", "Select a valid choice."),
    ("aligned", {"ignore_list": "nvidia.com/gpu"}, "ignore_list", "only the kai profile has an ignore list"),
])
def test_a_setting_the_profile_lacks_is_refused_on_its_field(client, demo, profile, fields, field, text):
    response = client.post(reverse("comparisons:start"), form_data(demo, ((profile, fields),)))
    assert response.status_code == 422
    html = response.content.decode()
    cell = html[html.index(f'name="v-0-{field}"'):]
    cell = cell[:cell.index("</td>")]  # the error sits in the field's own cell
    assert text in cell and 'class="field-error"' in cell
    assert not Comparison.objects.exists()
