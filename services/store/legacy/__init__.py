"""Migration from the old store (docs/migration.md)."""
