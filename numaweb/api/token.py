"""The token endpoint: DRF's, throttled per client address and answering 429 once django-axes has locked
the name at this address, or the address, out; it hands out the user's current token, a new one once the last
has expired (numaweb.access.tokens)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import AuthenticationFailed, ValidationError
from rest_framework.parsers import FormParser
from rest_framework.request import Request
from rest_framework.response import Response

from numaweb.access.throttles import TokenRateThrottle
from numaweb.access.tokens import current_token
from numaweb.limits import DepthLimitedJSONParser, StrictMultiPartParser

LOCKED_OUT = ("too many failed logins: this name from this address, or this address, is locked out for a while "
              "(an admin can unlock it)")


class ObtainToken(ObtainAuthToken):
    throttle_classes = [TokenRateThrottle]
    parser_classes = [FormParser, StrictMultiPartParser, DepthLimitedJSONParser]

    @extend_schema(auth=[], responses={200: inline_serializer("Token", {"token": serializers.CharField()}),
                                       401: OpenApiResponse(description="no user with this name and password")})
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """400 names a missing field; a name and password that match no user are a failed login, 401 (well
        formed, as the schema has it, but not credentials)."""
        serializer = self.get_serializer(data=request.data)
        try:
            serializer.is_valid(raise_exception=True)
        except ValidationError as exc:
            if getattr(request, "axes_locked_out", False):
                return Response({"detail": LOCKED_OUT}, status=status.HTTP_429_TOO_MANY_REQUESTS)
            if "non_field_errors" in serializer.errors:
                raise AuthenticationFailed(serializer.errors["non_field_errors"][0]) from exc
            raise
        return Response({"token": current_token(serializer.validated_data["user"]).key})
