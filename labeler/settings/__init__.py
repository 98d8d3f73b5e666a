"""The core's config: topolabel.yaml's model and its JSON Schemas, the `kueue` section's queues and
quantities, and validation problems as people read them."""
