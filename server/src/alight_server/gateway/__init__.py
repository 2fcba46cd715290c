"""Gateway: the OpenAI-compatible capture proxy agents call."""
