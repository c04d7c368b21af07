"""Page numbers as the schema documents them: `page` is a whole number from 1 (400 naming it otherwise, an
empty one too), a page past the last answers 404; `page_size`, where a list offers it, is 1 to its maximum
(400 otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.paginator import Paginator as DjangoPaginator
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

if TYPE_CHECKING:  # DRF's views import the throttle and pagination classes its settings name
    from rest_framework.views import APIView


def _whole(raw: str, name: str, top: int | None = None) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1 or (top is not None and value > top):
        bounds = f"from 1 to {top}" if top is not None else "from 1"
        raise ValidationError({name: [f"must be a whole number {bounds}, not {raw!r}"]})
    return value


class Pagination(PageNumberPagination):
    invalid_page_message = "no page {page_number}: {message}"

    def get_page_number(self, request: Request, paginator: DjangoPaginator) -> int:
        raw = request.query_params.get(self.page_query_param)
        return 1 if raw is None else _whole(raw, self.page_query_param)

    def get_page_size(self, request: Request) -> int | None:
        name = self.page_size_query_param
        raw = request.query_params.get(name) if name else None
        return self.page_size if not name or raw is None else _whole(raw, name, self.max_page_size)

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            if param["name"] == self.page_query_param:
                param["schema"]["minimum"] = 1
            elif param["name"] == self.page_size_query_param:
                param["schema"].update(minimum=1, maximum=self.max_page_size)
        return params


class ResultsPagination(Pagination):
    """Lists a client reads in pages of its choosing (sessions, a session's results)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class NodePagination(Pagination):
    """Nodes carry their topology document, one entry per CPU (25 KB at 384 threads): 5 a page unless asked."""

    page_size = 5
    page_size_query_param = "page_size"
    max_page_size = 100
    page_size_query_description = ("nodes a page, each with its topology document (about 25 KB at 384 threads): "
                                   "5 unless asked, at most 100")


class PlacementPagination(ResultsPagination):
    """A session's pods carry their verdicts per node class (about 13 KB a pod at 5,000 nodes): 10 a page unless
    asked, at most ResultsPagination's 1,000."""

    page_size = 10
    page_size_query_description = ("pods a page, each with its verdicts per node class (about 13 KB a pod at 5,000 "
                                   "nodes): 10 unless asked, at most 1000")
