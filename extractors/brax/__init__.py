"""The Brax side: Brax PPO's effective settings per Playground family or environment."""
