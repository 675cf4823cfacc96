"""rotate — close the credential-rotation loop on Kubernetes.

Imports flow one way: ``cli`` → ``engine`` → ``stages`` → ``clients`` / ``chain`` / ``core``.
``rotate.lab`` is a separate world (a local stand-in for a cluster); nothing in the product
imports it except the CLI's ``lab`` command group, lazily.
"""

__version__ = "0.1.0"
