"""Values and primitives every layer shares: secrets, errors, waiting, durations, refs.

Nothing here imports a third-party library, so every layer may depend on it cheaply.
"""
