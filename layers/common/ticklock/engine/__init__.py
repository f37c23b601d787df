"""The engine: the threads that take fires from the store to their handlers and back. The dispatcher
claims due jobs and hands each fire to a queue at its time (``dispatcher``; on Lambda, ``tick_loop`` runs it
a minute at a time); the local pool's workers (``pool``) or a Lambda runner take each fire through its five
steps (``fire_path``), calling the handler under its deadline (``invoke``, ``retry``) and telling the
world (``reporting``, ``accounting``, ``recovery``). The rules it applies are the domain's, pure."""
