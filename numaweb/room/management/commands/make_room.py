"""`manage.py make_room --cluster NAME (--job NAME [--namespace NS] | --cpu N --memory M --count K --policy P)
[--profile P] [--allow-evictions] [--protect NS]... [--max-priority N] [--pin PATTERN]... [--max-moves N]
[--json] [--queue]`.

Answers the question in this process (or, with --queue, hands it to the workers) and prints the plan;
exit status 0 with a plan (or when it fits now), 1 without one, and a CommandError (status 1, with
the field) on bad input or a failure."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from numaweb.commands import require_migrated_database
from numaweb.inventory.models import Cluster
from numaweb.jobs.models import Job
from numaweb.room import services, tasks
from numaweb.room.export import room_dict
from numaweb.room.models import RoomPlan
from numaweb.worker.runs import BrokerUnavailable


class Command(BaseCommand):
    help = "The fewest pod moves after which a pending job (or a shape × count) fits on a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument("--job", help="a pending job's name")
        parser.add_argument("--namespace", help="the job's namespace (when its name is not unique)")
        parser.add_argument("--cpu", help="a pod shape's CPU request, e.g. 16")
        parser.add_argument("--memory", help="its memory request, e.g. 32Gi")
        parser.add_argument("--count", type=int, help="pods of the shape (a gang of all of them)")
        parser.add_argument("--policy", help="the shape's task topology policy, e.g. single-numa-node")
        parser.add_argument("--profile", default=None, help="default: a job's last session's (the one that left it "
                                                               "pending), else aligned")
        parser.add_argument("--allow-evictions", action="store_true")
        parser.add_argument("--protect", action="append", default=None, help="protected namespace (repeatable)")
        parser.add_argument("--max-priority", type=int, help="pods at or above this priority never move")
        parser.add_argument("--pin", action="append", default=[], help="namespace/name pattern that never moves")
        parser.add_argument("--max-moves", type=int)
        parser.add_argument("--json", action="store_true", help="print the answer as JSON")
        parser.add_argument("--queue", action="store_true", help="queue it for a worker instead of answering here")

    def handle(self, *args: Any, **o: Any) -> None:
        require_migrated_database()
        cluster = Cluster.objects.filter(name=o["cluster"]).first()
        if cluster is None:
            raise CommandError(f"--cluster: no cluster {o['cluster']!r}")
        data: dict = {"profile": o["profile"] or "", "allow_evictions": o["allow_evictions"], "pinned": o["pin"]}
        if o["protect"] is not None:
            data["protected_namespaces"] = o["protect"]
        for key in ("max_priority", "max_moves"):
            if o[key] is not None:
                data[key] = o[key]
        if o["job"]:
            jobs = Job.objects.filter(cluster=cluster, name=o["job"])
            if o["namespace"]:
                jobs = jobs.filter(namespace=o["namespace"])
            found = list(jobs[:2])
            if len(found) != 1:
                raise CommandError(f"--job: no job named {o['job']!r} in cluster {cluster}" if not found
                                   else f"--job: more than one job named {o['job']!r} (give --namespace)")
            data["job"] = found[0].pk
        elif o["cpu"]:
            data.update(shape={"cpu": o["cpu"], "memory": o["memory"]}, count=o["count"], policy=o["policy"])
        else:
            raise CommandError("--job NAME, or --cpu N --count K (with --memory and --policy), is required")
        try:
            fields = services.parse_request(cluster, data)
            if o["queue"]:
                row = tasks.start(fields)
                self.stdout.write(f"make room {row.pk} queued")
                return
        except services.RoomError as exc:
            option = {"pinned": "pin", "protected_namespaces": "protect"}.get(exc.field, exc.field.replace("_", "-"))
            raise CommandError(f"--{option}: {exc}") from None
        except (BrokerUnavailable, services.TooManyQuestions) as exc:
            raise CommandError(str(exc)) from None
        row = RoomPlan.objects.create(**fields)
        row = services.execute(row.pk)
        if row.status != RoomPlan.DONE:
            raise CommandError(f"make room {row.pk} failed: {row.error}")
        data = room_dict(row)
        if o["json"]:
            self.stdout.write(json.dumps(data, indent=2, default=str))
        else:
            self._print(row, data)
        if not data["found"]:
            sys.exit(1)

    def _print(self, row: RoomPlan, data: dict) -> None:
        w = self.stdout.write
        weight = f", weight {data['weight']}" if data["weight"] != 1 else ""
        session = f" #{data['profile_from']}" if data["profile_from"] else ""
        w(f"make room {row.pk}: profile {data['profile']}{weight} ({data['profile_source']}{session})")
        if data["fits_now"]:
            w(f"make room {row.pk}: {row.target_label} fits now; nothing to move")
            return
        if not data["found"]:
            bound = f" (any plan needs at least {data['lower_bound']} moves)" if data["lower_bound"] else ""
            w(f"make room {row.pk}: no plan for {row.target_label}: {data['reason']}{bound}")
            return
        proof = "proven the fewest" if data["minimal"] else f"not proven the fewest (at least {data['lower_bound']})"
        w(f"make room {row.pk}: {row.target_label} fits after {len(data['moves'])} moves "
          f"({data['moved_cpus']} CPUs), {proof}; verified by dry-run session {data['after']['session']} "
          f"({data['after']['pods_placed']} pods placed, {data['after']['topology_affinity_errors']} "
          "TopologyAffinityErrors)")
        for i, m in enumerate(data["moves"], 1):
            w(f"  {i}. {m['namespace']}/{m['pod']}: {m['from_node']} NUMA {m['from_numa']} CPUs {m['from_cpus']} -> "
              f"{m['to_node']} NUMA {m['to_numa']} CPUs {m['to_cpus']}")
        for m in data["evictions"]:
            w(f"  evict {m['namespace']}/{m['pod']} (priority {m['priority']}): {m['from_node']} CPUs {m['from_cpus']}")
