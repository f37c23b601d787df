"""System jobs: the product's own handlers, seeded at boot by name (``TICKLOCK_SYSTEM_JOBS``).

Seeding is idempotent: a job of that name that exists is left as it is - an operator may have changed
its schedule or paused it - and several processes seeding at once leave one job (``JobService.seed``).
"""

from __future__ import annotations

import logging

from ticklock.domain.schedules import IntervalSchedule
from ticklock.domain.service import JobService, JobSpec
from ticklock.errors import ConfigError
from ticklock.settings import Settings

log = logging.getLogger("ticklock.system_jobs")


KNOWN = ("alerts.scan", "catalogue.spot_prices")


def system_jobs(settings: Settings) -> dict[str, JobSpec]:
    """The system jobs the settings allow, by handler name (the walk needs a vendor URL)."""
    jobs = {
        "alerts.scan": JobSpec(
            name="system:alerts.scan",
            handler="alerts.scan",
            schedule=IntervalSchedule(settings.alerts_every),
            payload={},
            # ten minutes, or what the deployment allows (a Lambda runner's timeout less its margin);
            # no retries: the next run is the retry
            timeout=min(600.0, settings.effective_max_timeout),
            max_retries=0,
        ),
    }
    if settings.vendor_url:
        jobs["catalogue.spot_prices"] = JobSpec(
            name="system:catalogue.spot_prices",
            handler="catalogue.spot_prices",
            schedule=IntervalSchedule(settings.catalogue_every),
            payload={},
            timeout=min(900.0, settings.effective_max_timeout),  # fifteen minutes of pages at most
            max_retries=0,  # the next run resumes at the cursor
        )
    return jobs


def seed(service: JobService, settings: Settings) -> None:
    """Create the system jobs ``TICKLOCK_SYSTEM_JOBS`` names that do not exist yet."""
    configured = system_jobs(settings)
    for handler in settings.system_jobs:
        if handler not in KNOWN:
            raise ConfigError(f"TICKLOCK_SYSTEM_JOBS: no system job {handler!r}; known: {', '.join(KNOWN)}")
        spec = configured.get(handler)
        if spec is None:
            log.info("system_job.not_configured", extra={"handler": handler, "needs": "TICKLOCK_VENDOR_URL"})
            continue
        job, created = service.seed(spec)
        log.info(
            "system_job.seeded" if created else "system_job.present", extra={"job_id": job.id, "job_name": job.name}
        )
