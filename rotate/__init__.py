"""rotate — close the credential-rotation loop on Kubernetes.

Imports flow one way: ``cli`` → ``engine`` → ``stages`` → ``clients`` / ``chain`` / ``core``.
The lab (a local stand-in for a cluster) is a separate distribution, ``rotate-lab``
(``lab/rotate_lab``); nothing in the product imports it.  ``rotate lab …`` reaches it through
the entry point ``rotate.plugins:lab`` (``rotate/cli/commands/plugins.py``).
"""

__version__ = "0.1.0"
