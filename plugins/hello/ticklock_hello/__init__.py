"""A minimal third-party ticklock plug-in: the handler ``hello.greet``, the setting
``TICKLOCK_HELLO_GREETING``, a system job that greets hourly, and a health check."""

from __future__ import annotations

from dataclasses import dataclass

from ticklock.handlers.plugin import Context, HandlerContext, HealthCheck, Plugin, Registry, Setting, SystemJob, text


@dataclass(frozen=True)
class HelloConfig:
    greeting: str


def register(registry: Registry, context: Context[HelloConfig]) -> None:
    def greet(ctx: HandlerContext) -> None:
        """Logs the greeting to the payload's name."""
        name = ctx.payload.get("name", "world")
        if not isinstance(name, str):
            raise ValueError(f"payload.name must be text, got {name!r}")
        ctx.logger.info("hello.greeted", extra={"said": f"{context.config.greeting}, {name}!"})

    registry.register("hello.greet", greet)


def system_jobs(context: Context[HelloConfig]) -> list[SystemJob]:
    return [SystemJob("hello.greet", every=3600, timeout=10.0, payload={"name": "operator"})]


def health(context: Context[HelloConfig]) -> list[HealthCheck]:
    return [HealthCheck("greeting", lambda: None if len(context.config.greeting) <= 100 else "greeting too long")]


plugin = Plugin(
    name="hello",
    register=register,
    settings=(Setting("greeting", "Hello", text, "what hello.greet says before the name"),),
    config=HelloConfig,
    system_jobs=system_jobs,
    health=health,
    description="the example plug-in",
)
