"""A field of the wrong JSON/YAML type (a string where an object goes, a number where a list goes) is a
FormatError naming the field, not an AttributeError or TypeError from deep inside an importer."""

import pytest

from scheduler_core.errors import FormatError
from scheduler_core.formats import load, load_jobs
from scheduler_core.formats.snapshot import load_snapshot

NRT = """apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {metadata}
{top}zones:
- name: {zone}
  type: Node
  {costs}resources:
  - name: cpu
    capacity: 4
"""


def _nrt(metadata="{name: a}", top="", zone="node-0", costs=""):
    return NRT.format(metadata=metadata, top=top, zone=zone, costs=costs)


@pytest.mark.parametrize(("text", "message"), [
    (_nrt(metadata="x"), "metadata must be an object"),
    (_nrt(costs="costs: 5\n  "), "costs must be a list"),
    (_nrt(top="attributes: 5\n"), "attributes must be a list"),
    (_nrt(top="topologyPolicies: 5\n"), "topologyPolicies must be a list"),
    (_nrt(zone="[x]"), "zones[0] needs a name"),
], ids=["metadata", "costs", "attributes", "topologyPolicies", "zone-name"])
def test_node_resource_topology_fields_of_the_wrong_type(text, message):
    with pytest.raises(FormatError, match=message.replace("[", r"\[")):
        load(text, "nrt")


def test_a_numeric_zone_name_is_the_zone_its_costs_name():
    text = _nrt(zone="1", costs="costs: [{name: 1, value: 10}]\n  ")
    assert load(text, "nrt").topology.distances == {0: (10,)}


def test_numatopology_policies_must_be_an_object():
    text = ("apiVersion: nodeinfo.volcano.sh/v1alpha1\nkind: Numatopology\nmetadata: {name: a}\n"
            "spec:\n  cpuDetail: {'0': {numa: 0}}\n  policies: [a]\n")
    with pytest.raises(FormatError, match="policies must be an object"):
        load(text, "numatopo")


NODE_NRT = """- apiVersion: topology.node.k8s.io/v1alpha2
  kind: NodeResourceTopology
  metadata: {name: a}
  zones: [{name: node-0, type: Node, resources: [{name: cpu, capacity: 4}]}]
"""


@pytest.mark.parametrize(("items", "message"), [
    ("- kind: Node\n  metadata: {name: a, labels: [x]}\n" + NODE_NRT, "labels must be an object"),
    ("- kind: Node\n  metadata: {name: a}\n  status: x\n" + NODE_NRT, "status must be an object"),
    ("- kind: Pod\n  metadata: {name: p, ownerReferences: 5}\n  spec: {containers: [{name: c}]}\n",
     "ownerReferences must be a list"),
    ("- kind: Pod\n  metadata: {name: p}\n  spec: {containers: [{name: c}]}\n  status: Running\n",
     "status must be an object"),
    ("- kind: PodGroup\n  metadata: x\n  spec: {minMember: 1}\n", "metadata must be an object"),
    ("- kind: PodGroup\n  metadata: {name: g, ownerReferences: 5}\n  spec: {minMember: 1}\n",
     "ownerReferences must be a list"),
    ("- apiVersion: batch.volcano.sh/v1alpha1\n  kind: Job\n  metadata: {name: j}\n  status: {state: x}\n"
     "  spec: {tasks: []}\n", "state must be an object"),
], ids=["node-labels", "node-status", "pod-owners", "pod-status", "podgroup-metadata", "podgroup-owners",
        "job-state"])
def test_snapshot_fields_of_the_wrong_type(items, message):
    with pytest.raises(FormatError, match=message):
        load_snapshot("kind: List\nitems:\n" + items)


@pytest.mark.parametrize(("text", "message"), [
    ("kind: List\nitems: 5\n", "items must be a list"),
    ("kind: Pod\nmetadata: {name: p, annotations: [x]}\nspec: {containers: [{name: c}]}\n",
     "annotations must be an object"),
], ids=["list-items", "pod-annotations"])
def test_workload_fields_of_the_wrong_type(text, message):
    with pytest.raises(FormatError, match=message):
        load_jobs(text)
