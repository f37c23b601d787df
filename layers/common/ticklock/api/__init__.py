"""The REST API: one route table (``routes``) answered by ``app.Api``, served by ``ticklock serve``
(``asgi``, ``server``) and by the API function (``gateway``)."""
