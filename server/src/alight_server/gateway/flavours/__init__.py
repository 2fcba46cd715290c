"""API flavours: OpenAI chat/completions (passthrough), Responses, Anthropic Messages, translated to and from the upstream."""
