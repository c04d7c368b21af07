"""A make-room question as the API returns it, and its plan as downloads: JSON, and a shell script of
the kubectl commands that would carry it out, for an operator to review (numaweb never touches a live
cluster; MAKE_ROOM.md says how to carry a plan out safely)."""

from __future__ import annotations

import shlex

from .models import RoomPlan

RESULT_FIELDS = ("fits_now", "found", "moves", "evictions", "moved_cpus", "minimal", "lower_bound", "reason", "after")
#: a search that stopped at a bound (the engine's stats.bound): what raises it
RAISED_BY = {
    "time": "NUMAWEB_MAKE_ROOM_SECONDS raises the time limit",
    "checks": "NUMAWEB_MAKE_ROOM_MAX_CHECKS raises the plans checked",
    "max_moves": "the max_moves option raises it, up to NUMAWEB_MAKE_ROOM_MAX_MOVES",
    "node_pods": "a fixed bound of the engine (16 movable pods a node): no setting raises it",
    "rehoming": "a fixed bound of the engine (2,000 re-admission tries a plan): no setting raises it",
}


def reason(result: dict) -> str | None:
    """Why there is no plan, and when a bound stopped the search, what raises it."""
    text = result.get("reason")
    bound = (result.get("stats") or {}).get("bound")
    return f"{text}; {RAISED_BY[bound]}" if text and bound in RAISED_BY else text


def room_dict(row: RoomPlan, nodes: bool = False) -> dict:
    """The question, its progress and, once answered, the plan (`nodes`: the before/after grids too)."""
    result = row.result or {}
    data = {
        "id": row.pk, "cluster": row.cluster_id, "job": row.job_id, "target": row.target_label,
        "shape": row.shape, "count": row.count or None, "profile": row.profile,
        "weight": (row.options or {}).get("weight", 1), "profile_from": (row.options or {}).get("profile_from"),
        "profile_source": (row.options or {}).get("profile_source", "asked for"),
        "options": row.options,
        "status": row.status, "error": row.error, "progress": {"done": row.progress_done, "total": row.progress_total},
        "created_at": row.created_at, "started_at": row.started_at, "finished_at": row.finished_at,
        "engine_ms": row.engine_ms, "session": row.session_id,
        **{k: result.get(k) for k in RESULT_FIELDS}, "reason": reason(result),
        "stats": result.get("stats"),
    }
    if nodes:
        data["nodes"] = result.get("nodes", [])
    return data


def plan_json(row: RoomPlan) -> dict:
    """The download: the plan only, in the order its steps are carried out."""
    result = row.result or {}
    return {"kind": "numaweb.make-room/1", "id": row.pk, "cluster": row.cluster.name, "target": row.target_label,
            "profile": row.profile, "minimal": result.get("minimal"), "moved_cpus": result.get("moved_cpus"),
            "evictions": result.get("evictions", []), "moves": result.get("moves", []),
            "verified_by_session": (result.get("after") or {}).get("session")}


def _shown(value: object) -> str:
    """A value for a comment line: shell-quoted like every argument, with each character that is not printable
    (a newline would end the comment and make the rest of the name a command) written as its escape."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(value))
    return shlex.quote(text)


def kubectl_script(row: RoomPlan) -> str:
    """A POSIX shell script: by default it only prints the commands; `--run` runs them. Every value is
    quoted (arguments by `shlex.quote`, which keeps a newline inside the quotes; comments by `_shown`),
    whatever the names hold: the stored plan may predate the checks on names."""
    result = row.result or {}
    moves, evictions = result.get("moves", []), result.get("evictions", [])
    q, c = shlex.quote, _shown
    session = (result.get("after") or {}).get("session")
    lines = [
        "#!/bin/sh",
        f"# numaweb make-room plan {row.pk} for {c(row.target_label)} on cluster {c(row.cluster.name)}",
        f"# {len(moves)} moves ({c(result.get('moved_cpus', 0))} CPUs), {len(evictions)} evictions; verified by "
        f"dry-run session {c(session)} ({c(row.profile)} profile)",
        "# Review it first. Without --run it prints the commands; with --run it runs them (needs kubectl and jq).",
        "# Pods owned by a controller (Deployment, StatefulSet, Job) come back by themselves: pin their",
        "# template to the destination node instead of re-creating them by hand (docs/MAKE_ROOM.md).",
        "set -eu",
        'MODE="${1:-}"',
        f"DIR=make-room-{row.pk}",
        'step() { if [ "$MODE" = --run ]; then "$@"; else echo "$@"; fi; }',
        'save() { mkdir -p "$DIR" && kubectl get pod -n "$1" "$2" -o json > "$DIR/$1_$2.json"; }',
        "put() { jq --arg node \"$3\" 'del(.metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp,"
        " .status) | .spec.nodeName = $node' \"$DIR/$1_$2.json\" | kubectl create -f -; }",
        "",
        "# 1. save every pod taken off, then take it off its node",
    ]
    for m in [*moves, *evictions]:
        lines.append(f"step save {q(m['namespace'])} {q(m['pod'])}")
        lines.append(f"step kubectl delete pod -n {q(m['namespace'])} {q(m['pod'])} --wait=true")
    lines.append("")
    lines.append("# 2. let the scheduler place the target now, and wait until its pods are Running")
    if row.job is not None:
        lines.append(f"#    kubectl get pods -n {c(row.job.namespace)} --watch    # job {c(row.job)}")
    lines.append("")
    lines.append("# 3. put each moved pod back on its destination node (its kubelet picks the CPUs; the plan expects")
    lines.append("#    those shown); evicted pods are not put back")
    for m in moves:
        lines.append(f"#    {c(m['namespace'] + '/' + m['pod'])}: {c(m['from_node'])} CPUs {c(m['from_cpus'])} -> "
                     f"{c(m['to_node'])} CPUs {c(m['to_cpus'])}")
        lines.append(f"step put {q(m['namespace'])} {q(m['pod'])} {q(m['to_node'])}")
    return "\n".join(lines) + "\n"
