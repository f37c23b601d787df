"""The domain core: schedules, jobs and executions, the task lifecycle and the dispatcher.

Nothing in here imports an adapter; it talks to the outside through ``ticklock.ports``.
"""
