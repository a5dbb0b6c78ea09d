"""Pure folds and the build pipeline: events -> fragments -> selection -> order -> rendering."""
