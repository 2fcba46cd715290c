"""The key guard inference servers run behind; a folder of its own so vLLM's interpreter can import it alone."""
