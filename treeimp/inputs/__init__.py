"""What the user gives, checked and converted: rows (X), targets (y), feature groups,
fitted Pipelines' steps, thread counts, file paths. Knows no model class."""
