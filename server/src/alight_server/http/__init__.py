"""The HTTP layer every app of the server shares: who is calling, the one error envelope, the JSON depth limit, change hooks."""
