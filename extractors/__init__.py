"""Static extractors: upstream code at a git ref -> canonical facts with provenance.

- ``pyast``: libcst helpers shared by the Python extractors.
- ``brax``: Brax's PPO trainer and networks, layered with MuJoCo Playground's configs.
- ``slm``: SLM-Lab's PPO spec files and the code that interprets them.
"""
