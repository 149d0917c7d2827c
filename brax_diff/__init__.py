"""brax-diff: regenerate the Brax PPO vs SLM-Lab PPO comparison from the code itself.

Pipeline, data flowing one way:
    sources (git blobs at a ref) -> extractors (libcst / PyYAML) -> canonical facts
    -> comparison -> rules -> verification -> rendering (Jinja: Markdown, JSON).
"""

__version__ = "0.2.0"
