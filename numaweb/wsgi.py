"""WSGI entry point, for tools and tests that speak WSGI; the product serves numaweb.asgi (see its docstring)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
application = get_wsgi_application()
