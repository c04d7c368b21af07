"""Template context: the signed-in user's role, shown in the top bar."""

from django.http import HttpRequest

from .roles import role_of


def role(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    return {"role": role_of(user) if user is not None else None}
