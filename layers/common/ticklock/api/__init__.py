"""The REST API: written once on the powertools event handler, served locally and by API Gateway."""
