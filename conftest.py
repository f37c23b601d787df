"""The repository's test fixtures (the real servers, the stores) for every suite under it: the engine's
``tests/`` and each plug-in's own (``plugins/<name>/tests_<name>/``)."""

pytest_plugins = ["tests.support.fixtures"]
