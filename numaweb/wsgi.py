"""WSGI entry point, for tools and tests that speak WSGI; the product serves numaweb.asgi (see its docstring)."""

import os

from django.core.wsgi import get_wsgi_application

from numaweb.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
prepare()
application = get_wsgi_application()
