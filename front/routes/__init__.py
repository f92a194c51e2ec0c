"""The REST API's routes, one module per collection; :mod:`front.api` puts them together."""
