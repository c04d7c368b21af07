"""Hostile sizes through the API (issue 9, "What was seen" 4-6): each answers 4xx in under a second,
the server's memory growing by under 50 MiB (20 MiB for a refused upload), with a message naming the
field or the limit."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from numaweb.jobs.models import Job
from tests.measure import MiB, measure
from tests.web.helpers import make_job

from .test_jobs import VOLCANO_JOB, job_body

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def warm(api):
    """A server that has answered once (serializers, URLs, schema hooks loaded): what the timings are about."""
    api.post("/api/jobs/", {}, format="json")


def refused(call, status=400, memory=50 * MiB):
    m = measure(call)
    assert m.result.status_code == status, m.result.content[:500]
    assert m.seconds < 1, f"{m.seconds:.2f} s"
    assert m.growth < memory, f"+{m.growth / MiB:.0f} MiB"
    return json.loads(m.result.content)


def test_huge_replicas_in_a_manifest(api):
    manifest = VOLCANO_JOB.replace("- replicas: 1", "- replicas: 1000000000")
    body = refused(lambda: api.post("/api/jobs/", {"manifest": manifest}, format="json"))
    assert "tasks[0].replicas: 1000000000 is more than the limit of 10000" in body["manifest"][0]
    assert "NUMAWEB_MAX_REPLICAS_PER_TASK" in body["manifest"][0]
    assert not Job.objects.exists()


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("priority", 10**30, "less than or equal to 2147483647"),
    ("min_available", 10**30, "less than or equal to 2147483647"),
    ("name", "x" * 5000, "no more than 253 characters"),
    ("name", "Not_A_Name", "is not a valid name"),
    ("namespace", "a" * 64, "no more than 63 characters"),
])
def test_out_of_range_fields_name_the_field(api, field, value, needle):
    body = refused(lambda: api.post("/api/jobs/", job_body(**{field: value}), format="json"))
    assert needle in body[field][0], body


def test_replicas_and_min_available_bounds(api, cluster, settings):
    tasks = job_body()["tasks"]
    body = refused(lambda: api.post("/api/jobs/", job_body(tasks=[{**tasks[0], "replicas": 10**20}]), format="json"))
    assert "less than or equal to 2147483647" in body["tasks"]["0"]["replicas"][0]
    body = refused(lambda: api.post("/api/jobs/", job_body(tasks=[{**tasks[0], "replicas": 10_001}]), format="json"))
    assert "10001 is more than the limit of 10000 replicas per task" in body["tasks"][0]
    two = [{**tasks[0], "replicas": 6000}, {**tasks[0], "name": "u", "replicas": 6000}]
    body = refused(lambda: api.post("/api/jobs/", job_body(tasks=two), format="json"))
    assert "12000 pods, more than the limit of 10000 pods per job (NUMAWEB_MAX_PODS_PER_JOB)" in body["tasks"][0]
    body = refused(lambda: api.post("/api/jobs/", job_body(min_available=3), format="json"))
    assert "minAvailable (3) is more than" in body["min_available"][0]
    settings.NUMAWEB_MAX_REPLICAS_PER_TASK = 20_000  # the limits are settings
    settings.NUMAWEB_MAX_PODS_PER_JOB = 20_000
    assert api.post("/api/jobs/", job_body(tasks=two), format="json").status_code == 201


@pytest.mark.parametrize(("spec", "needle"), [
    ("priority: 1000000000000000000000000000000", "spec.priority"),
    ("minAvailable: 1000000000000000000000000000000", "minAvailable"),
])
def test_out_of_range_manifest_fields(api, spec, needle):
    manifest = VOLCANO_JOB.replace("minAvailable: 1", spec)
    body = refused(lambda: api.post("/api/jobs/", {"manifest": manifest}, format="json"))
    assert needle in body["manifest"][0], body


def test_pods_per_session(api, cluster, settings):
    settings.NUMAWEB_MAX_PODS_PER_SESSION = 5
    job = make_job("wide", replicas=6)
    body = refused(lambda: api.post("/api/sessions/", {"cluster": cluster.pk, "jobs": [job.pk]}, format="json"))
    assert "6 pods, more than the limit of 5 pods per session (NUMAWEB_MAX_PODS_PER_SESSION)" in body["jobs"][0]
    body = refused(lambda: api.post("/api/sessions/", {"cluster": cluster.pk}, format="json"))  # every job
    assert "limit of 5 pods per session" in body["jobs"][0]


LSCPU = "# CPU,Core,Socket,Node\n0,0,0,0\n{cpu},1,0,0\n"
HWLOC = ('<?xml version="1.0"?><topology version="2.0"><object type="Machine" os_index="0" cpuset="0x3" '
         'complete_cpuset="0x3"><object type="Package" os_index="0" cpuset="0x3"><object type="Core" cpuset="0x1">'
         '<object type="PU" os_index="0" cpuset="0x1"/></object><object type="Core" cpuset="0x2">'
         '<object type="PU" os_index="{cpu}" cpuset="0x2"/></object></object></object></topology>')


@pytest.mark.parametrize(("content", "needle"), [
    (LSCPU.format(cpu=4_000_000_000), "CPU id 4000000000 is out of range 0-65535"),
    (LSCPU.format(cpu=2**62), f"CPU id {2**62} is out of range 0-65535"),
    (HWLOC.format(cpu=4_000_000_000), "CPU id 4000000000 is out of range 0-65535"),
    ("# CPU,Core,Socket,Node\n0,0,0,4000000000\n", "NUMA node id 4000000000 is out of range 0-1023"),
])
def test_huge_ids_in_topology_files(api, cluster, content, needle):
    upload = SimpleUploadedFile("topology", content.encode())
    body = refused(lambda: api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "n1", "file": upload},
                                    format="multipart"))
    assert needle in body["file"][0], body


class LazyBody:
    """A multipart body of `size` bytes produced as it is read: the test holds none of it, so the memory
    measured is what the server spends."""

    def __init__(self, cluster_pk: int, size: int) -> None:
        self.head = (f"--B\r\nContent-Disposition: form-data; name=\"cluster\"\r\n\r\n{cluster_pk}\r\n"
                     "--B\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nn1\r\n--B\r\n"
                     "Content-Disposition: form-data; name=\"file\"; filename=\"big.xml\"\r\n\r\n").encode()
        self.tail = b"\r\n--B--\r\n"
        self.length = size
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        n = self.length - self.pos if n is None or n < 0 else min(n, self.length - self.pos)
        out = bytearray(n)  # zeros: the file content
        for part, at in ((self.head, 0), (self.tail, self.length - len(self.tail))):
            lo, hi = max(at, self.pos), min(at + len(part), self.pos + n)
            if lo < hi:
                out[lo - self.pos:hi - self.pos] = part[lo - at:hi - at]
        self.pos += n
        return bytes(out)

    readline = read


def test_upload_over_the_limit_is_refused_before_it_is_read(token, cluster):
    from django.test.client import ClientHandler, RequestFactory

    size = 100 * MiB
    environ = RequestFactory()._base_environ(
        PATH_INFO="/api/nodes/upload/", REQUEST_METHOD="POST", CONTENT_TYPE="multipart/form-data; boundary=B",
        CONTENT_LENGTH=str(size), HTTP_AUTHORIZATION=f"Token {token.key}")
    environ["wsgi.input"] = LazyBody(cluster.pk, size)
    body = refused(lambda: ClientHandler()(environ), status=413, memory=20 * MiB)
    assert "larger than the limit of 16777216 bytes" in body["detail"] and "NUMAWEB_MAX_UPLOAD_BYTES" in body["detail"]
    assert environ["wsgi.input"].pos == 0  # not one byte of the body was read


def test_upload_within_the_limit_still_works(token, cluster, settings):
    """The same lazy body under a raised limit reaches the importer (which refuses zeros as a format)."""
    from django.test.client import ClientHandler, RequestFactory

    settings.NUMAWEB_MAX_UPLOAD_BYTES = 2 * MiB
    size = MiB
    environ = RequestFactory()._base_environ(
        PATH_INFO="/api/nodes/upload/", REQUEST_METHOD="POST", CONTENT_TYPE="multipart/form-data; boundary=B",
        CONTENT_LENGTH=str(size), HTTP_AUTHORIZATION=f"Token {token.key}")
    environ["wsgi.input"] = LazyBody(cluster.pk, size)
    response = ClientHandler()(environ)
    assert response.status_code == 400 and "file" in json.loads(response.content)


def _header(name: str, size: int) -> bytes:
    """A ustar header for a regular file, checksum included."""
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000644\x00"
    h[124:136] = b"%011o\x00" % size
    h[148:156] = b" " * 8
    h[156:157] = b"0"
    h[257:263] = b"ustar\x00"
    h[263:265] = b"00"
    h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def _gzip_tar(parts) -> bytes:
    """A tar.gz from an iterable of byte blocks, compressed as they come (the tar is never whole in memory)."""
    import zlib

    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    out = [z.compress(block) for block in parts]
    out.append(z.compress(bytes(1024)) + z.flush())
    return b"".join(out)


@pytest.fixture(scope="module")
def many_members() -> bytes:
    """300,000 empty members (one header repeated: the reader counts members, whatever their names)."""
    return _gzip_tar([_header("sys/class/x/item", 0) * 300_000])


@pytest.fixture(scope="module")
def one_big_member() -> bytes:
    """A 1 GiB member of no interest before the one file wanted: as gzip members one after the other (as
    `cat a.gz b.gz` makes), one MiB of zeros repeated, so the test does not spend seconds compressing."""
    import gzip

    mib = gzip.compress(bytes(1 << 20), 1)
    return (gzip.compress(_header("var/log/huge.bin", 1 << 30)) + mib * 1024
            + _gzip_tar([_header("sys/devices/system/cpu/online", 2), b"0\n" + bytes(510)]))


@pytest.mark.parametrize(("payload", "needle"), [
    ("many_members", "more than 100000 archive members"),
    ("one_big_member", "decompresses to more than 64 MiB"),
])
def test_tarball_bombs(api, cluster, request, payload, needle):
    upload = SimpleUploadedFile("dump.tar.gz", request.getfixturevalue(payload))
    body = refused(lambda: api.post("/api/nodes/upload/", {"cluster": cluster.pk, "name": "n1", "file": upload},
                                    format="multipart"))
    assert needle in body["file"][0], body
