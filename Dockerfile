# numaweb: one image for the web (gunicorn) and the Celery worker, run as an unprivileged user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 NUMAWEB_DATA_DIR=/data STATIC_ROOT=/app/staticfiles
WORKDIR /app
# the locked versions, every file's hash checked (requirements/base.txt, written by `./dev lock`), then the project
COPY requirements/base.txt ./requirements/base.txt
RUN pip install --no-cache-dir --require-hashes -r requirements/base.txt
COPY pyproject.toml ./
COPY scheduler_core ./scheduler_core
COPY numaweb ./numaweb
RUN pip install --no-cache-dir --no-deps .
COPY manage.py ./
COPY templates ./templates
COPY static ./static
# uid 10001 owns only what it writes: the data folder (SQLite, queue, secret key: a volume in compose) and the
# collected static files (the web service collects again at start, finding them current). The build's own
# secret key is a throwaway, so no key is baked into the image.
RUN useradd --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin numaweb \
    && mkdir -p /data "$STATIC_ROOT" && chown numaweb:numaweb /data "$STATIC_ROOT"
USER 10001:10001
RUN DJANGO_SECRET_KEY=build-only NUMAWEB_DATA_DIR=/tmp/build python manage.py collectstatic --noinput -v0 \
    && rm -rf /tmp/build

EXPOSE 8000
CMD ["gunicorn", "-c", "python:numaweb.gunicorn_conf", "numaweb.asgi", "--bind", "0.0.0.0:8000"]
