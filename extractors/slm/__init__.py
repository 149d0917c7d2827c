"""The SLM-Lab side: a spec variant's effective PPO settings at a git ref."""
