"""The pydantic models at the API's edge, one module per resource; each converts to the core's dataclasses
and back. Import a model from its module:

- ``fields``: the field types the models share (strict objects, whole numbers, names, instants, payloads)
- ``jobs``: a job created (one, or a batch), changed, and as shown; ``listing``: GET /jobs (filters, sort,
  cursor); ``holds``: a pause or skip of a job
- ``schedules``: schedules as taken, a preview of one, a job's fires to come
- ``executions``: a job's runs; ``fires``: what became of each fire (a job's slots, the fire ledger);
  ``backfill``: a past window run again
- ``alerts``: alert rules and the alerts raised; ``overview``: the service at a glance
- ``service``: handlers and health; ``errors``: the body of every 4xx and 5xx answer
"""
