"""The store's domain: the rules and use cases, plain Python that knows nothing of gRPC."""
