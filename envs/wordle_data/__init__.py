"""Word lists shipped with rolloutlab (data only; see ``SOURCE.md``). A package so that they install as package data."""
