"""The Topology Manager (ENGINE.md §2.1–§2.5): `TopologyHint`, the policies and their merge."""
