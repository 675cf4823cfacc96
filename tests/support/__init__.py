"""Support code of the tests (paths, polling, servers, lab handles, helpers): no tests and
no fixtures here; fixtures are provided by the conftest.py files."""
