"""Recallatron's shared package: settings, logging, gRPC plumbing and the generated stubs."""

__version__ = "0.1.0"
