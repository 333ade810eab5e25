"""The embedding job: embeds memories after they commit (design §6); its own process
and Deployment, working on the store's workspace databases."""
