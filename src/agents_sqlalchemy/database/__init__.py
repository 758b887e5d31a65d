"""Database plumbing: engines per event loop, units of work in one transaction each, the
SQLite file the store opens itself, and what a driver's failure means.

`units.Database` is what the repository runs on; nothing here knows the library's tables.
"""
