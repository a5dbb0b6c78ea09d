"""The pure domain: events, fragments, the neutral request, errors. No I/O."""
