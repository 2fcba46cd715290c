"""The LLM judge as a reward source: its config, prompt, caller, injection check and the rewards it writes."""
