"""The installed plug-ins, bound to this process: their handlers in a registry, their system jobs seeded,
their health checks for ``/health``, the engine's notifiers handed to them. Shared by every composition
root (``ticklock serve``, the Lambdas).

Every call into a plug-in is guarded: whatever it raises (or a wrong thing it returns) stops the start
with a ``ConfigError`` naming the plug-in, which the command line turns into a message and exit code 2.
Seeding is idempotent: a job of that name that exists is left as it is - an operator may have changed
its schedule or paused it - and several processes seeding at once leave one job (``JobService.seed``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from ticklock.adapters.email import sender_from
from ticklock.adapters.webhook import webhook_from
from ticklock.domain.schedules import IntervalSchedule
from ticklock.domain.service import JobService, JobSpec
from ticklock.errors import ConfigError, InvalidJob, TicklockError
from ticklock.handlers.contract import Registry
from ticklock.handlers.plugin import Context, HealthCheck, Plugin, SystemJob, discover
from ticklock.ports import EmailSender, WebhookSender
from ticklock.settings import ALL, Settings

log = logging.getLogger("ticklock.plugins")
seeding = logging.getLogger("ticklock.system_jobs")  # the name its lines have always had
T = TypeVar("T")


class _Once:
    """A value built on the first call, by one thread, and then shared (a notifier's client)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._mutex = threading.Lock()
        self._built = False
        self._value: Any = None

    def __call__(self) -> Any:
        with self._mutex:
            if not self._built:
                self._value = self._build()
                self._built = True
            return self._value


class Plugins:
    """``settings.plugins`` with their contexts: each its own section, the engine's settings, the notifiers."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.email: Callable[[], EmailSender | None] = _Once(lambda: sender_from(settings))
        self.webhook: Callable[[], WebhookSender | None] = _Once(lambda: webhook_from(settings))
        self.bound: list[tuple[Plugin[Any], Context[Any]]] = [
            (p, Context(settings.sections.get(p.name), settings, self.email, self.webhook)) for p in settings.plugins
        ]

    def registry(self) -> Registry:
        """A registry with every plug-in's handlers. Raises ``DuplicateHandler`` or ``ConfigError``."""
        return self.register(Registry(self.settings))

    def register(self, registry: Registry) -> Registry:
        """Add every plug-in's handlers to ``registry``; returns it."""
        for plugin, context in self.bound:
            _guarded(plugin, "register", partial(plugin.register, registry, context))
        return registry

    def declared(self) -> dict[str, SystemJob]:
        """Every system job the plug-ins declare, configured or not, by handler name."""
        jobs: dict[str, SystemJob] = {}
        owners: dict[str, str] = {}
        for plugin, context in self.bound:
            for job in _guarded(plugin, "system_jobs", partial(_listed, plugin.system_jobs, context)):
                if not isinstance(job, SystemJob):
                    raise ConfigError(f"plug-in {plugin.name!r}: {job!r} is not a ticklock.plugin.SystemJob")
                if isinstance(job.every, bool) or not isinstance(job.every, int) or job.every < 1:
                    raise ConfigError(
                        f"plug-in {plugin.name!r}: system job {job.handler!r} runs every whole number of seconds "
                        f"(at least 1), got {job.every!r}"
                    )
                if job.handler in jobs:
                    raise ConfigError(
                        f"the system job {job.handler!r} is declared twice: by {owners[job.handler]!r} "
                        f"and by {plugin.name!r}"
                    )
                jobs[job.handler] = job
                owners[job.handler] = plugin.name
        return jobs

    def system_jobs(self) -> dict[str, JobSpec]:
        """The configured system jobs as the jobs they seed, by handler name."""
        return {name: self._spec(job) for name, job in self.declared().items() if job.needs is None}

    def _spec(self, job: SystemJob) -> JobSpec:
        return JobSpec(
            name=job.name,
            handler=job.handler,
            schedule=IntervalSchedule(int(job.every)),
            payload=dict(job.payload),
            timeout=min(job.timeout, self.settings.effective_max_timeout),
            max_retries=job.max_retries,
        )

    def seed(self, service: JobService) -> None:
        """Create the system jobs ``TICKLOCK_SYSTEM_JOBS`` names (all: every declared one) that do not
        exist yet. Raises ``ConfigError`` for a name no plug-in declares, or a job it cannot create."""
        declared = self.declared()
        asked = self.settings.system_jobs
        wanted = tuple(declared) if any(name.lower() == ALL for name in asked) else asked
        for handler in wanted:
            job = declared.get(handler)
            if job is None:
                known = ", ".join(sorted(declared)) or "none"
                raise ConfigError(f"TICKLOCK_SYSTEM_JOBS: no system job {handler!r}; known: {known}")
            if job.needs is not None:
                seeding.info("system_job.not_configured", extra={"handler": handler, "needs": job.needs})
                continue
            try:
                seeded, created = service.seed(self._spec(job))
            except InvalidJob as exc:  # its handler is not registered, its timeout too long, ...
                raise ConfigError(f"the system job {job.name!r} cannot be created: {exc}") from exc
            seeding.info(
                "system_job.seeded" if created else "system_job.present",
                extra={"job_id": seeded.id, "job_name": seeded.name},
            )

    def health_checks(self) -> list[HealthCheck]:
        """Every plug-in's health checks, named ``<plugin>.<check>``. Raises ``ConfigError`` for a wrong one."""
        checks: dict[str, HealthCheck] = {}
        for plugin, context in self.bound:
            for check in _guarded(plugin, "health", partial(_listed, plugin.health, context)):
                if not isinstance(check, HealthCheck) or not callable(check.check):
                    raise ConfigError(f"plug-in {plugin.name!r}: {check!r} is not a ticklock.plugin.HealthCheck")
                name = f"{plugin.name}.{check.name}"
                if name in checks:
                    raise ConfigError(f"plug-in {plugin.name!r} declares the health check {check.name!r} twice")
                checks[name] = HealthCheck(name, check.check)
        return list(checks.values())

    def warn_deprecated(self) -> None:
        """Log each older setting name that was used (start-up)."""
        for message in self.settings.deprecated:
            log.warning("settings.deprecated", extra={"detail": message})


def _listed(declare: Callable[[Context[Any]], Iterable[T]], context: Context[Any]) -> list[T]:
    return list(declare(context))


def _guarded(plugin: Plugin[Any], what: str, call: Callable[[], T]) -> T:
    """``call`` (a plug-in's ``what``), with anything it raises but ticklock's own errors as a ``ConfigError``."""
    try:
        return call()
    except TicklockError:
        raise
    except Exception as exc:
        raise ConfigError(f"plug-in {plugin.name!r} ({plugin.origin}) failed in its {what}: {exc}") from exc


def register_all(
    registry: Registry, *, modules: tuple[str, ...] = (), only: Iterable[Plugin[Any]] | None = None
) -> Registry:
    """Fill ``registry`` with the handlers of every installed plug-in and of ``modules`` (or of ``only``
    these), configured from the environment: for tests and scripts (a runtime uses
    ``Plugins(settings).registry()``). Returns it. Raises ``DuplicateHandler`` or ``ConfigError``."""
    plugins = discover(modules) if only is None else tuple(only)
    return Plugins(Settings.load(plugins=plugins)).register(registry)
