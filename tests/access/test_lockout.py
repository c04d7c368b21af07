"""Failed logins lock the account and the client (django-axes) on the login page, the admin and the token
endpoint; DRF throttles the token endpoint and writes; headers: CSP everywhere, HSTS and secure cookies
under NUMAWEB_HTTPS."""

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _fail(client, url: str, username: str, n: int) -> list[int]:
    return [client.post(url, {"username": username, "password": "wrong"}).status_code for _ in range(n)]


@pytest.mark.parametrize("url", ["/login/", "/admin/login/"])
def test_the_account_locks_after_n_failures_then_unlocks(anon_client, make_user, settings, url):
    make_user("vera", "admin")
    limit = settings.AXES_FAILURE_LIMIT
    codes = _fail(anon_client, url, "vera", limit)
    assert codes[:-1] == [200] * (limit - 1) and codes[-1] == 429
    right = anon_client.post(url, {"username": "vera", "password": "pw-vera-123"})
    assert right.status_code == 429 and "locked" in right.content.decode().lower()
    # from another client address too: the account itself is locked
    other = anon_client.post(url, {"username": "vera", "password": "pw-vera-123"}, REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 429
    call_command("axes_reset_username", "vera")
    ok = anon_client.post(url, {"username": "vera", "password": "pw-vera-123"})
    assert ok.status_code == 302


def test_the_client_locks_whatever_names_it_tries(anon_client, make_user, settings):
    make_user("vera", "viewer")
    for i in range(settings.AXES_FAILURE_LIMIT):
        anon_client.post("/login/", {"username": f"guess-{i}", "password": "wrong"})
    assert anon_client.post("/login/", {"username": "vera", "password": "pw-vera-123"}).status_code == 429
    elsewhere = anon_client.post("/login/", {"username": "vera", "password": "pw-vera-123"}, REMOTE_ADDR="10.0.0.9")
    assert elsewhere.status_code == 302


def test_token_endpoint_locks_out_with_429(make_user, settings):
    make_user("olga", "operator")
    client = APIClient()
    codes = [client.post("/api/auth-token/", {"username": "olga", "password": "wrong"}).status_code
             for _ in range(settings.AXES_FAILURE_LIMIT)]
    assert codes[:-1] == [400] * (settings.AXES_FAILURE_LIMIT - 1) and codes[-1] == 429
    locked = client.post("/api/auth-token/", {"username": "olga", "password": "pw-olga-123"})
    assert locked.status_code == 429 and "locked out" in locked.json()["detail"]
    assert AccessAttempt.objects.filter(username="olga").exists()
    call_command("axes_reset")
    assert client.post("/api/auth-token/", {"username": "olga", "password": "pw-olga-123"}).status_code == 200


def test_token_endpoint_and_writes_are_rate_limited(make_user, settings):
    from tests.web.helpers import token_client

    api = token_client(make_user("root", "admin"))
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "auth-token": "3/minute", "writes": "2/minute"}}
    make_user("olga", "operator")
    client = APIClient()
    codes = [client.post("/api/auth-token/", {"username": "olga", "password": "pw-olga-123"}).status_code
             for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    writes = [api.post("/api/clusters/", {"name": f"c{i}"}, format="json").status_code for i in range(3)]
    assert writes == [201, 201, 429]
    assert api.get("/api/clusters/").status_code == 200  # reads are not limited


def test_every_response_carries_the_policy_and_the_old_headers(client, anon_client):
    for c, url in ((client, "/"), (client, "/api/docs/"), (client, "/api/docs/?script="), (anon_client, "/login/"),
                   (client, "/admin/"), (anon_client, "/api/nodes/"), (anon_client, "/healthz")):
        response = c.get(url)
        policy = response["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy and "frame-ancestors 'none'" in policy
        assert response["X-Content-Type-Options"] == "nosniff" and response["Referrer-Policy"] == "same-origin"
        assert response["X-Frame-Options"] == "DENY"
    docs = client.get("/api/docs/").content.decode()
    assert "<style" not in docs and "<script>" not in docs and "?script=" in docs


def test_no_inline_script_or_style_in_the_pages(client, make_user):
    import re

    from numaweb.inventory.models import Cluster
    from tests.web.helpers import make_node

    node = make_node(Cluster.objects.create(name="c1"), "n1")
    for url in ("/", "/jobs/", "/sessions/", f"/nodes/{node.pk}/", "/comparisons/", "/login/"):
        html = client.get(url).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), url
        assert "<style" not in html and " style=" not in html and not re.search(r"\son[a-z]+=", html), url


def test_https_turns_on_hsts_and_secure_cookies(tmp_path):
    import os
    import subprocess
    import sys

    code = ("from django.conf import settings as s; "
            "print(s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "'upgrade-insecure-requests' in s.CONTENT_SECURITY_POLICY['DIRECTIVES'])")
    out = {}
    for flag in ("true", "false"):
        env = {**os.environ, "NUMAWEB_HTTPS": flag, "DJANGO_SETTINGS_MODULE": "numaweb.settings",
               "NUMAWEB_DATA_DIR": str(tmp_path)}
        out[flag] = subprocess.run([sys.executable, "-c", "import django; django.setup(); " + code], env=env,
                                   capture_output=True, text=True, check=True).stdout.split()
    assert out == {"true": ["31536000", "True", "True", "True"], "false": ["0", "False", "False", "False"]}


def test_a_locked_out_accounts_tokens_are_refused_until_it_is_unlocked(make_user, settings):
    """A token obtained before the lock-out does not work around it; unlocking gives it back."""
    from rest_framework.authtoken.models import Token

    user = make_user("olga", "operator")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert api.get("/api/clusters/").status_code == 200
    _fail(APIClient(), "/api/auth-token/", "olga", settings.AXES_FAILURE_LIMIT)
    refused = api.get("/api/clusters/")
    assert refused.status_code == 401 and "locked out" in refused.json()["detail"]
    make_user("vera", "viewer")
    _fail(APIClient(), "/api/auth-token/", "vera", 2)  # someone else's failures change nothing for olga
    call_command("axes_reset_username", "olga")
    assert api.get("/api/clusters/").status_code == 200


def test_client_address_is_the_sockets_unless_proxies_are_trusted(settings):
    from django.test import RequestFactory

    from numaweb.access.clients import client_ip

    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="1.1.1.1, 2.2.2.2, 3.3.3.3")
    settings.NUMAWEB_TRUSTED_PROXIES = 0
    assert client_ip(request) == "10.0.0.1"
    settings.NUMAWEB_TRUSTED_PROXIES = 1  # one proxy of ours: what it appended is the client
    assert client_ip(request) == "3.3.3.3"
    settings.NUMAWEB_TRUSTED_PROXIES = 2
    assert client_ip(request) == "2.2.2.2"
    settings.NUMAWEB_TRUSTED_PROXIES = 9  # more proxies than entries: the left-most
    assert client_ip(request) == "1.1.1.1"
