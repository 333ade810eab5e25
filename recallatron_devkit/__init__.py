"""The dev kit: the local stack (embedded Postgres and every service as processes),
the load tool, synthetic data, evaluation, plots, and the fixtures tests build
(a small cross-encoder, a generated old store). Used by the CLI, benchmarks and
tests; nothing of the product imports it."""
