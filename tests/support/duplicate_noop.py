"""A plug-in that registers 'noop' a second time: boot must fail."""

from ticklock.handlers.contract import HandlerContext, Registry


def register(registry: Registry) -> None:
    def noop_again(ctx: HandlerContext) -> None:
        return None

    registry.register("noop", noop_again)
