"""Persistence: the run log on eventsourcing (SQLite default, PostgreSQL) and artifacts."""
