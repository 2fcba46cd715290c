"""Embedded inference: a transformers model served OpenAI-style with token ids and logprobs."""
