"""Node classes (the session's speed, see `session`): nodes with the same shape, settings and free state
form a class (an interned int id), evaluated once per pod shape. A `ShapeView` keeps one pod shape's
verdict per class, its passing classes bucketed by what decides the node choice, and its verdict
groups (the explanation rows), all brought up to date from the classes' change log."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from itertools import chain, count

from .cluster import Cluster, Request, TallyKey
from .explain import NodeVerdict, Outcome, Row
from .profiles import ProfileSession


class VerdictGroup:
    """The live classes on which one pod shape got one verdict: their node count and the `limit`
    smallest names, remembered until a member changes (most pods change one or two classes). The
    classes are kept sorted by their smallest name, so the first names come from the first `limit`
    classes: a change costs a bisection, not a pass over a group that may hold hundreds of classes,
    and a change behind the first `limit` classes keeps the names. A class's place is one int, the
    rank of its smallest name among the cluster's names (`rank`) above its id: bisecting ints, not
    (name, id) tuples, which at 10,000 nodes cost twice what they did at 1,000."""

    __slots__ = ("count", "last_row", "limit", "members", "names", "order", "rank")

    def __init__(self, limit: int, rank: dict[str, int]) -> None:
        self.limit = limit
        self.rank = rank
        self.members: dict[int, tuple[str, ...]] = {}
        self.order: list[int] = []  # rank of the smallest name << ID_BITS | class id, sorted
        self.count = 0
        self.names: tuple[str, ...] | None = None
        self.last_row: Row | None = None

    def put(self, cid: int, names: tuple[str, ...]) -> None:
        old = self.members.get(cid)
        if old is names:
            return
        self.members[cid] = names
        self.last_row = None
        order, limit, rank = self.order, self.limit, self.rank
        if old is None:
            self.count += len(names)
            place = rank[names[0]] << ID_BITS | cid
            at = bisect_left(order, place)
            order.insert(at, place)
        else:
            self.count += len(names) - len(old)
            if old[0] != names[0]:
                at = bisect_left(order, rank[old[0]] << ID_BITS | cid)
                del order[at]
                if at < limit:
                    self.names = None
                place = rank[names[0]] << ID_BITS | cid
                at = bisect_left(order, place)
                order.insert(at, place)
            else:
                at = bisect_left(order, rank[names[0]] << ID_BITS | cid)
        if at < limit:  # the first `limit` classes (and so the names) are unchanged otherwise
            self.names = None

    def drop(self, cid: int) -> None:
        old = self.members.pop(cid)
        at = bisect_left(self.order, self.rank[old[0]] << ID_BITS | cid)
        del self.order[at]
        self.count -= len(old)
        self.last_row = None
        if at < self.limit:
            self.names = None

    def first_names(self) -> tuple[str, ...]:
        if self.names is None:
            limit, members = self.limit, self.members
            if len(self.order) == 1:
                self.names = members[self.order[0] & ID_MASK][:limit]
            else:
                firsts = (members[place & ID_MASK][:limit] for place in self.order[:limit])
                self.names = tuple(sorted(chain.from_iterable(firsts))[:limit])
        return self.names

    def row(self, sig: int, score: int | None) -> Row:
        """The pod's explanation row for this group: the same object as the previous pod's while
        nothing changed, so what reads the rows can remember its work per row (explain.PodRecord.groups)."""
        row = self.last_row
        if row is None or row[1] != score:
            row = self.last_row = (sig, score, self.count, self.first_names())
        return row


#: class ids fit below this many bits of a `VerdictGroup` place (a session makes far fewer classes)
ID_BITS = 40
ID_MASK = (1 << ID_BITS) - 1


class NodeClasses:
    """Nodes grouped by (static shape, request tally, the profile's state key). `members` maps each
    live class id to (id, its node names sorted), in the order the classes were (re)born; an entry
    is replaced, never changed, when the class gains or loses a node, and `changed` logs that."""

    def __init__(self, cluster: Cluster, profile: ProfileSession) -> None:
        self.cluster = cluster
        self.profile = profile
        self.ids: dict[tuple[int, TallyKey, Hashable], int] = {}
        self.of: dict[str, int] = {}
        #: each node name's place among the cluster's names sorted (a `VerdictGroup` orders by it)
        self.rank: dict[str, int] = {name: i for i, name in enumerate(sorted(cluster.nodes))}
        grouped: dict[int, list[str]] = {}
        for name in self.rank:
            cid = self._key_id(name)
            self.of[name] = cid
            grouped.setdefault(cid, []).append(name)
        self.members: dict[int, tuple[int, tuple[str, ...]]] = {c: (c, tuple(n)) for c, n in grouped.items()}
        #: every class whose members changed, in order: a shape view replays what it has not seen
        self.changed: list[int] = []
        #: a live class's place in `members` (its birth order), to visit a few new classes in that order
        self.born_at: dict[int, int] = {c: i for i, c in enumerate(self.members)}
        self._births = count(len(self.members))

    def _key_id(self, name: str) -> int:
        c = self.cluster
        key = (c.static_id(name), c.tally[name].key(), self.profile.state_key(name))
        cid = self.ids.get(key)
        if cid is None:
            cid = self.ids[key] = len(self.ids)
        return cid

    def update(self, name: str) -> None:
        old = self.of[name]
        new = self._key_id(name)
        if new == old:
            return
        self.changed += (old, new)
        names = self.members[old][1]
        i = bisect_left(names, name)
        if len(names) > 1:
            self.members[old] = (old, names[:i] + names[i + 1:])
        else:
            del self.members[old]
        self.of[name] = new
        entry = self.members.get(new)
        if entry is None:
            self.members[new] = (new, (name,))
            self.born_at[new] = next(self._births)
        else:
            names = entry[1]
            i = bisect_left(names, name)
            self.members[new] = (new, (*names[:i], name, *names[i:]))


#: a pod shape's passing classes are bucketed by (outcome, NUMA count, the verdict's own score, tie-break)
BucketKey = tuple[Outcome, int, int, float]


class ShapeView:
    """What one pod shape knows of the node classes: its verdict on every class it has seen (a class
    is a fixed state, so a verdict never goes stale), and the live classes that pass, bucketed by
    what decides the node choice besides the node's name: (outcome, NUMA count, own score, tie-break). Kept up to
    date by the classes born and gone since the shape's last pod, never by walking every class."""

    __slots__ = ("bucket_of", "buckets", "counted", "groups", "request", "seen_changes", "verdicts")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.verdicts: dict[int, NodeVerdict] = {}
        self.bucket_of: dict[int, BucketKey] = {}
        self.buckets: dict[BucketKey, set[int]] = {}
        self.counted: set[int] = set()
        self.groups: dict[int, VerdictGroup] = {}  # by verdict id: what a pod's explanation rows are made of
        self.seen_changes = 0  # how much of the classes' change log the groups reflect
