"""API tokens that end: a token is refused once older than NUMAWEB_TOKEN_LIFETIME_DAYS (0: never), and every token
of a user is deleted when the user's password changes (a token obtained with the old password, or by whoever
knew it, stops working with it). Failed logins never touch tokens: a lock-out (django-axes) holds back the
address and the name being guessed, not the user's existing tokens, so knowing a user name is not enough to cut a
user off (numaweb.access.lockout)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AbstractUser, User
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def expired(token: Token) -> bool:
    days = settings.NUMAWEB_TOKEN_LIFETIME_DAYS
    return bool(days) and token.created < timezone.now() - timedelta(days=days)


def current_token(user: User) -> Token:
    """The user's token, a new one when it has none or its token has expired."""
    token, _ = Token.objects.get_or_create(user=user)
    if expired(token):
        token.delete()
        token = Token.objects.create(user=user)
    return token


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token scheme, refusing (401) a token older than NUMAWEB_TOKEN_LIFETIME_DAYS."""

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Token]:
        user, token = super().authenticate_credentials(key)
        if expired(token):
            raise AuthenticationFailed(
                f"this token is older than {settings.NUMAWEB_TOKEN_LIFETIME_DAYS} days "
                "(NUMAWEB_TOKEN_LIFETIME_DAYS): get a new one from POST /api/auth-token/")
        return user, token


def revoke_on_password_change(sender: type[AbstractUser], instance: AbstractUser, raw: bool = False,
                              **kwargs: Any) -> None:
    """pre_save of the user model: a changed password hash deletes the user's tokens."""
    if raw or instance.pk is None:
        return
    before = sender._default_manager.filter(pk=instance.pk).values_list("password", flat=True).first()
    if before is not None and before != instance.password:
        Token.objects.filter(user_id=instance.pk).delete()
