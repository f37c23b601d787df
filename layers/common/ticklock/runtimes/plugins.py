"""The installed plug-ins, bound to this process: their handlers in a registry, their system jobs seeded,
their health checks for ``/health``. Shared by every composition root (``ticklock serve``, the Lambdas).

Seeding is idempotent: a job of that name that exists is left as it is - an operator may have changed
its schedule or paused it - and several processes seeding at once leave one job (``JobService.seed``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from ticklock.adapters.email import sender_from
from ticklock.adapters.webhook import webhook_from
from ticklock.domain.handlers import Registry
from ticklock.domain.schedules import IntervalSchedule
from ticklock.domain.service import JobService, JobSpec
from ticklock.errors import ConfigError, TicklockError
from ticklock.plugin import Context, HealthCheck, Plugin, SystemJob, discover
from ticklock.ports import EmailSender, WebhookSender
from ticklock.settings import ALL, Settings

log = logging.getLogger("ticklock.plugins")


class Plugins:
    """``settings.plugins`` with their contexts: each its own section, the engine's settings, the notifiers."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.email = functools.cache(self._email)
        self.webhook = functools.cache(self._webhook)
        self.bound: list[tuple[Plugin[Any], Context[Any]]] = [
            (p, Context(settings.sections.get(p.name), settings, self.email, self.webhook)) for p in settings.plugins
        ]

    def _email(self) -> EmailSender | None:
        return sender_from(self.settings)

    def _webhook(self) -> WebhookSender:
        return webhook_from(self.settings)

    def registry(self) -> Registry:
        """A registry with every plug-in's handlers. Raises ``DuplicateHandler`` or ``ConfigError``."""
        return self.register(Registry(self.settings))

    def register(self, registry: Registry) -> Registry:
        """Add every plug-in's handlers to ``registry``; returns it."""
        for plugin, context in self.bound:
            try:
                plugin.register(registry, context)
            except TicklockError:
                raise
            except Exception as exc:
                raise ConfigError(f"plug-in {plugin.name!r} ({plugin.origin}) failed to register: {exc}") from exc
        return registry

    def declared(self) -> dict[str, SystemJob]:
        """Every system job the plug-ins declare, configured or not, by handler name."""
        jobs: dict[str, SystemJob] = {}
        for plugin, context in self.bound:
            for job in plugin.system_jobs(context):
                if job.handler in jobs:
                    raise ConfigError(f"two plug-ins declare the system job {job.handler!r}")
                jobs[job.handler] = job
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
        exist yet. Raises ``ConfigError`` for a name no plug-in declares."""
        declared = self.declared()
        wanted = tuple(declared) if self.settings.system_jobs == (ALL,) else self.settings.system_jobs
        for handler in wanted:
            job = declared.get(handler)
            if job is None:
                known = ", ".join(sorted(declared)) or "none"
                raise ConfigError(f"TICKLOCK_SYSTEM_JOBS: no system job {handler!r}; known: {known}")
            if job.needs is not None:
                log.info("system_job.not_configured", extra={"handler": handler, "needs": job.needs})
                continue
            seeded, created = service.seed(self._spec(job))
            log.info(
                "system_job.seeded" if created else "system_job.present",
                extra={"job_id": seeded.id, "job_name": seeded.name},
            )

    def health_checks(self) -> list[HealthCheck]:
        """Every plug-in's health checks, named ``<plugin>.<check>``."""
        return [
            HealthCheck(f"{plugin.name}.{check.name}", check.check)
            for plugin, context in self.bound
            for check in plugin.health(context)
        ]

    def warn_deprecated(self) -> None:
        """Log each older setting name that was used (start-up)."""
        for message in self.settings.deprecated:
            log.warning("settings.deprecated", extra={"detail": message})


def register_all(
    registry: Registry, *, modules: tuple[str, ...] = (), only: Iterable[Plugin[Any]] | None = None
) -> Registry:
    """Fill ``registry`` with the handlers of every installed plug-in and of ``modules`` (or of ``only``
    these), configured from the environment: for tests and scripts (a runtime uses
    ``Plugins(settings).registry()``). Returns it. Raises ``DuplicateHandler`` or ``ConfigError``."""
    plugins = discover(modules) if only is None else tuple(only)
    return Plugins(Settings.load(plugins=plugins)).register(registry)
