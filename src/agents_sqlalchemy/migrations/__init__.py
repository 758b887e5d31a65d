"""The library's Alembic migrations: env.py, script.py.mako and versions/ (see `migrate`)."""
