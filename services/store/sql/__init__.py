"""The store's SQL: named, parameterised queries and the versioned migrations."""
