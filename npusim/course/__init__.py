"""Course tooling: generating learner labs from solutions, and (in grading) marking submissions."""
