"""`manage.py defrag CLUSTER [--profile P] [--allow-evictions] [--protect NS]... [--max-priority N] [--pin PATTERN]...
[--max-moves N] [--json]`.

Ranks the cluster's pending jobs by the moves each needs and proposes a set one dry run places together
(docs/MAKE_ROOM.md, "The queue"), in this process. Exit status 0 with a proposal, 1 without one (or when the run
failed), 2 on bad input (naming the option)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.commands import require_migrated_database
from numaweb.inventory.models import Cluster
from numaweb.room import defrag
from numaweb.room.models import DefragRun
from numaweb.room.services import RoomError

BAD_INPUT = 2


class Command(BaseCommand):
    help = "Rank a cluster's pending jobs by the pod moves each needs, and propose a set that places the most."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="cluster name")
        parser.add_argument("--profile", default=None, help="default: the pending jobs' last session's (the one that "
                                                               "left them pending), else aligned")
        parser.add_argument("--allow-evictions", action="store_true")
        parser.add_argument("--protect", action="append", default=None, help="protected namespace (repeatable)")
        parser.add_argument("--max-priority", type=int, help="pods at or above this priority never move")
        parser.add_argument("--pin", action="append", default=[], help="namespace/name pattern that never moves")
        parser.add_argument("--max-moves", type=int, help="the most moves looked for per job")
        parser.add_argument("--json", action="store_true", help="print the answer as JSON")

    def handle(self, *args: Any, **o: Any) -> None:
        require_migrated_database()
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"cluster: no cluster {o['cluster']!r}", returncode=BAD_INPUT)
        data: dict[str, Any] = {"profile": o["profile"] or "", "allow_evictions": o["allow_evictions"],
                                "pinned": o["pin"]}
        if o["protect"] is not None:
            data["protected_namespaces"] = o["protect"]
        for key in ("max_priority", "max_moves"):
            if o[key] is not None:
                data[key] = o[key]
        try:
            fields = defrag.parse_request(cluster, data)
        except RoomError as exc:
            option = {"pinned": "--pin", "protected_namespaces": "--protect", "cluster": "cluster"}.get(
                exc.field, "--" + exc.field.replace("_", "-"))
            raise CommandError(f"{option}: {exc}", returncode=BAD_INPUT) from None
        row = DefragRun.objects.create(**fields)
        row = defrag.ADVISOR.execute(row.pk)
        if row.status != DefragRun.DONE:
            raise CommandError(f"defrag {row.pk} failed: {row.error}")
        answer = defrag.defrag_dict(row)
        if o["json"]:
            self.stdout.write(json.dumps(answer, indent=2, default=str))
        else:
            self._print(row, answer)
        if not answer["proposal"]["jobs"]:
            sys.exit(1)

    def _print(self, row: DefragRun, answer: dict) -> None:
        w = self.stdout.write
        names = {j["job"]: j["name"] for j in answer["jobs"]}
        session = f" #{answer['profile_from']}" if answer["profile_from"] else ""
        w(f"defrag {row.pk}: {len(answer['jobs'])} pending jobs ranked, profile {answer['profile']} "
          f"({answer['profile_source']}{session}), {row.engine_ms or 0:.0f} ms")
        if answer["stopped"]:
            w(f"  stopped early: {answer['stopped']}")
        for i, j in enumerate(answer["jobs"], 1):
            cost = "fits now" if j["fits_now"] else f"{j['moves']} moves ({j['moved_cpus']} CPUs)" if j["found"] \
                else f"no plan: {j['reason']}"
            conflicts = f"; conflicts with {', '.join(names[c] for c in j['conflicts'])}" if j["conflicts"] else ""
            w(f"  {i}. {j['name']}: {cost}{conflicts}")
        proposal = answer["proposal"]
        if not proposal["jobs"]:
            w("no proposal: no pending job can be placed by moves within the bounds")
            return
        after = proposal["after"]
        w(f"proposal: {', '.join(names[j] for j in proposal['jobs'])} after {len(proposal['moves'])} moves "
          f"({proposal['moved_cpus']} CPUs); verified by dry-run session {after['session']} ({after['pods_placed']} "
          f"pods placed, {after['topology_affinity_errors']} TopologyAffinityErrors)")
        for i, m in enumerate(proposal["moves"], 1):
            to = f"{m['to_node']} NUMA {m['to_numa']} CPUs {m['to_cpus']}" if m.get("to_node") else "evicted"
            w(f"  {i}. {m['namespace']}/{m['pod']}: {m['from_node']} NUMA {m['from_numa']} CPUs {m['from_cpus']} -> "
              f"{to}")
