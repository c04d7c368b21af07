"""Failed logins lock out the name at that address, and an address trying many names (django-axes) on the login
page, the admin and the token endpoint, never the user elsewhere nor the user's tokens; tokens expire and end with
a password change; DRF throttles the token endpoint and writes; headers: CSP everywhere, HSTS and secure cookies
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
    # from another client address the user gets in: a guesser cannot lock the account (issue 37 row 11)
    other = anon_client.post(url, {"username": "vera", "password": "pw-vera-123"}, REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 302
    call_command("axes_reset_username", "vera")
    ok = anon_client.post(url, {"username": "vera", "password": "pw-vera-123"})
    assert ok.status_code == 302


def test_the_client_locks_whatever_names_it_tries(anon_client, make_user, settings):
    make_user("vera", "viewer")
    for i in range(settings.NUMAWEB_LOGIN_ADDRESS_FAILURE_LIMIT):
        anon_client.post("/login/", {"username": f"guess-{i}", "password": "wrong"})
    assert anon_client.post("/login/", {"username": "vera", "password": "pw-vera-123"}).status_code == 429
    elsewhere = anon_client.post("/login/", {"username": "vera", "password": "pw-vera-123"}, REMOTE_ADDR="10.0.0.9")
    assert elsewhere.status_code == 302


def test_token_endpoint_locks_out_with_429(make_user, settings):
    make_user("olga", "operator")
    client = APIClient()
    codes = [client.post("/api/auth-token/", {"username": "olga", "password": "wrong"}).status_code
             for _ in range(settings.AXES_FAILURE_LIMIT)]
    assert codes[:-1] == [401] * (settings.AXES_FAILURE_LIMIT - 1) and codes[-1] == 429
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


def test_failed_logins_leave_the_users_tokens_and_other_users_alone(make_user, settings):
    """Issue 37 row 11: five wrong passwords for `olga` made her token 401 "locked out" for 15 minutes (renewable
    forever by anyone knowing her name), and another user at the guesser's address got 429. Now the name is held
    back at that address only; her token works and so does a colleague behind the same address."""
    from rest_framework.authtoken.models import Token

    user = make_user("olga", "operator")
    make_user("vera", "viewer")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    guesser = APIClient()
    codes = _fail(guesser, "/api/auth-token/", "olga", settings.AXES_FAILURE_LIMIT + 2)
    assert codes[-1] == 429  # the name, from this address: locked
    assert api.get("/api/clusters/").status_code == 200  # her token: untouched
    colleague = guesser.post("/api/auth-token/", {"username": "vera", "password": "pw-vera-123"})
    assert colleague.status_code == 200  # same address, another name
    elsewhere = APIClient().post("/api/auth-token/", {"username": "olga", "password": "pw-olga-123"},
                                 REMOTE_ADDR="10.0.0.9")
    assert elsewhere.status_code == 200  # her own password, from her own address


def test_tokens_expire_after_their_lifetime_and_the_endpoint_gives_a_new_one(make_user, settings):
    from datetime import timedelta

    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    settings.NUMAWEB_TOKEN_LIFETIME_DAYS = 30
    user = make_user("olga", "operator")
    old = Token.objects.create(user=user)
    Token.objects.filter(pk=old.pk).update(created=timezone.now() - timedelta(days=31))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {old.key}")
    refused = api.get("/api/clusters/")
    assert refused.status_code == 401 and "NUMAWEB_TOKEN_LIFETIME_DAYS" in refused.json()["detail"]
    fresh = APIClient().post("/api/auth-token/", {"username": "olga", "password": "pw-olga-123"}).json()["token"]
    assert fresh != old.key
    api.credentials(HTTP_AUTHORIZATION=f"Token {fresh}")
    assert api.get("/api/clusters/").status_code == 200
    settings.NUMAWEB_TOKEN_LIFETIME_DAYS = 0  # never
    Token.objects.filter(key=fresh).update(created=timezone.now() - timedelta(days=3650))
    assert api.get("/api/clusters/").status_code == 200


def test_a_password_change_ends_the_users_tokens(make_user, capsys):
    from rest_framework.authtoken.models import Token

    user = make_user("olga", "operator")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    user.first_name = "Olga"
    user.save()  # another change keeps them
    assert api.get("/api/clusters/").status_code == 200
    user.set_password("a new long passphrase")
    user.save()
    assert api.get("/api/clusters/").status_code == 401
    call_command("create_user", "olga", "--role", "operator", "--password", "another long passphrase")
    printed = capsys.readouterr().out.rsplit("API token: ", 1)[1].strip()
    assert Token.objects.get(user=user).key == printed  # the one printed is the one that works now
    api.credentials(HTTP_AUTHORIZATION=f"Token {printed}")
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
