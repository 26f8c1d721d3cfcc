"""Settings for both running modes.

Embedded default (no configuration): a SQLite file under ``var/``, Celery tasks run
eagerly in process and a random secret key made once in ``var/secret_key``. Production:
``DATABASE_URL=postgres://…`` and ``CELERY_BROKER_URL=redis://…`` (plus
``DJANGO_SECRET_KEY``, required, and ``DJANGO_ALLOWED_HOSTS``). Every secret and host comes
from the environment.
"""

import os
import re
import secrets
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("HUMEVAL_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, "1" if default else "0").strip().lower() in {"1", "true", "yes"}


def _env_list(name: str, default: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


def _embedded_secret_key(path: Path) -> str:
    """The embedded mode's key: random, made on first start, kept in ``path`` (mode 0600)
    and read by every later start and process. Created under a temporary name and linked
    into place, so processes starting together agree on one key."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_urlsafe(50))
                file.flush()
                os.fsync(file.fileno())
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: theirs is the key
        finally:
            os.unlink(tmp)
    key = path.read_text().strip()
    if len(key) < 50:
        raise ImproperlyConfigured(f"{path} holds no usable secret key; delete it to make one")
    return key


DEBUG = _env_bool("DJANGO_DEBUG")
# Production (a DATABASE_URL) takes its key from the environment and refuses to start
# without one; the embedded mode (no DATABASE_URL: SQLite under var/) makes its own once.
if os.environ.get("DJANGO_SECRET_KEY"):
    SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
elif os.environ.get("DATABASE_URL"):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set. With DATABASE_URL (production) the secret key must "
        "come from the environment, e.g. DJANGO_SECRET_KEY=$(python -c "
        "'import secrets; print(secrets.token_urlsafe(50))')."
    )
else:
    SECRET_KEY = _embedded_secret_key(VAR_DIR / "secret_key")
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "kinds",
    "annotator",
    "protocol",
    "analysis",
    "crowd",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "annotator.middleware.FramedCookies",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "annotator.middleware.ContentSecurityPolicy",
    # last, as django-axes asks: turns a locked-out admin login into its 429 page
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
_database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'humeval.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # BEGIN IMMEDIATE: an atomic block takes SQLite's write lock at once, so the
    # assignment service's read-then-write is serialised as FOR UPDATE would do.
    # Write-ahead log: a commit syncs the log once (measured 5 ms here) instead of the
    # rollback journal's several syncs (14 ms), and readers never wait for the writer.
    # synchronous=FULL keeps every commit durable, as before.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
else:
    # Reconnect transparently after a PostgreSQL restart.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if _env_bool("HUMEVAL_PG_PREPARED", True):
        # Parameters bound by the server, and a statement run five times on a connection is
        # prepared: PostgreSQL then no longer parses and plans it on every request, which was
        # half of its CPU per annotation cycle. Turn off (HUMEVAL_PG_PREPARED=0) behind a
        # connection pooler in transaction mode that cannot carry prepared statements.
        DATABASES["default"].setdefault("OPTIONS", {}).update(
            {"server_side_binding": True, "prepare_threshold": 5}
        )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache (throttle counters) ------------------------------------------------------------
# A request never waits long on Redis: annotator/throttle.py counts in process memory while
# it is unreachable and tries it again a few seconds later.
_cache_url = os.environ.get("HUMEVAL_CACHE_URL", "")
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
        if _cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Celery ---------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The worker outlives a broker outage: it reconnects for as long as it takes, and a task
# running when the connection drops is cancelled and delivered again (an acks_late task
# that finished on the dead connection could not be acknowledged, and its ack on the closed
# channel made the worker exit with "AttributeError: 'NoneType' object has no attribute
# 'hostname'"); the protocol's tasks are idempotent.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_SERIALIZER = "json"
# A task whose worker died is delivered again after this long (Redis keeps it unacked);
# the protocol also re-queues undecided complete rounds whenever a worker starts.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
# A submit whose follow-up cannot be queued (Redis down) is still stored: publishing gives
# up quickly, and the periodic sweep below queues the work once the broker is back.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
_sweep = float(os.environ.get("HUMEVAL_SWEEP_SECONDS", "60"))
CELERY_BEAT_SCHEDULE = {
    "recover-rounds": {"task": "protocol.recover_rounds", "schedule": _sweep},
    "release-expired-leases": {"task": "annotator.release_expired_leases", "schedule": _sweep},
    "sweep-unused-entries": {"task": "annotator.sweep_unused_entries", "schedule": _sweep},
    "sweep-job-files": {"task": "annotator.sweep_job_files", "schedule": _sweep},
    # crowd platforms: places, stop, submissions polled (the fallback for hooks)
    "crowd-sync": {"task": "crowd.sync_all", "schedule": _sweep},
}
CELERY_ACCEPT_CONTENT = ["json"]
# Queues (docs/reliability.md, "Queues"): round decisions and the lease sweep on "rounds",
# LLM judge runs on "judge", everything else (background imports and exports …) on
# "default". Each queue has its own worker processes (docker-compose.yml), so a judge run or
# a big export never delays a round's decision.
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "protocol.decide_round": {"queue": "rounds"},
    "protocol.recover_rounds": {"queue": "rounds"},
    "annotator.release_expired_leases": {"queue": "rounds"},
    "annotator.run_judge": {"queue": "judge"},
}
HUMEVAL_CELERY_QUEUES = ("rounds", "judge", "default")

# --- Auth, i18n, static ------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "admin:login"
# Admin logins are counted by django-axes (in the database, so a Redis outage changes
# nothing): after HUMEVAL_ADMIN_LOGIN_FAILURES wrong passwords for one user from one address
# that pair is locked out (429, even with the right password) for
# HUMEVAL_ADMIN_LOCKOUT_MINUTES. Addresses as the throttles see them (trusted proxies).
AUTHENTICATION_BACKENDS = [
    "config.auth.LoginAttemptsBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("HUMEVAL_ADMIN_LOGIN_FAILURES", "10"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("HUMEVAL_ADMIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "config.auth.login_client_ip"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Lockouts are managed with `manage.py axes_reset…`, not in the researchers' admin; only
# failures are recorded (no row per successful login).
AXES_ENABLE_ADMIN = False
AXES_DISABLE_ACCESS_LOG = True
LANGUAGE_CODE = "en"
# The worker pages' languages (docs/languages.md): a study names its own and the ones a
# worker may switch to; the catalogs live in locale/ (.po and their compiled .mo).
LANGUAGES = [
    ("en", "English"),
    ("de", "Deutsch"),
    ("fr", "Français"),
    ("es", "Español"),
    ("zh-hans", "简体中文"),
    ("ja", "日本語"),
    ("ar", "العربية"),
    ("he", "עברית"),
    ("cs", "Čeština"),
    ("ru", "Русский"),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise expects it before collectstatic
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.storage.StaticStorage"},
}
DATA_UPLOAD_MAX_MEMORY_SIZE = 50 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

# --- Security (production turns these on with HUMEVAL_HTTPS=1) --------------------------
HTTPS = _env_bool("HUMEVAL_HTTPS")
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS and _env_bool("HUMEVAL_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = 31536000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp) on every page; worker pages (/w/) get their own,
# as strict, policy (annotator/middleware.py). The API docs, the admin and the reports
# need nothing inline (the report's one <style> is allowed by its hash in its view).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}
# MTurk shows the study in a frame on its site: an MTurk participation's pages may be
# framed by these origins (no X-Frame-Options there), and its end page posts the HIT to
# `turkSubmitTo`/mturk/externalSubmit, accepted only for these hosts.
HUMEVAL_MTURK_FRAME_ANCESTORS = _env_list(
    "HUMEVAL_MTURK_FRAME_ANCESTORS", "https://www.mturk.com,https://workersandbox.mturk.com"
)
HUMEVAL_MTURK_SUBMIT_HOSTS = _env_list(
    "HUMEVAL_MTURK_SUBMIT_HOSTS", "https://www.mturk.com,https://workersandbox.mturk.com"
)
SESSION_COOKIE_HTTPONLY = True

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "annotator.throttle.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "annotator.throttle.AnonThrottle",
        "annotator.throttle.UserThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("HUMEVAL_THROTTLE_API_ANON", "60/min"),
        "user": os.environ.get("HUMEVAL_THROTTLE_API_USER", "1200/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "humeval API",
    "DESCRIPTION": "Studies, labels with provenance, and imports.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Product defaults ------------------------------------------------------------------------
# Entering a study: per client address, and per study (a crowd arrives at once).
HUMEVAL_THROTTLE_ENTRY = os.environ.get("HUMEVAL_THROTTLE_ENTRY", "30/min")
# The study's budget counts new entrants only, each client address once per window
# (annotator/throttle.py allow_entry): returning workers never wait for it.
HUMEVAL_THROTTLE_ENTRY_STUDY = os.environ.get("HUMEVAL_THROTTLE_ENTRY_STUDY", "600/min")
# An entry that never led to any work (no item taken, no test question answered, no code)
# is deleted after this many minutes by the periodic sweep, with a worker left with nothing.
HUMEVAL_ENTRY_SWEEP_MINUTES = float(os.environ.get("HUMEVAL_ENTRY_SWEEP_MINUTES", "120"))
# Wrong API tokens per client address; past it every token from there answers 429.
HUMEVAL_THROTTLE_API_TOKEN_FAILURES = os.environ.get(
    "HUMEVAL_THROTTLE_API_TOKEN_FAILURES", "30/min"
)
# Reverse proxies (addresses or CIDRs, comma-separated) whose X-Forwarded-For is believed:
# the client is the right-most address in it that is not one of them. Empty: REMOTE_ADDR.
HUMEVAL_TRUSTED_PROXIES = _env_list("HUMEVAL_TRUSTED_PROXIES", "")
# Largest study or ratings file accepted by import_study, the admin and the API (bytes);
# a larger one is refused before it is read or parsed.
HUMEVAL_IMPORT_MAX_BYTES = int(os.environ.get("HUMEVAL_IMPORT_MAX_BYTES", str(200 * 1024 * 1024)))
# An API import above this size runs as a background job (202 and a job URL to poll);
# its upload waits in HUMEVAL_JOB_DIR and is deleted whatever the outcome.
HUMEVAL_IMPORT_JOB_BYTES = int(os.environ.get("HUMEVAL_IMPORT_JOB_BYTES", str(20 * 1024 * 1024)))
HUMEVAL_JOB_DIR = Path(os.environ.get("HUMEVAL_JOB_DIR", VAR_DIR / "jobs"))
# An API Judge-Bench export of a study with more labels than this (or any with ?async=1)
# runs as a background job writing its file to HUMEVAL_JOB_DIR; the file is served to the
# job's owner for HUMEVAL_EXPORT_KEEP_SECONDS, then the periodic sweep deletes it.
HUMEVAL_EXPORT_JOB_LABELS = int(os.environ.get("HUMEVAL_EXPORT_JOB_LABELS", "20000"))
HUMEVAL_EXPORT_KEEP_SECONDS = int(os.environ.get("HUMEVAL_EXPORT_KEEP_SECONDS", str(24 * 3600)))
# A job still queued or running this long after it was created lost its worker (a crash, an
# OOM kill): the sweep fails it and deletes its files (annotator/jobs.py).
HUMEVAL_JOB_STALE_SECONDS = int(os.environ.get("HUMEVAL_JOB_STALE_SECONDS", "3600"))
HUMEVAL_THROTTLE_SUBMIT = os.environ.get("HUMEVAL_THROTTLE_SUBMIT", "120/min")
# A worker page that meets a dropped database connection (a PostgreSQL restart) waits up
# to this long for a fresh one and runs again once (annotator/resilience.py).
HUMEVAL_DB_RETRY_SECONDS = float(os.environ.get("HUMEVAL_DB_RETRY_SECONDS", "10"))
# Leases (docs/protocol.md, "Leases at the end of a round"): an open task page renews its
# lease every HUMEVAL_LEASE_HEARTBEAT_SECONDS; a lease not renewed for
# HUMEVAL_LEASE_IDLE_SECONDS may go to a worker who has no item (the study's lease_seconds
# stays the longest any lease lasts). Background tabs get timers once a minute at worst,
# so keep the idle time above 60 s plus a heartbeat.
HUMEVAL_LEASE_IDLE_SECONDS = float(os.environ.get("HUMEVAL_LEASE_IDLE_SECONDS", "120"))
HUMEVAL_LEASE_HEARTBEAT_SECONDS = float(
    os.environ.get("HUMEVAL_LEASE_HEARTBEAT_SECONDS", str(HUMEVAL_LEASE_IDLE_SECONDS / 4))
)
HUMEVAL_THROTTLE_RENEW = os.environ.get("HUMEVAL_THROTTLE_RENEW", "30/min")
HUMEVAL_PROLIFIC_COMPLETE_URL = os.environ.get(
    "HUMEVAL_PROLIFIC_COMPLETE_URL", "https://app.prolific.com/submissions/complete"
)


def _judge_endpoints(value: str) -> list[tuple[str, str]]:
    """``URL[=KEY_VAR]`` entries, comma-separated: the judge base URLs a researcher may pick
    in the admin, each with the environment variable of the operator's key bound to it."""
    endpoints = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        url, _, key_env = entry.rpartition("=")
        if not url or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
            url, key_env = entry, ""
        if not re.match(r"https?://[^/\s]+", url):
            raise ImproperlyConfigured(
                f"HUMEVAL_JUDGE_ENDPOINTS: {entry!r} is not URL or URL=KEY_VARIABLE"
            )
        endpoints.append((url.rstrip("/"), key_env))
    return endpoints


# LLM judges (docs/analysis.md, "Judge ratings from a model"). The operator's keys go only to
# the endpoints they are bound to here, e.g.
# HUMEVAL_JUDGE_ENDPOINTS="https://api.openai.com/v1=OPENAI_API_KEY, http://gpu-box:8080/v1";
# a researcher may also name an endpoint of their own with their own key (or none).
HUMEVAL_JUDGE_ENDPOINTS = _judge_endpoints(os.environ.get("HUMEVAL_JUDGE_ENDPOINTS", ""))
HUMEVAL_JUDGE_CONNECT_SECONDS = float(os.environ.get("HUMEVAL_JUDGE_CONNECT_SECONDS", "10"))
HUMEVAL_JUDGE_READ_SECONDS = float(os.environ.get("HUMEVAL_JUDGE_READ_SECONDS", "60"))
HUMEVAL_JUDGE_CALL_SECONDS = float(os.environ.get("HUMEVAL_JUDGE_CALL_SECONDS", "300"))
HUMEVAL_JUDGE_MAX_ANSWER_BYTES = int(
    os.environ.get("HUMEVAL_JUDGE_MAX_ANSWER_BYTES", str(1024 * 1024))
)
HUMEVAL_JUDGE_RUN_SECONDS = float(os.environ.get("HUMEVAL_JUDGE_RUN_SECONDS", str(4 * 3600)))
# A running judge run writes a heartbeat every few seconds; one silent this long lost its
# worker: shown stale, cancelled at the first ask, and the study can be rated again.
HUMEVAL_JUDGE_STALE_SECONDS = float(os.environ.get("HUMEVAL_JUDGE_STALE_SECONDS", "60"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("HUMEVAL_LOG_LEVEL", "WARNING")},
    # embedded mode (no broker, tasks run in the process): kombu's "No hostname was
    # supplied" warning is about a connection that is never made
    "loggers": {} if CELERY_BROKER_URL else {"kombu.connection": {"level": "ERROR"}},
}
