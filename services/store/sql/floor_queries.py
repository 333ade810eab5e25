"""What `recallatron calibrate-floor` reads of a workspace (the owner's pool):
the newest memories recall could return (neither forgotten nor superseded)
that hold a vector of the current model and embed-input version, with it."""

CALIBRATION_MEMORIES = """
SELECT m.title, m.body, e.embedding::real[]
FROM memory m
JOIN memory_embedding e ON e.memory_id = m.id
WHERE e.model_id = %(model_id)s
  AND e.input_version = %(input_version)s
  AND m.invalidated_at IS NULL
  AND m.superseded_by_id IS NULL
ORDER BY m.created_at DESC, m.id DESC
LIMIT %(limit)s
"""

CALIBRATION_MEMORY_COUNT = """
SELECT count(*) FROM memory WHERE invalidated_at IS NULL AND superseded_by_id IS NULL
"""

# The migration report's floor section: the migrated memories (not embedded
# yet when the report is made), newest first.
MIGRATED_MEMORIES = """
SELECT title, body FROM memory
WHERE origin = 'migrated' AND invalidated_at IS NULL AND superseded_by_id IS NULL
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s
"""
