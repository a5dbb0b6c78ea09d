"""contextfold: an event-sourced context builder for LLM agents."""
