"""Timings of the command line itself: start-up, `make run`, `make test`."""
