"""The Ray engine: the same stage loop as the local engine, with shard tasks and resolve pieces as Ray tasks.

Importing this package does not import Ray; creating the engine does, and fails in one line without it."""
from .engine import RayEngine

__all__ = ["RayEngine"]
