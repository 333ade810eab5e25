"""The store's infrastructure: connections and their budget, servers, listeners,
work marks, the migrations runner."""
