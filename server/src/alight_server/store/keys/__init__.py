"""Key handling at rest: key-encryption keys, the data keys they wrap, sealed cells and logs, upstream API keys."""
