"""One module per CLI verb; each exposes a click command named ``command``.

The CLI loads a verb's module only when that verb runs, so `gitopsq check` never imports the Kubernetes client.
"""
