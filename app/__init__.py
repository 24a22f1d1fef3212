"""tessera-explorer browser app (runs in Pyodide; its pure parts also on CPython)."""
