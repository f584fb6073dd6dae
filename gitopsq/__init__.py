"""gitopsq: a GitOps controller and Kueue-compatible admission loop for Kubernetes batch queues."""

__version__ = "0.1.0"
__all__ = ["__version__"]
