"""Django's SQLite backend with connections kept open between database calls (see base)."""
