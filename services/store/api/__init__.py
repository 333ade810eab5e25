"""The store's gRPC adapters: messages to domain calls and back."""
