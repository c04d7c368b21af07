# numaweb: one image for the web (gunicorn) and the Celery worker.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 NUMAWEB_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml ./
COPY scheduler_core ./scheduler_core
COPY numaweb ./numaweb
RUN pip install --no-cache-dir ".[web]"
COPY manage.py ./
COPY templates ./templates
COPY static ./static
RUN mkdir -p /data && python manage.py collectstatic --noinput -v0

EXPOSE 8000
CMD ["gunicorn", "-c", "python:numaweb.gunicorn_conf", "numaweb.wsgi", "--bind", "0.0.0.0:8000"]
