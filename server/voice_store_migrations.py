"""The PostgreSQL voice store's schema, as numbered migrations applied in order at start-up.

A migration is never edited once released: a change is a new, higher version. Replicas starting
together apply them once, serialised by an advisory lock; a database already at a version newer than
this code knows is refused (an older replica must not write to a schema it does not understand).
"""

from __future__ import annotations

import psycopg

MIGRATION_LOCK = 0x766F63616C6973  # "vocalis": the advisory lock id held while migrating

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, """
        CREATE TABLE vocalis_voice_generations (
            generation   bigserial PRIMARY KEY,
            name         text NOT NULL,
            name_key     text NOT NULL,
            consent      text NOT NULL,
            created_at   double precision NOT NULL,
            ref_text     text,
            description  text,
            content_hash text NOT NULL,
            mime_type    text NOT NULL,
            duration_s   double precision NOT NULL,
            embedding_dim integer,
            original     bytea NOT NULL,
            audio        bytea,       -- mono float32 little-endian at audio_rate
            audio_rate   integer,
            embedding    bytea,       -- float32 little-endian
            retired_at   timestamptz  -- set when no name points here any more
        );
        CREATE TABLE vocalis_voices (
            name_key   text PRIMARY KEY,
            generation bigint NOT NULL REFERENCES vocalis_voice_generations (generation)
        );
        CREATE INDEX vocalis_voice_generations_retired ON vocalis_voice_generations (retired_at)
            WHERE retired_at IS NOT NULL;
    """),
)
LATEST = MIGRATIONS[-1][0]


class SchemaTooNew(RuntimeError):
    pass


def migrate(connection: psycopg.Connection) -> int:
    """Bring the schema to LATEST; returns the version found before. Safe to run from many processes at once."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        connection.execute(
            "CREATE TABLE IF NOT EXISTS vocalis_schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = connection.execute("SELECT coalesce(max(version), 0) FROM vocalis_schema_migrations").fetchone()
        found = int(row[0]) if row else 0
        if found > LATEST:
            raise SchemaTooNew(f"the voice store's schema is at version {found}, newer than this Vocalis knows ({LATEST}); upgrade Vocalis")
        for version, sql in MIGRATIONS:
            if version > found:
                connection.execute(sql)
                connection.execute("INSERT INTO vocalis_schema_migrations (version) VALUES (%s)", (version,))
    return found
