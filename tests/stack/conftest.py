"""The stack test drives Debian's chromium like the browser tests, with their launch settings and their check
that no request fails."""

from tests.browser.conftest import _no_failed_request, browser_context_args, browser_type_launch_args

__all__ = ["_no_failed_request", "browser_context_args", "browser_type_launch_args"]
