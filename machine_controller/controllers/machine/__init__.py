"""The Machine controller: a Machine to its instance and back (reconciler), the drain before deletion, and its
metrics."""
